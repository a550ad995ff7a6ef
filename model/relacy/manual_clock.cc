/* SPDX-License-Identifier: Apache-2.0 */
/*
 * (h) The sleep on a manual clock against its advances: the consumer's
 * sleep-word exchange and seq_cst re-read of the clock (looper.c:
 * looper_sleep, looper_clock_reached) against dq_clock_advance's seq_cst
 * RMW of the time and seq_cst load of the sleep word (any_clock.c,
 * clock.c: dq_clock_add; core.c: dq_clock_wake_due, dq_wake_sleeper).
 *
 * The queue runs on a manual clock at 0.  Message 1 is posted in
 * before(), due at 10; thread 0, the consumer, calls dq_next, which
 * sleeps with no real-time deadline at all (only a wake ends it);
 * thread 1 advances the clock by 5 (not yet due: no wake owed) and
 * then by 5 again.
 *
 * Invariants: the consumer is never left asleep once the second advance
 * has made the message due (a lost wake-up is a DEADLOCK: the futex
 * model's sleeper has no timeout); message 1 is delivered exactly once.
 *
 * Runs: context-bounded (bound 1) to completion, then 200000 random
 * schedules.  Stub pool.
 */
#include "harness.h"

struct manual_clock : harness::test<manual_clock, 2> {
    dq_clock *clock;

    void options(dq_options &o)
    {
        clock = dq_clock_create_manual(0);
        RL_ASSERT(clock != NULL);
        o.clock = clock;
    }

    void setup()
    {
        dq_msg m = message(1);
        RL_ASSERT(dq_post_delayed(q, &m, 10, NULL) == 0);
    }

    void run(unsigned index)
    {
        if (index == 0) {
            dq_msg m;
            RL_ASSERT(dq_next(q, &m) == 0);
            got(m);
            return;
        }
        RL_ASSERT(dq_clock_advance(clock, 5) == 0);
        RL_ASSERT(dq_clock_advance(clock, 5) == 0);
    }

    void check()
    {
        once(1);
        RL_ASSERT(delivered[1] == 1);
        dq_clock_destroy(clock); /* the queue's hold went with its last reference */
    }
};

int main(int argc, char **argv)
{
    return harness::main<manual_clock>(
        "manual_clock", argc, argv,
        { { rl::sched_bound, 1, 0 }, { rl::sched_random, 0, 200000 } });
}
