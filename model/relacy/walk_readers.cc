/* SPDX-License-Identifier: Apache-2.0 */
/*
 * (c') The read-only walkers against unlinking and reclamation: dq_pending,
 * dq_is_idle and dq_dump (any_claim.c, any_observe.c: a grace period,
 * then the acquire walk of top and links and the acquire loads of each
 * node's state before its payload is read) against the looper's unlinks,
 * retires and epoch advances (looper.c: looper_take, looper_unlink,
 * looper_retire, looper_reclaim).
 *
 * Message 1 and a sync barrier are posted in before(), message 2 (async,
 * so the barrier does not hold it) by thread 1 while it walks; thread 0,
 * the consumer, removes the barrier, takes messages until it has both,
 * then calls dq_try_next twice: each idle step ends a grace period if it
 * can, so by the second every node it retired is back in the pool unless
 * a walker still counts in that node's epoch.  Thread 1 counts, asks
 * whether the queue is idle and dumps it into a memory buffer.
 *
 * Invariants: no walker reads the link, owner or payload of a node given
 * back to the pool (the stub pool poisons them: ACCESS TO FREED MEMORY);
 * dq_pending answers at most 2; every dump is whole ("end" last) and
 * lists no more messages than were posted; both messages are delivered
 * exactly once.
 *
 * Runs: the first 200000 iterations of the context-bounded search with
 * bound 1 (the complete tree, with the dump's many steps, did not finish
 * in 5 minutes), then with bound 2 (a stale epoch needs two preemptions,
 * as in remove_reclaim); then 200000 random schedules.  Stub pool.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"

struct walk_readers : harness::test<walk_readers, 2> {
    dq_token barrier;
    size_t pending;
    char dump[2048];

    void setup()
    {
        post(1);
        RL_ASSERT(dq_post_sync_barrier(q, &barrier) == 0);
    }

    void run(unsigned index)
    {
        if (index == 0) {
            RL_ASSERT(dq_remove_sync_barrier(q, barrier) == 0);
            dq_msg m;
            int seen = 0;
            while (seen != 3) {
                RL_ASSERT(dq_next(q, &m) == 0);
                got(m);
                seen |= 1 << (m.what - 1);
            }
            for (int i = 0; i < 2; i++)
                RL_ASSERT(dq_try_next(q, &m) == -EAGAIN);
            return;
        }
        dq_msg m = message(2);
        m.flags = DQ_ASYNC;
        RL_ASSERT(dq_post(q, &m, NULL) == 0);
        pending = dq_pending(q);
        (void)dq_is_idle(q);
        FILE *f = fmemopen(dump, sizeof(dump), "w");
        RL_ASSERT(f != NULL);
        RL_ASSERT(dq_dump(q, f) == 0);
        fclose(f);
    }

    void check()
    {
        once(1);
        once(2);
        RL_ASSERT(delivered[1] == 1 && delivered[2] == 1);
        RL_ASSERT(pending <= 2);
        size_t len = strlen(dump);
        RL_ASSERT(len > 4 && strcmp(dump + len - 4, "end\n") == 0);
        size_t msgs = 0;
        for (const char *l = dump; (l = strstr(l, "\nmsg ")) != NULL; l++)
            msgs++;
        RL_ASSERT(msgs <= 2);
    }
};

int main(int argc, char **argv)
{
    return harness::main<walk_readers>("walk_readers", argc, argv,
                                       { { rl::sched_bound, 1, 200000 },
                                         { rl::sched_bound, 2, 200000 },
                                         { rl::sched_random, 0, 200000 } });
}
