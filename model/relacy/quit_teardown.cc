/* SPDX-License-Identifier: Apache-2.0 */
/*
 * (d) The tagged user count against quit and the teardown: a remover
 * counted into the core (core.c: dq_users_enter, dq_users_leave;
 * any_claim.c: match_walk_run) against dq_quit (any_lifecycle.c) and the
 * consumer's teardown, which sets the quit bit, parks until the count is
 * zero, reports what is still pending and frees the core (core.c:
 * dq_looper_teardown; looper.c: looper_next).
 *
 * Messages 1 and 2 are posted in before().  Thread 0, the consumer, takes
 * message 1 with dq_next, calls dq_quit, then dq_next again, which tears
 * the core down and returns -ESHUTDOWN.  Thread 1 calls dq_remove for
 * message 2.  Invariants: message 1 is delivered once; message 2 is
 * discarded exactly once, by the remover or by the teardown, and never
 * delivered; no thread touches the core once freed (its atomics are
 * poisoned: ACCESS TO FREED MEMORY); the teardown's park ends (the last
 * user out wakes it; else DEADLOCK); nothing leaks.
 *
 * Runs: context-bounded (bound 1) to completion, then 200000 random
 * schedules.  Stub pool (stub_pool.cc).
 */
#include "harness.h"

struct quit_teardown : harness::test<quit_teardown, 2> {
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
            RL_ASSERT(dq_next(q, &m) == 0);
            got(m);
            RL_ASSERT(m.what == 1);
            dq_quit(q);
            RL_ASSERT(dq_next(q, &m) == -ESHUTDOWN);
            return;
        }
        removed = remove(2);
        RL_ASSERT(removed <= 1);
    }
    void check()
    {
        once(1);
        once(2);
        RL_ASSERT(delivered[1] == 1 && discarded[2] == 1);
    }
};

int main(int argc, char **argv)
{
    return harness::main<quit_teardown>(
        "quit_teardown", argc, argv,
        { { rl::sched_bound, 1, 0 }, { rl::sched_random, 0, 200000 } });
}
