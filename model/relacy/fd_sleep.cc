/* SPDX-License-Identifier: Apache-2.0 */
/*
 * (f) An fd listener added while the consumer sleeps, its fd made ready,
 * and a post, against the consumer's choice of wait (futex or epoll): the
 * fd state's publication (core_fd.c: dq_fd_state_get's CAS; looper_fd.c:
 * looper_fd_state, looper_fd.h: dq_looper_fd_on), the Dekker pair of the
 * adder's fd_changed exchange and its read of the sleep word (any_fd.c:
 * fd_changed, dq_wake_consumer) with the consumer's publication of its
 * sleep word and re-read of fd_changed (looper.c: looper_sleep,
 * looper_has_news), the epoll_sleep mark that tells a waker which wait to
 * signal (dq_looper_fd_mark_sleep against core.c: dq_wake_sleeper,
 * core_fd.c: dq_fd_signal and its eventfd write), and the consumer's side
 * of the table (looper_fd_refresh, dq_looper_fd_wait, looper_fd_take,
 * looper_fd_run, and looper_fd_keep's removal when the listener returns 0:
 * back to the futex wait).
 *
 * Threads: 0 is the consumer, dq_next until it has messages 1 and 2;
 * 1 adds a listener for an eventfd (dq_add_fd_listener, which makes the
 * queue's fd state), then writes the eventfd once; 2 posts message 1.
 * The listener reads the eventfd, posts message 2 and returns 0
 * (unregistering itself).  Invariant: the fd event is delivered exactly
 * once (one call, which reads the one write), each message delivered
 * exactly once, intact; the fds the queue made are closed by its last
 * dq_unref (an fd left open is a RESOURCE LEAK).  The consumer never polls
 * before it sleeps (idle_spin_ns < 0) and every epoll wait of the model
 * (dq_relacy.cc, "fds") parks with no deadline, so a wake-up lost (the
 * futex woken while the consumer is in epoll, or the reverse, or an add
 * that the consumer neither sees nor is woken for) leaves it parked after
 * both other threads are done: a DEADLOCK.  An access to a freed fd state
 * is ACCESS TO FREED MEMORY.
 *
 * Runs: context-bounded (bound 1) to completion, then 200000 random
 * schedules.  Stub pool (stub_pool.cc).
 */
#include "harness.h"

struct fd_sleep : harness::test<fd_sleep, 2> {
    int efd;
    int calls;
    uint64_t read_total;

    static uint32_t on_input(int fd, uint32_t events, void *ctx)
    {
        fd_sleep *t = static_cast<fd_sleep *>(ctx);
        t->calls++;
        RL_ASSERT(fd == t->efd);
        /* level-triggered: called only while the eventfd is readable */
        RL_ASSERT(events == DQ_EVENT_INPUT);
        uint64_t v = 0;
        RL_ASSERT(read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v));
        t->read_total += v;
        dq_msg m = message(2);
        RL_ASSERT(dq_post(t->q, &m, NULL) == 0);
        return DQ_EVENT_INPUT; /* keep watching: the consumer stays in epoll */
    }

    void setup()
    {
        efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        RL_ASSERT(efd >= 0);
        calls = 0;
        read_total = 0;
    }
    void run(unsigned index)
    {
        if (index == 0) {
            for (int n = 0; n < 2; n++) {
                dq_msg m;
                RL_ASSERT(dq_next(q, &m) == 0);
                got(m);
            }
            return;
        }
        RL_ASSERT(dq_add_fd_listener(q, efd, DQ_EVENT_INPUT, on_input, this) == 0);
        uint64_t one = 1;
        RL_ASSERT(write(efd, &one, sizeof(one)) == (ssize_t)sizeof(one));
        dq_msg m = message(1);
        RL_ASSERT(dq_post(q, &m, NULL) == 0);
    }
    void check()
    {
        once(1);
        once(2);
        RL_ASSERT(delivered[1] == 1 && delivered[2] == 1);
        RL_ASSERT(calls == 1 && read_total == 1);
        close(efd);
    }
};

int main(int argc, char **argv)
{
    return harness::main<fd_sleep>(
        "fd_sleep", argc, argv,
        { { rl::sched_bound, 1, 0 }, { rl::sched_random, 0, 200000 } });
}
