/* SPDX-License-Identifier: Apache-2.0 */
/* The workload trace_record_test records: two producers post due-now and
   far-future messages to a queue named "rec" whose consumer runs dq_loop;
   then some far-future ones are cancelled by token and some removed by
   criteria; the rest are dropped by dq_quit.  At quiescent points (a sync
   message dispatched, the consumer given time to fall asleep) it writes a
   marker "I|pid|check pending=N" with dq_pending, which the test compares
   with the last backlog counter.  Prints one summary line of its counts.
   Needs tracing to be possible (root, tracefs); exit 2 otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <deliqueue/deliqueue.h>

#define PRODUCERS 2
#define DUE_NOW   400 /* per producer */
#define LATER     60  /* per producer */
#define FAR       (3600LL * 1000000000)

static dq_queue *q;
static int marker = -1;
static char work_target, later_target, sync_target;
static _Atomic long delivered, dropped, syncs_seen;
static dq_token tokens[PRODUCERS][LATER];

static void on_dispatch(dq_msg *m, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&delivered, 1);
    if (m->target == &sync_target)
        atomic_fetch_add(&syncs_seen, 1);
}

static void on_discard(const dq_msg *m, void *ctx)
{
    (void)m;
    (void)ctx;
    atomic_fetch_add(&dropped, 1);
}

static void *consumer_main(void *arg)
{
    (void)arg;
    int err = dq_loop(q);
    if (err) {
        fprintf(stderr, "trace_workload: dq_loop: %s\n", strerror(-err));
        exit(1);
    }
    return NULL;
}

static void *producer_main(void *arg)
{
    int p = (int)(intptr_t)arg;
    for (int i = 0; i < DUE_NOW + LATER; i++) {
        dq_msg m = { .target = i < DUE_NOW ? &work_target : &later_target,
                     .what = p * 100000 + i };
        int err = i < DUE_NOW ? dq_post(q, &m, NULL)
                              : dq_post_delayed(q, &m, FAR, &tokens[p][i - DUE_NOW]);
        if (err) {
            fprintf(stderr, "trace_workload: post: %s\n", strerror(-err));
            exit(1);
        }
    }
    return NULL;
}

static long posts = 0;

/* Quiescent: everything due is dispatched and the consumer sleeps. */
static void quiesce_and_check(void)
{
    long want = atomic_load(&syncs_seen) + 1;
    dq_msg m = { .target = &sync_target, .what = -1 };
    if (dq_post(q, &m, NULL) != 0)
        exit(1);
    posts++;
    for (int i = 0; atomic_load(&syncs_seen) < want; i++) {
        if (i > 10000) {
            fprintf(stderr,
                    "trace_workload: the consumer did not dispatch the sync message\n");
            exit(1);
        }
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    struct timespec settle = { 0, 50 * 1000000 };
    nanosleep(&settle, NULL);
    char line[96];
    int n = snprintf(line, sizeof(line), "I|%d|check pending=%zu\n", (int)getpid(),
                     dq_pending(q));
    if (write(marker, line, (size_t)n) != n) {
        perror("trace_workload: writing the check marker");
        exit(2);
    }
}

int main(void)
{
    marker = open("/sys/kernel/tracing/trace_marker", O_WRONLY | O_CLOEXEC);
    if (marker < 0)
        marker = open("/sys/kernel/debug/tracing/trace_marker", O_WRONLY | O_CLOEXEC);
    if (marker < 0 || dq_trace_enable(true) != 0) {
        fprintf(stderr,
                "trace_workload: tracefs trace_marker is not writable (needs root "
                "and tracefs mounted)\n");
        return 2;
    }
    dq_options o = { .dispatch = on_dispatch, .on_discard = on_discard };
    q = dq_create(&o);
    if (q == NULL || dq_set_name(q, "rec") != 0)
        return 1;
    pthread_t consumer, producers[PRODUCERS];
    pthread_create(&consumer, NULL, consumer_main, NULL);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_create(&producers[p], NULL, producer_main, (void *)(intptr_t)p);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(producers[p], NULL);
    posts += PRODUCERS * (DUE_NOW + LATER);
    quiesce_and_check();

    long cancelled = 0, removed = 0;
    for (int p = 0; p < PRODUCERS; p++)
        for (int i = 0; i < LATER; i += 3)
            cancelled += dq_cancel(q, tokens[p][i]) == 0;
    quiesce_and_check();
    for (int p = 0; p < PRODUCERS; p++) {
        dq_match match = { .target = &later_target,
                           .fields = DQ_MATCH_WHAT,
                           .what = p * 100000 + DUE_NOW + 1 };
        removed += (long)dq_remove(q, &match);
    }
    quiesce_and_check();

    long before_quit = atomic_load(&dropped);
    dq_quit(q);
    pthread_join(consumer, NULL);
    dq_unref(q);
    printf("posted=%ld delivered=%ld cancelled=%ld removed=%ld dropped=%ld pid=%d\n",
           posts, atomic_load(&delivered), cancelled, removed,
           atomic_load(&dropped) - before_quit, (int)getpid());
    return 0;
}
