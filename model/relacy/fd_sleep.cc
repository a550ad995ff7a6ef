/* SPDX-License-Identifier: Apache-2.0 */
/*
 * (f) fd listeners against the consumer's choice of wait (futex or epoll):
 * the fd state's publication (core_fd.c: dq_fd_state_get's CAS;
 * looper_fd.c: looper_fd_state; looper_fd.h: dq_looper_fd_on), the Dekker
 * pair of an add's fd_changed exchange and its read of the sleep word
 * (any_fd.c: fd_changed; core.c: dq_wake_consumer) with the consumer's
 * publication of its sleep word and re-read of fd_changed (looper.c:
 * looper_sleep, looper_has_news), the epoll_sleep mark that tells a waker
 * which wait to signal (looper_fd.h: dq_looper_fd_mark_sleep; core.c:
 * dq_wake_sleeper; core_fd.c: dq_fd_signal and its eventfd write), and the
 * consumer's side of the table (looper_fd_refresh, dq_looper_fd_wait,
 * looper_fd_take, looper_fd_run, looper_fd_keep).
 *
 * Two tests, each a consumer (thread 0, in dq_next) and one other thread,
 * with a listener for an eventfd that reads it and posts message 2 from
 * the consumer thread:
 *   fd_sleep/add:  thread 1 adds the listener (which makes the queue's fd
 *                  state), then writes the eventfd; the consumer calls
 *                  dq_next once, for message 2.
 *                  The listener returns 0: looper_fd_keep removes it and
 *                  the consumer goes back to the futex.  The add's wake is
 *                  the only one that tells a consumer asleep on the futex
 *                  to move to epoll: the fd_changed Dekker pair is needed.
 *   fd_sleep/wake: the listener is added in before() (the consumer sees the
 *                  change at its first step); thread 1 writes the eventfd,
 *                  then posts message 1; the consumer calls dq_next until
 *                  it has both.  The listener keeps watching, so
 *                  the consumer waits in epoll for message 1 after it ran:
 *                  the post's wake must go to the eventfd (epoll_sleep).
 *   fd_sleep/remove: no consumer; thread 1 adds the listener (publishing
 *                  the queue's fd state) while thread 0 removes it
 *                  (dq_remove_fd_listener's acquire of that state): the
 *                  remove answers 0 or -ENOENT, the listener never runs,
 *                  and the last unref closes the queue's fds.
 * Invariant: the fd event is delivered exactly once (one call of the
 * listener, which reads the one write); each message delivered exactly
 * once, intact; the queue's last dq_unref closes the fds it made (one left
 * open is a RESOURCE LEAK).  The consumer never polls before it sleeps
 * (idle_spin_ns < 0) and the model's epoll wait (dq_relacy.cc, "fds")
 * parks with no deadline, so a wake-up lost (the futex woken while the
 * consumer waits in epoll, or the reverse, or an add the consumer neither
 * sees nor is woken for) leaves it parked after thread 1 is done: a
 * DEADLOCK.  An access to a freed fd state is ACCESS TO FREED MEMORY.
 *
 * Runs, for each test: context-bounded (bound 1) to completion, then
 * 200000 random schedules.  Stub pool (stub_pool.cc).
 */
#include "harness.h"

enum fd_case { ADD, WAKE, REMOVE };

template <fd_case which> struct fd_sleep : harness::test<fd_sleep<which>, 2> {
    int efd;
    int calls;
    bool removed;
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
        dq_msg m = t->message(2);
        RL_ASSERT(dq_post(t->q, &m, NULL) == 0);
        return which == ADD ? 0 : DQ_EVENT_INPUT;
    }

    void setup()
    {
        efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        RL_ASSERT(efd >= 0);
        calls = 0;
        read_total = 0;
        removed = false;
        if (which == WAKE)
            RL_ASSERT(dq_add_fd_listener(this->q, efd, DQ_EVENT_INPUT, on_input, this) ==
                      0);
    }
    void run(unsigned index)
    {
        if (which == REMOVE) {
            /* no consumer: the add's publication of the fd state against
               a remove that may meet it */
            if (index == 0) {
                int r = dq_remove_fd_listener(this->q, efd);
                RL_ASSERT(r == 0 || r == -ENOENT);
                removed = r == 0;
            } else {
                RL_ASSERT(dq_add_fd_listener(this->q, efd, DQ_EVENT_INPUT, on_input,
                                             this) == 0);
            }
            return;
        }
        if (index == 0) {
            for (int n = which == ADD ? 1 : 0; n < 2; n++) {
                dq_msg m;
                RL_ASSERT(dq_next(this->q, &m) == 0);
                this->got(m);
            }
            return;
        }
        dq_msg m = this->message(1);
        uint64_t one = 1;
        if (which == ADD) {
            RL_ASSERT(dq_add_fd_listener(this->q, efd, DQ_EVENT_INPUT, on_input, this) ==
                      0);
            RL_ASSERT(write(efd, &one, sizeof(one)) == (ssize_t)sizeof(one));
        } else {
            RL_ASSERT(write(efd, &one, sizeof(one)) == (ssize_t)sizeof(one));
            RL_ASSERT(dq_post(this->q, &m, NULL) == 0);
        }
    }
    void check()
    {
        if (which == REMOVE) {
            /* a remove that found the listener took it out; either way the
               last unref closed the queue's own fds (else a leak) */
            RL_ASSERT(calls == 0);
            close(efd);
            return;
        }
        if (which == WAKE)
            this->once(1);
        this->once(2);
        RL_ASSERT(this->delivered[1] == (which == WAKE) && this->delivered[2] == 1);
        RL_ASSERT(calls == 1 && read_total == 1);
        close(efd);
    }
};

int main(int argc, char **argv)
{
    std::initializer_list<harness::spec> runs = { { rl::sched_bound, 1, 0 },
                                                  { rl::sched_random, 0, 200000 } };
    int add = harness::main<fd_sleep<ADD>>("fd_sleep/add", argc, argv, runs);
    int wake = harness::main<fd_sleep<WAKE>>("fd_sleep/wake", argc, argv, runs);
    int remove = harness::main<fd_sleep<REMOVE>>("fd_sleep/remove", argc, argv, runs);
    int worst = add > wake ? add : wake;
    return worst > remove ? worst : remove;
}
