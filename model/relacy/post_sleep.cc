/* SPDX-License-Identifier: Apache-2.0 */
/*
 * (a) Posts against the consumer's sweep and sleep: the Dekker pair of the
 * push CAS and the post's read of the sleep word (any_post.c:
 * post_node_with, post_pushed, wake_for_post; core.c: dq_wake_sleeper)
 * with the consumer's publication of its sleep word and re-read of the
 * top (looper.c: looper_sleep, looper_publish_sleep, looper_has_news),
 * around the sweep's acquire of the pushes (looper_read_top).
 *
 * Threads: 0 is the consumer, two dq_next; 1 posts two messages with
 * dq_post, due at once (a third thread, a second poster, makes even the
 * bound-1 search run for more than ten minutes).  Invariant: each message delivered exactly once,
 * intact.  The consumer never polls before it sleeps (idle_spin_ns < 0),
 * so each idle transition parks on the futex with no deadline: a lost
 * wake-up leaves it parked after both producers are done, which Relacy
 * reports as a DEADLOCK.  A stale read of a link (the sweep's acquire
 * weakened) crashes on a NULL node or fails an assertion.
 *
 * Runs: context-bounded (bound 1) to completion, which covers every
 * schedule with up to one preemption and every value each load may read
 * under the C11 model; then 200000 random schedules, which reach
 * interleavings with more preemptions.  Stub pool (stub_pool.cc).
 */
#include "harness.h"

/* messages: how many the producer posts and the consumer takes */
template <int messages> struct post_sleep : harness::test<post_sleep<messages>, 2> {
    void run(unsigned index)
    {
        for (int what = 1; what <= messages; what++) {
            dq_msg m;
            if (index == 0) {
                RL_ASSERT(dq_next(this->q, &m) == 0);
                this->got(m);
            } else {
                m = this->message(what);
                RL_ASSERT(dq_post(this->q, &m, NULL) == 0);
            }
        }
    }
    void check()
    {
        for (int what = 1; what <= messages; what++)
            this->once(what);
    }
};

int main(int argc, char **argv)
{
    return harness::main<post_sleep<2>>(
        "post_sleep", argc, argv,
        { { rl::sched_bound, 1, 0 }, { rl::sched_random, 0, 200000 } });
}
