/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A dispatch observer in the style of Android's Looper message logging
 * and slow-dispatch warnings.  Every dispatch is logged as
 *
 *   >>>>> Dispatching to <target> <callback>: <what>
 *   <<<<< Finished to <target> <callback>
 *
 * and a dispatch that takes longer than 10 ms, or a delivery that starts
 * more than 50 ms after its message was due, is reported once:
 *
 *   Slow dispatch took 31ms what=2
 *   Slow delivery took 60ms what=3
 *
 * The looper runs three messages: a quick one, one whose handler works
 * for 30 ms (a slow dispatch), and one posted due 60 ms in the past (a
 * slow delivery).  Exit status 0 when the logs and the slow reports are
 * what the thresholds say; 1 otherwise.
 */
#define _GNU_SOURCE
#include <deliqueue/deliqueue.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MS INT64_C(1000000)

/* Which messages were reported slow, as bits (1 << what): on a loaded
   machine a quick one may be late or slow too, so the check asks only
   that the slow handler and the late post were reported. */
static int dispatch_lines, finish_lines, slow_dispatch_seen, slow_delivery_seen;

static void log_start(const dq_msg *m, int64_t start, void *ctx)
{
    (void)start;
    fprintf((FILE *)ctx, ">>>>> Dispatching to %p %p: %d\n", m->target,
            (void *)(uintptr_t)m->callback, m->what);
    dispatch_lines++;
}

static void log_end(const dq_msg *m, int64_t start, int64_t end, void *ctx)
{
    (void)start, (void)end;
    fprintf((FILE *)ctx, "<<<<< Finished to %p %p\n", m->target,
            (void *)(uintptr_t)m->callback);
    finish_lines++;
}

static void log_slow(const dq_msg *m, uint32_t kind, int64_t ns, void *ctx)
{
    fprintf((FILE *)ctx, "Slow %s took %lldms what=%d\n",
            kind == DQ_SLOW_DISPATCH ? "dispatch" : "delivery", (long long)(ns / MS),
            m->what);
    if (kind == DQ_SLOW_DISPATCH)
        slow_dispatch_seen |= 1 << m->what;
    else
        slow_delivery_seen |= 1 << m->what;
}

static void quick(dq_msg *m)
{
    (void)m;
}

static void works_30ms(dq_msg *m)
{
    (void)m;
    struct timespec ts = { 0, 30 * 1000000L };
    nanosleep(&ts, NULL);
}

static int target;

int main(void)
{
    dq_queue *q = dq_create(NULL);
    if (q == NULL)
        return 1;
    dq_observer o = {
        .dispatch_start = log_start,
        .dispatch_end = log_end,
        .slow = log_slow,
        .slow_delivery_ns = 50 * MS,
        .slow_dispatch_ns = 10 * MS,
        .ctx = stdout,
    };
    if (dq_set_observer(q, &o) != 0)
        return 1;
    dq_msg m = { .target = &target, .what = 1, .callback = quick };
    int64_t now = dq_queue_now(q);
    int err = dq_post(q, &m, NULL);
    m.what = 2;
    m.callback = works_30ms;
    err |= dq_post(q, &m, NULL);
    m.what = 3;
    m.callback = quick;
    err |= dq_post_at(q, &m, now - 60 * MS > 0 ? now - 60 * MS : 1, NULL);
    if (err != 0)
        return 1;
    dq_quit_safely(q); /* deliver what is due, then dq_loop returns */
    if (dq_loop(q) != 0)
        return 1;
    dq_unref(q);
    int ok = dispatch_lines == 3 && finish_lines == 3 &&
             (slow_dispatch_seen & 1 << 2) && (slow_delivery_seen & 1 << 3);
    printf("%s\n", ok ? "slow_log: the observer saw what it should"
                      : "slow_log: unexpected observer reports");
    return !ok;
}
