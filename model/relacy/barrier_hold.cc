/* SPDX-License-Identifier: Apache-2.0 */
/*
 * (d) A sync barrier holding what sorts after it, not what sorts before:
 * the held bit of the sleep word and held_due (looper.c: looper_pick,
 * looper_sleep; any_post.c: post_pushed, wake_for_post), whose relaxed
 * store is published by the consumer's seq_cst exchange of its word and
 * read after the producer's seq_cst load of it.
 *
 * Thread 1 posts a sync barrier (due now), message 1 due now (pushed after
 * the barrier: it sorts after it, held) and then message 2 due one
 * nanosecond earlier (it sorts before the barrier: deliverable).  Thread 0,
 * the consumer, calls dq_next once.  Invariants: it gets message 2, never
 * message 1 (nothing is delivered past a barrier); message 1 is discarded
 * exactly once, by the teardown in after(); a consumer asleep behind the
 * barrier is woken by message 2 (else DEADLOCK).
 *
 * Runs: context-bounded (bound 1) to completion, then 200000 random
 * schedules.  Stub pool (stub_pool.cc).
 */
#include "harness.h"

struct barrier_hold : harness::test<barrier_hold, 2> {
    void run(unsigned index)
    {
        if (index == 0) {
            dq_msg m;
            RL_ASSERT(dq_next(q, &m) == 0);
            got(m);
            RL_ASSERT(m.what == 2);
            return;
        }
        int64_t now = dq_now();
        dq_token barrier;
        RL_ASSERT(dq_post_sync_barrier(q, &barrier) == 0);
        dq_msg held = message(1), early = message(2);
        RL_ASSERT(dq_post_at(q, &held, now, NULL) == 0);
        RL_ASSERT(dq_post_at(q, &early, now - 1, NULL) == 0);
    }
    void check()
    {
        once(1);
        once(2);
        RL_ASSERT(delivered[2] == 1 && discarded[1] == 1);
    }
};

int main(int argc, char **argv)
{
    return harness::main<barrier_hold>(
        "barrier_hold", argc, argv,
        { { rl::sched_bound, 1, 0 }, { rl::sched_random, 0, 200000 } });
}
