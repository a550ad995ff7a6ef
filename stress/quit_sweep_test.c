/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quit_sweep_test: dq_quit_safely must deliver every message that was
 * accepted and due before it, even one pushed while the consumer was in the
 * middle of a sweep.
 *
 * The window: the consumer sweeps the stack (one read of the top), then
 * reads the top again to learn whether the queue quits.  A message pushed
 * between the two reads, followed by the quit, is in the stack but not in
 * the heaps; if the consumer then finds nothing deliverable it must not
 * tear down (reporting that message as discarded) without sweeping again.
 * Found by dq_stress (--scenario=churn) under QEMU (arm64-lse), where the
 * window is wide; held open here deterministically: the consumer's first
 * sweep grows the heap (realloc), and this test's realloc() stalls it there
 * while the main thread posts a front message and quits safely.
 *
 * Two cases: (1) the swept part holds only a message due later, which the
 * quit drops; (2) it holds a barrier and a sync message behind it, so
 * nothing swept is deliverable and nothing swept is dropped by the quit
 * (the front message, before the barrier, is deliverable).
 *
 * Plain builds only (the sanitizers own realloc); elsewhere it says so and
 * passes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <deliqueue/deliqueue.h>

#include "stress/stress_util.h"

static _Thread_local bool tl_consumer;
static _Atomic int armed, stage;

#ifndef DQ_STRESS_SANITIZED
extern void *__libc_realloc(void *p, size_t n);

void *realloc(void *p, size_t n)
{
    if (tl_consumer && atomic_exchange(&armed, 0)) {
        atomic_store(&stage, 1); /* stalled inside the sweep */
        while (atomic_load(&stage) != 2)
            nap_ms(1);
    }
    return __libc_realloc(p, n);
}
#endif

static dq_queue *q;
static int target;
static _Atomic int discarded_front, discarded_future;
static int rc1, rc2;
static dq_msg got;

static void on_discard(const dq_msg *m, void *ctx)
{
    (void)ctx;
    if (m->arg1 == 1)
        atomic_fetch_add(&discarded_front, 1);
    else
        atomic_fetch_add(&discarded_future, 1);
}

static void *consumer_main(void *arg)
{
    (void)arg;
    tl_consumer = true;
    atomic_store(&armed, 1);
    rc1 = dq_try_next(q, &got);
    /* -EAGAIN is a fair answer for a call that began before the post; a
       consumer that keeps consuming after the quit must then get it */
    while (rc1 == -EAGAIN) {
        while (atomic_load(&stage) != 2)
            nap_ms(1);
        rc1 = dq_try_next(q, &got);
    }
    dq_msg more;
    rc2 = rc1 == 0 ? dq_try_next(q, &more) : rc1;
    return NULL;
}

#ifndef DQ_STRESS_SANITIZED
static int run(int with_barrier)
{
    atomic_store(&stage, 0);
    atomic_store(&discarded_front, 0);
    atomic_store(&discarded_future, 0);
    dq_options o = { .on_discard = on_discard };
    q = dq_create(&o);
    dq_msg other = { .target = &target, .arg1 = 2 };
    if (with_barrier) {
        dq_token b;
        if (dq_post_sync_barrier(q, &b) != 0 || dq_post(q, &other, NULL) != 0)
            return 1;
    } else if (dq_post_delayed(q, &other, INT64_C(1000000000000), NULL) != 0) {
        return 1;
    }
    pthread_t c;
    pthread_create(&c, NULL, consumer_main, NULL);
    while (atomic_load(&stage) != 1)
        nap_ms(1);
    /* the consumer has read the top and is stalled in its sweep */
    dq_msg front = { .target = &target, .arg1 = 1 };
    int err = dq_post_at_front(q, &front, NULL);
    dq_quit_safely(q);
    atomic_store(&stage, 2);
    pthread_join(c, NULL);
    dq_unref(q);
    printf("quit_sweep_test: case %d: post %d; try_next %d (arg1 %d), then %d; "
           "discarded: front %d, other %d\n",
           with_barrier + 1, err, rc1, rc1 == 0 ? got.arg1 : 0, rc2,
           atomic_load(&discarded_front), atomic_load(&discarded_future));
    if (err != 0) {
        printf("quit_sweep_test: FAIL: the front post was refused\n");
        return 1;
    }
    if (rc1 != 0 || got.arg1 != 1 || atomic_load(&discarded_front) != 0) {
        printf("quit_sweep_test: FAIL: quit_safely dropped a message that was accepted "
               "and due before the quit\n");
        return 1;
    }
    /* case 1: the later message is dropped by the quit; case 2: the sync
       message is held by a barrier that is never removed, dropped at the end */
    if (rc2 != -ESHUTDOWN || atomic_load(&discarded_future) != 1) {
        printf("quit_sweep_test: FAIL: the other message was not dropped once\n");
        return 1;
    }
    return 0;
}
#endif

int main(void)
{
#ifdef DQ_STRESS_SANITIZED
    printf(
        "quit_sweep_test: skipped (needs to interpose realloc; plain builds only)\n");
    return 0;
#else
    int bad = 0;
    for (int with_barrier = 0; with_barrier < 2; with_barrier++)
        bad |= run(with_barrier);
    printf("quit_sweep_test: %s\n", bad ? "FAIL" : "pass");
    return bad;
#endif
}
