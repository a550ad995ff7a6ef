/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The last reference against the consumer's teardown: whichever thread
 * drops the last reference frees the queue, and tears the core down first
 * when the consumer has not (any_lifecycle.c: dq_unref, its acq_rel count
 * and its acquire of q->core, which pairs with the release store of NULL
 * at the end of the consumer's teardown, core.c: dq_looper_teardown).
 *
 * Message 1 is posted in before(), and the harness's reference is given
 * to thread 1 (dq_ref makes one for thread 0).  Thread 0, the consumer,
 * calls dq_next until it fails (-ESHUTDOWN once quit: it tears the core
 * down) and drops its reference.  Thread 1 names the queue (dq_set_name:
 * the names are freed with the handle, by whichever thread drops the last
 * reference), calls dq_quit and drops its reference.  Invariants: message
 * 1 is reported exactly once, delivered or discarded by the one teardown;
 * no thread touches the queue or the core once freed (ACCESS TO FREED
 * MEMORY); nothing leaks, and nothing is freed twice.
 *
 * Runs: context-bounded (bound 1) to completion, then 200000 random
 * schedules.  Stub pool (stub_pool.cc).
 */
#include "harness.h"

struct unref_teardown : harness::test<unref_teardown, 2> {
    void setup()
    {
        post(1);
        RL_ASSERT(dq_ref(q) == q);
        last_ref_in_threads = true;
    }
    void run(unsigned index)
    {
        if (index == 0) {
            dq_msg m;
            int err;
            while ((err = dq_next(q, &m)) == 0)
                got(m);
            RL_ASSERT(err == -ESHUTDOWN);
        } else {
            RL_ASSERT(dq_set_name(q, "unref") == 0);
            dq_quit(q);
        }
        dq_unref(q);
    }
    void check()
    {
        once(1);
    }
};

int main(int argc, char **argv)
{
    return harness::main<unref_teardown>(
        "unref_teardown", argc, argv,
        { { rl::sched_bound, 1, 0 }, { rl::sched_random, 0, 200000 } });
}
