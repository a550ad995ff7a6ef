/* SPDX-License-Identifier: Apache-2.0 */
/*
 * (c) A walker against unlinking and reclamation: the walker's grace
 * period (core_walk.c: dq_walk_begin, dq_walk_end; walk.h: the acquire
 * walk of top and links; any_claim.c: match_walk_run) against the
 * looper's unlinks, retires and epoch advances (looper.c: looper_take,
 * looper_unlink, looper_retire, looper_reclaim, looper_finish_removed).
 *
 * Messages 1 and 2 are posted in before(); then thread 0, the consumer,
 * calls dq_next until it has message 2 and then dq_try_next twice: each
 * idle step ends a grace period if it can (looper_reclaim with force), so
 * by the second every node it retired is back in the pool unless a walker
 * still counts in that node's epoch.  Thread 1 walks the stack with
 * dq_remove, matching message 1.
 *
 * Invariants: no walker reads the link or owner of a node given back to
 * the pool (the stub pool poisons them: ACCESS TO FREED MEMORY); messages
 * 1 and 2 are each reported exactly once (message 1 delivered or removed,
 * and dq_remove's count agrees); message 2 is delivered.
 *
 * Runs: context-bounded (bound 1) to completion; the first 200000
 * iterations of the context-bounded search with bound 2, whose complete
 * run takes too long for a test (tens of millions of iterations): a
 * walker that reads a stale epoch must be preempted twice, once after
 * the looper checked its count and once between reading the top and
 * following a link, and this prefix holds such schedules (a weakened
 * epoch store fails at about iteration 83000); then 200000 random
 * schedules.  Stub pool (stub_pool.cc), which never hands a node out
 * twice: what it checks is that the looper gives nothing back that a
 * walker may still reach.
 */
#include "harness.h"

struct remove_reclaim : harness::test<remove_reclaim, 2> {
    size_t removed;

    void setup()
    {
        post(1);
        post(2);
    }
    void run(unsigned index)
    {
        if (index == 0) {
            dq_msg m;
            do {
                RL_ASSERT(dq_next(q, &m) == 0);
                got(m);
            } while (m.what != 2);
            for (int i = 0; i < 2; i++)
                RL_ASSERT(dq_try_next(q, &m) == -EAGAIN);
            return;
        }
        removed = remove(1);
    }
    void check()
    {
        once(1);
        once(2);
        RL_ASSERT(delivered[2] == 1);
        RL_ASSERT(removed == (size_t)discarded[1]);
    }
};

int main(int argc, char **argv)
{
    return harness::main<remove_reclaim>("remove_reclaim", argc, argv,
                                         { { rl::sched_bound, 1, 0 },
                                           { rl::sched_bound, 2, 200000 },
                                           { rl::sched_random, 0, 200000 } });
}
