/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fd listeners: fd numbers reused inside and after a callback (Android's
 * CTS MessageQueueTest, testPathologicalFileDescriptorReuse*), and a
 * closed fd whose file a dup keeps open, which must not make the looper
 * spin.
 */
#include "fd_test_util.h"

/* ---- the fd reuse cases (CTS testPathologicalFileDescriptorReuse*) ----- */

typedef struct reuse {
    int fd;       /* the watched number */
    int other[2]; /* the second pipe */
    looper *l;
    counter second;
    int mode; /* 0 close; 1 dup2 over it; 2 dup2 and register it */
    _Atomic int calls;
} reuse;

static uint32_t reuse_listener(int fd, uint32_t events, void *ctx)
{
    reuse *r = ctx;
    (void)events;
    atomic_fetch_add(&r->calls, 1);
    if (r->mode == 0) {
        close(fd);
    } else {
        /* closes the old pipe's reader and gives its number to the new
           pipe's reader */
        cr_assert_eq(dup2(r->other[0], fd), fd);
        close(r->other[0]);
        r->other[0] = fd;
        if (r->mode == 2)
            cr_assert_eq(dq_add_fd_listener(r->l->q, fd, DQ_EVENT_INPUT, count_listener,
                                            &r->second),
                         0);
    }
    return 0;
}

static void reuse_case(int mode)
{
    looper l;
    looper_start(&l);
    reuse r = { .l = &l, .mode = mode, .second = { .keep = 0 } };
    int p[2];
    make_pipe(p);
    if (mode != 0)
        make_pipe(r.other);
    r.fd = p[0];
    cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_ERROR, reuse_listener, &r), 0);
    close(p[1]); /* hang-up wakes the listener */
    cr_assert(await_count(&r.calls, 1));
    sync_wait(&l);
    cr_assert_eq(atomic_load(&r.calls), 1, "a listener that returned 0 ran again");
    int fd;
    if (mode == 0) {
        /* a new pipe: the lowest free numbers, which the closed one was
           among (unless the queue's rebuilt epoll set took it) */
        make_pipe(r.other);
    } else {
        cr_assert_eq(r.other[0], r.fd, "the number is reused");
    }
    fd = r.other[0];
    if (mode != 2) {
        int err =
            dq_add_fd_listener(l.q, fd, DQ_EVENT_INPUT, count_listener, &r.second);
        cr_assert_eq(err, 0, "re-adding fd %d: %d", fd, err);
    }
    close(r.other[1]); /* its own hang-up */
    cr_assert(await_count(&r.second.calls, 1), "the new fd got no events");
    cr_assert(atomic_load(&r.second.events) & DQ_EVENT_ERROR);
    sync_wait(&l);
    cr_assert_eq(atomic_load(&r.calls), 1);
    cr_assert_eq(atomic_load(&r.second.calls), 1);
    cr_assert_eq(dq_remove_fd_listener(l.q, fd), -ENOENT);
    looper_stop(&l);
    close(fd);
}

Test(fd, reuse_closed_in_callback_then_new_fd_same_number)
{
    reuse_case(0);
}

Test(fd, reuse_number_reassigned_in_callback_then_registered)
{
    reuse_case(1);
}

Test(fd, reuse_number_reassigned_and_registered_in_callback)
{
    reuse_case(2);
}

/* Closed inside the callback while a dup keeps its file open: the file
   stays in the epoll set, hung up, and only a rebuild drops it.  A looper
   that kept it would spin while it waits in epoll (another fd is
   watched): its thread's CPU time over 2 s of idleness says which.  An
   idle looper uses next to none; a spinning one all it is given, which on
   a loaded machine can be a quarter of the 2 s, so the bound is lower
   than Android's CTS (1000 ms). */
#define IDLE_CPU_BOUND_NS (INT64_C(200) * 1000000)

/* The CPU time the consumer thread spends over 2 s of idleness. */
static int64_t idle_cpu_ns(looper *l)
{
    int64_t cpu0 = cpu_ns(l->cpu_clock);
    sleep_ms(2000);
    return cpu_ns(l->cpu_clock) - cpu0;
}
static uint32_t close_and_unregister(int fd, uint32_t events, void *ctx)
{
    (void)events;
    close(fd);
    atomic_fetch_add((_Atomic int *)ctx, 1);
    return 0;
}

Test(fd, closed_fd_with_a_live_dup_does_not_spin)
{
    looper l;
    looper_start(&l);
    int p[2], idle[2];
    make_pipe(p);
    /* another listener keeps the consumer waiting in epoll */
    make_pipe(idle);
    cr_assert_eq(dq_add_fd_listener(l.q, idle[0], DQ_EVENT_INPUT, never_listener, NULL),
                 0);
    int dup_fd = dup(p[0]);
    cr_assert_geq(dup_fd, 0);
    _Atomic int calls = 0;
    cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_ERROR, close_and_unregister,
                                    (void *)&calls),
                 0);
    close(p[1]);
    cr_assert(await_count(&calls, 1));
    sync_wait(&l);
    int64_t cpu = idle_cpu_ns(&l);
    sync_wait(&l);
    cr_assert_eq(atomic_load(&calls), 1);
    cr_assert_lt(cpu, IDLE_CPU_BOUND_NS,
                 "the looper spent %lld ms of 2000 on the CPU: it spins",
                 (long long)(cpu / 1000000));
    looper_stop(&l);
    close(dup_fd);
    close(idle[0]), close(idle[1]);
}

/* Closed while registered (no callback involved) with a dup alive, then
   removed: the remove's DEL fails, and the rebuild drops the file. */
Test(fd, removed_after_close_with_a_live_dup_does_not_spin)
{
    looper l;
    looper_start(&l);
    int p[2], idle[2];
    make_pipe(p);
    make_pipe(idle);
    cr_assert_eq(dq_add_fd_listener(l.q, idle[0], DQ_EVENT_INPUT, never_listener, NULL),
                 0);
    int dup_fd = dup(p[0]);
    counter c = { .keep = DQ_EVENT_INPUT };
    cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_ERROR, count_listener, &c), 0);
    sync_wait(&l);
    close(p[0]);
    cr_assert_eq(dq_remove_fd_listener(l.q, p[0]), 0);
    close(p[1]); /* the lingering file hangs up */
    sync_wait(&l);
    int64_t cpu = idle_cpu_ns(&l);
    cr_assert_eq(atomic_load(&c.calls), 0);
    cr_assert_lt(cpu, IDLE_CPU_BOUND_NS, "the looper spent %lld ms of 2000 on the CPU",
                 (long long)(cpu / 1000000));
    looper_stop(&l);
    close(dup_fd);
    close(idle[0]), close(idle[1]);
}
