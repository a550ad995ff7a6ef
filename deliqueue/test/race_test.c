/* SPDX-License-Identifier: Apache-2.0 */
/* Producers, removers by criteria, cancellers by token and the consumer
   race; every accepted message must be delivered or discarded exactly once
   and nothing may be delivered early.  DQ_RACE_SECONDS sets the length
   (default 2). */
#include <pthread.h>
#include <stdlib.h>

#include "test_util.h"

#define PRODUCERS    2
#define PER_PRODUCER (1 << 16)

static _Atomic uint8_t fate[PRODUCERS][PER_PRODUCER]; /* 1 delivered, 2 discarded */
static _Atomic dq_token tokens[PRODUCERS][PER_PRODUCER];
static _Atomic int posted[PRODUCERS];
static _Atomic bool stop;
static _Atomic size_t violations;

/* Both tests use the arrays above; where the runner does not fork per
   test (the sanitizer configs), the second would see the first's fates. */
static void reset_race_state(void)
{
    for (int p = 0; p < PRODUCERS; p++) {
        for (int i = 0; i < PER_PRODUCER; i++) {
            atomic_store(&fate[p][i], 0);
            atomic_store(&tokens[p][i], 0);
        }
        atomic_store(&posted[p], 0);
    }
    atomic_store(&stop, false);
    atomic_store(&violations, 0);
}

static void race_discard(const dq_msg *m, void *ctx)
{
    (void)ctx;
    if (atomic_fetch_add(&fate[m->arg1][m->arg2], 2) != 0)
        atomic_fetch_add(&violations, 1);
}

static void *producer(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned seed = (unsigned)id + 1;
    for (int i = 0; i < PER_PRODUCER && !atomic_load(&stop); i++) {
        dq_msg m = {
            .target = &target_a, .what = rand_r(&seed) % 8, .arg1 = id, .arg2 = i
        };
        if (i % 5 == 0)
            m.flags = DQ_ASYNC;
        dq_token t;
        int err;
        switch (i % 4) {
        case 0: err = dq_post(q, &m, &t); break;
        case 1: err = dq_post_delayed(q, &m, rand_r(&seed) % 2000000, &t); break;
        case 2: err = dq_post_at_front(q, &m, &t); break;
        default: err = dq_post_delayed(q, &m, 50000, &t); break;
        }
        cr_assert_eq(err, 0);
        atomic_store(&tokens[id][i], t);
        atomic_store(&posted[id], i + 1);
    }
    return NULL;
}

static void *remover(void *arg)
{
    (void)arg;
    unsigned seed = 99;
    while (!atomic_load(&stop)) {
        dq_match m = { .target = &target_a,
                       .fields = DQ_MATCH_WHAT,
                       .what = rand_r(&seed) % 64 };
        dq_remove(q, &m);
        dq_has(q, &m);
    }
    return NULL;
}

static void *canceller(void *arg)
{
    (void)arg;
    unsigned seed = 7;
    while (!atomic_load(&stop)) {
        int p = rand_r(&seed) % PRODUCERS;
        int n = atomic_load(&posted[p]);
        if (n == 0)
            continue;
        /* half the time the newest post: racing its delivery, when it is
           the stack's topmost message and the looper may be claiming it */
        int i = rand_r(&seed) % 2 ? n - 1 : rand_r(&seed) % n;
        int err = dq_cancel(q, atomic_load(&tokens[p][i]));
        cr_assert(err == 0 || err == -ENOENT, "cancel: %d", err);
        if (err == 0 && atomic_load(&fate[p][i]) != 2)
            atomic_fetch_add(&violations, 1); /* reported before returning */
    }
    return NULL;
}

TestSuite(race, .fini = leak_check);

Test(race, producers_removers_cancellers_and_consumer)
{
    reset_race_state();
    const char *env = getenv("DQ_RACE_SECONDS");
    int64_t seconds = env ? atoll(env) : 2;
    dq_options o = { .on_discard = race_discard };
    q = dq_create(&o);
    pthread_t threads[PRODUCERS + 2];
    for (int i = 0; i < PRODUCERS; i++)
        pthread_create(&threads[i], NULL, producer, (void *)(intptr_t)i);
    pthread_create(&threads[PRODUCERS], NULL, remover, NULL);
    pthread_create(&threads[PRODUCERS + 1], NULL, canceller, NULL);

    int64_t end = dq_now() + seconds * 1000000000;
    size_t delivered = 0;
    dq_msg out;
    while (dq_now() < end) {
        int err = dq_next_until(q, &out, end);
        if (err == -ETIMEDOUT)
            break;
        cr_assert_eq(err, 0);
        cr_assert_geq(dq_now(), out.when, "delivered early");
        if (atomic_fetch_add(&fate[out.arg1][out.arg2], 1) != 0)
            atomic_fetch_add(&violations, 1);
        delivered++;
    }
    atomic_store(&stop, true);
    for (int i = 0; i < PRODUCERS + 2; i++)
        pthread_join(threads[i], NULL);
    while (dq_try_next(q, &out) == 0) {
        if (atomic_fetch_add(&fate[out.arg1][out.arg2], 1) != 0)
            atomic_fetch_add(&violations, 1);
        delivered++;
    }
    dq_unref(q); /* drops the far ones: reported as discards */
    q = NULL;
    size_t accepted = 0, settled = 0;
    for (int p = 0; p < PRODUCERS; p++) {
        accepted += (size_t)atomic_load(&posted[p]);
        for (int i = 0; i < atomic_load(&posted[p]); i++) {
            uint8_t f = atomic_load(&fate[p][i]);
            cr_assert(f == 1 || f == 2, "message %d/%d fate %u", p, i, f);
            settled++;
        }
    }
    cr_assert_eq(atomic_load(&violations), 0);
    cr_assert_eq(settled, accepted);
    cr_assert_gt(delivered, 0);
    cr_log_info("accepted %zu delivered %zu", accepted, delivered);
}

/* One message at a time, each cancelled by its poster while the
   consumer delivers it: the looper's claim of the stack's topmost node
   (and its unlink by a CAS on top) against a cancel holding its token.
   Exactly one of them may win.  Two busy threads for two cores: a third
   would be time-sliced with one of them and the race would never run. */
#define TOP_RACE_MESSAGES 60000 /* < PER_PRODUCER */

static void *top_poster(void *arg)
{
    (void)arg;
    unsigned seed = 5;
    for (int i = 0; i < TOP_RACE_MESSAGES; i++) {
        dq_msg m = { .target = &target_a, .arg1 = 0, .arg2 = i };
        dq_token t;
        cr_assert_eq(dq_post(q, &m, &t), 0);
        atomic_store(&posted[0], i + 1);
        /* start cancelling up to 2 us later, so that the cancels meet
           the delivery itself, not only the sweep before it */
        int64_t start = dq_now() + rand_r(&seed) % 2000;
        while (dq_now() < start)
            ;
        while (atomic_load(&fate[0][i]) == 0) { /* settled before the next */
            int err = dq_cancel(q, t);
            cr_assert(err == 0 || err == -ENOENT, "cancel: %d", err);
        }
    }
    return NULL;
}

Test(race, cancel_races_delivery_of_the_top_message)
{
    reset_race_state();
    dq_options o = { .on_discard = race_discard };
    q = dq_create(&o);
    pthread_t poster;
    pthread_create(&poster, NULL, top_poster, NULL);
    size_t delivered = 0;
    dq_msg out;
    int64_t give_up = dq_now() + INT64_C(20) * 1000000000; /* a lost message */
    while (atomic_load(&posted[0]) < TOP_RACE_MESSAGES ||
           atomic_load(&fate[0][TOP_RACE_MESSAGES - 1]) == 0) {
        cr_assert(dq_now() < give_up, "stuck after %d posts, %zu delivered",
                  atomic_load(&posted[0]), delivered);
        int err = dq_next_until(q, &out, dq_now() + 1000000); /* 1 ms */
        if (err == -ETIMEDOUT)
            continue;
        cr_assert_eq(err, 0);
        if (atomic_fetch_add(&fate[out.arg1][out.arg2], 1) != 0)
            atomic_fetch_add(&violations, 1);
        delivered++;
    }
    pthread_join(poster, NULL);
    dq_unref(q);
    q = NULL;
    for (int i = 0; i < TOP_RACE_MESSAGES; i++) {
        uint8_t f = atomic_load(&fate[0][i]);
        cr_assert(f == 1 || f == 2, "message %d fate %u", i, f);
    }
    cr_assert_eq(atomic_load(&violations), 0);
    cr_log_info("delivered %zu of %d, the rest cancelled", delivered,
                TOP_RACE_MESSAGES);
}
