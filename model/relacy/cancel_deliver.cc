/* SPDX-License-Identifier: Apache-2.0 */
/*
 * (b) Cancel against delivery: the claim CAS on a node's state word
 * (any_claim.c: claim_token, token_node, core_enter; core_walk.c:
 * dq_push_removals) racing the looper's delivery CAS (looper.c:
 * looper_take) and its handling of the removal list (looper_collect,
 * looper_process_removals, looper_finish_removed, the unlink and retire).
 *
 * Messages 1 and 2 are posted in before(), 1 first (so it sorts first);
 * then thread 0, the consumer, calls dq_next until it has message 2, and
 * thread 1 cancels message 1 by its token.  Invariants: messages 1 and 2
 * are each reported exactly once, delivered or to on_discard; the cancel
 * returns 0 exactly when message 1 was discarded and -ENOENT exactly when
 * it was delivered; message 2 is delivered.  A claim lost, a double report
 * or a node retired twice fails an assertion (or trips the freed-memory
 * poison); a wake-up lost leaves the consumer parked (DEADLOCK).
 *
 * Runs: context-bounded (bound 1) to completion, then 200000 random
 * schedules.  Stub pool (stub_pool.cc).
 */
#include "harness.h"

struct cancel_deliver : harness::test<cancel_deliver, 2> {
    dq_token tok;
    int cancelled;

    void setup()
    {
        post(1, &tok);
        post(2);
    }
    void run(unsigned index)
    {
        if (index == 0) {
            for (;;) {
                dq_msg m;
                RL_ASSERT(dq_next(q, &m) == 0);
                got(m);
                if (m.what == 2)
                    return;
            }
        }
        cancelled = dq_cancel(q, tok);
        RL_ASSERT(cancelled == 0 || cancelled == -ENOENT);
    }
    void check()
    {
        once(1);
        once(2);
        RL_ASSERT(delivered[2] == 1);
        RL_ASSERT((cancelled == 0) == (discarded[1] == 1));
    }
};

int main(int argc, char **argv)
{
    return harness::main<cancel_deliver>(
        "cancel_deliver", argc, argv,
        { { rl::sched_bound, 1, 0 }, { rl::sched_random, 0, 200000 } });
}
