/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime behind dq_relacy.h: the heap with its poison, the model
 * clock, the futex, the pthread stand-ins, per-iteration state, and the
 * handlers that turn a crash or a failed assert() into a Relacy failure.
 */
#include <map>
#include <set>
#include <string>
#include <signal.h>
#include <stdarg.h>
#include <vector>

#include "dq_relacy.h"

/* This file implements the names the library's sources get mapped to. */
#undef syscall
#undef clock_gettime
#undef malloc
#undef calloc
#undef aligned_alloc
#undef realloc
#undef free
#undef eventfd
#undef epoll_create1
#undef epoll_ctl
#undef epoll_wait
#undef read
#undef write
#undef close
#undef fcntl
#undef timerfd_create
#undef timerfd_settime
#undef sysconf
#undef mmap
#undef munmap
#undef madvise
#undef sched_yield

namespace dq_rl
{

uint32_t iteration;
int64_t clock_now;
bool covering;
bool threads_running;

/* The model clock's value at each iteration's start: 1 s, so that a
   message posted for an earlier time (when = 1, ...) is due. */
static const int64_t CLOCK_START_NS = 1000000000;

namespace
{

struct block {
    void *raw;
    size_t size;
    bool freed;
};
/* Every heap block of the iteration, by the address the library got. */
template <typename T> using vector = std::vector<T, raw_allocator<T>>;
typedef std::map<void *, block, std::less<void *>,
                 raw_allocator<std::pair<void *const, block>>>
    block_map;
block_map &blocks()
{
    static block_map b;
    return b;
}
vector<std::pair<void *, void (*)(void *)>> &kept()
{
    static vector<std::pair<void *, void (*)(void *)>> k;
    return k;
}
vector<void *> &mappings()
{
    static vector<void *> m;
    return m;
}

struct key_slot {
    void (*destroy)(void *);
    const void *value[MAX_THREADS];
};
vector<key_slot> &keys()
{
    static vector<key_slot> k;
    return k;
}

bool in_iteration;

} // namespace

void fail(const char *what, rl::test_result_e result, rl::debug_info_param info)
{
    rl::ctx().fail_test(what, result, info);
    abort(); /* fail_test switches to Relacy's main fiber for good */
}

void stale_access(uint32_t stamp, const void *where, rl::debug_info_param info)
{
    (void)where;
    if (stamp == FREED)
        fail("an atomic in a freed block", rl::test_result_access_to_freed_memory,
             info);
    if (stamp == RECYCLED)
        fail("a link or owner of a node given back to the pool",
             rl::test_result_access_to_freed_memory, info);
    fail("an atomic nothing initialised", rl::test_result_unitialized_access, info);
}

/* (function, file) of each atomic operation reached; the names are
   string literals, so their addresses are their identity. */
typedef std::pair<const char *, const char *> site;
static std::set<site, std::less<site>, raw_allocator<site>> &covered()
{
    static std::set<site, std::less<site>, raw_allocator<site>> c;
    return c;
}

void cover(rl::debug_info_param info)
{
    covered().insert({ info.func_, info.file_ });
}

void print_coverage(FILE *out)
{
    std::set<std::pair<std::string, std::string>> lines;
    for (const site &s : covered())
        lines.insert({ s.second, s.first });
    for (const auto &l : lines)
        fprintf(out, "covers\t%s\t%s\n", l.first.c_str(), l.second.c_str());
}

namespace
{
template <rl::thread_id_t N> void fresh_init_record_n(rl::atomic_data *data)
{
    auto &var = *static_cast<rl::atomic_data_impl<N> *>(data);
    auto &rec = var.history_[var.current_index_ % rl::atomic_history_size];
    rl::thread_info_base &me = *rl::ctx().threadx_;
    for (rl::thread_id_t i = 0; i != N; i++)
        rec.first_seen_order_[i] = (rl::timestamp_t)-1;
    rec.first_seen_order_[me.index_] = me.own_acq_rel_order_;
}
} // namespace

void fresh_init_record(rl::atomic_data *data)
{
    switch (rl::ctx().get_thread_count()) {
    case 1: return fresh_init_record_n<1>(data);
    case 2: return fresh_init_record_n<2>(data);
    case 3: return fresh_init_record_n<3>(data);
    case 4: return fresh_init_record_n<4>(data);
    case 5: return fresh_init_record_n<5>(data);
    case 6: return fresh_init_record_n<6>(data);
    case 7: return fresh_init_record_n<7>(data);
    case 8: return fresh_init_record_n<8>(data);
    }
    RL_VERIFY(false);
    abort();
}

void keep(void *obj, void (*destroy)(void *))
{
    kept().push_back({ obj, destroy });
}

unsigned thread_index()
{
    unsigned i = rl::ctx().threadx_->index_;
    RL_VERIFY(i < MAX_THREADS);
    return i;
}

/* ---- the heap ------------------------------------------------------------ */

void *heap_alloc(size_t align, size_t size, bool zero, rl::debug_info_param info)
{
    if (align < 16)
        align = 16;
    char *raw = static_cast<char *>(rl::rl_malloc(size + align, info));
    char *p = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(raw) + align - 1) &
                                       ~(uintptr_t)(align - 1));
    /* what malloc hands out is not zero: an atomic in it that nothing
       initialised is reported when first used (UNINITIALISED) */
    memset(p, zero ? 0 : 0xcd, size);
    blocks()[p] = { raw, size, false };
    return p;
}

void heap_free(void *p, rl::debug_info_param info)
{
    if (p == nullptr)
        return;
    auto it = blocks().find(p);
    if (it == blocks().end() || it->second.freed)
        fail("free() of a block not allocated, or freed twice",
             rl::test_result_double_free, info);
    /* Poison, and keep the block to the iteration's end: no later
       allocation reuses it, so a stale pointer keeps reading the poison.
       An atomic in it is FREED; a plain field reads 0xdb bytes. */
    memset(p, 0xdb, it->second.size);
    it->second.freed = true;
}

void *heap_realloc(void *p, size_t size, rl::debug_info_param info)
{
    void *fresh = heap_alloc(16, size, false, info);
    if (p != nullptr) {
        auto it = blocks().find(p);
        if (it == blocks().end() || it->second.freed)
            fail("realloc() of a block not allocated, or freed",
                 rl::test_result_double_free, info);
        memcpy(fresh, p, it->second.size < size ? it->second.size : size);
        heap_free(p, info);
    }
    return fresh;
}

void *map_anonymous(size_t size)
{
    void *p = ::calloc(1, size);
    if (p == nullptr)
        return MAP_FAILED;
    mappings().push_back(p);
    return p;
}

long model_sysconf(int name)
{
    if (name != _SC_PAGESIZE)
        fail("sysconf: a name the model does not know", rl::test_result_user_assert_failed,
             $);
    return MODEL_PAGE;
}

void *process_block(size_t size)
{
    return map_anonymous(size);
}

/* ---- the clock and the futex --------------------------------------------- */

int clock_gettime(clockid_t clock, struct timespec *ts)
{
    (void)clock;
    ts->tv_sec = (time_t)(clock_now / 1000000000);
    ts->tv_nsec = (long)(clock_now % 1000000000);
    return 0;
}

long syscall(long number, atomic<uint32_t> *word, int op, uint32_t value,
             const struct timespec *deadline, const void *word2, uint32_t value3)
{
    (void)word2;
    (void)value3;
    rl::debug_info info = $;
    if (number != SYS_futex)
        fail("a syscall the model does not know", rl::test_result_user_assert_failed,
             info);
    rl::context &c = rl::ctx();
    zero_atomic<uint32_t> &a = word->get(info);
    int cmd = op & FUTEX_CMD_MASK;
    if (cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET) {
        /* as Relacy's own futex (stdlib/pthread.hpp): the kernel's full
           barrier, then the value check and the park with no switch
           between them */
        c.sched();
        c.atomic_thread_fence_seq_cst();
        uint32_t now;
        {
            rl::preemption_disabler no_switch(c);
            now = a.load(rl::mo_acquire, info);
        }
        if (now != value) {
            errno = EAGAIN;
            return -1;
        }
        rl::unpark_reason why = a.wait(c, deadline != nullptr, true, info);
        if (why == rl::unpark_reason_timeout) {
            /* FUTEX_WAIT_BITSET's deadline is absolute: time is now past it */
            int64_t at = (int64_t)deadline->tv_sec * 1000000000 + deadline->tv_nsec;
            if (at > clock_now)
                clock_now = at;
            errno = ETIMEDOUT;
            return -1;
        }
        return 0;
    }
    if (cmd == FUTEX_WAKE || cmd == FUTEX_WAKE_BITSET) {
        c.sched();
        c.atomic_thread_fence_seq_cst();
        return a.wake(c, value, info);
    }
    fail("a futex operation the model does not know",
         rl::test_result_user_assert_failed, info);
}

long syscall(long number, ...)
{
    (void)number;
    fail("a syscall the model does not know (only the futex is modelled)",
         rl::test_result_user_assert_failed, $);
}

/* ---- fds ------------------------------------------------------------------- */

/* The kernel's side of the fds the library makes (core_fd.c, looper_fd.c):
   eventfds and epoll sets, in a table per iteration.  What the model keeps
   of the kernel:
   - each call on a file is a syscall: a scheduling point, then an acq_rel
     RMW on the file's `lock` (a Relacy atomic), as the kernel takes the
     file's lock: the calls on one file are in one order, each happening
     after the one before it.  Calls on different files do not
     synchronise.  Making a file (eventfd, epoll_create1) and
     fcntl(F_GETFD) take no lock and are no scheduling point: they touch
     nothing another thread's call can reach (the model closes no fd that
     another thread is adding);
   - an eventfd is a counter: a write adds to it (readable while it is not
     zero), a read takes it all (EAGAIN at zero: nonblocking only);
   - an epoll set is an interest list of (fd, events, data).  An entry
     reports the ready events of its file that it asked for (errors and
     hang-ups always): level-triggered, while they hold; edge-triggered
     (EPOLLET), once per write to the file and once for readiness that an
     ADD or MOD finds, as the kernel's ready list does.  A write takes the
     lock of each set that watches the file (the kernel's wake-up callback
     does) and wakes the set's waiters.  A wait that reports a file takes
     that file's lock as well (the kernel polls it), so the wait happens
     after the write it reports;
   - a blocking wait checks the list and parks on the set's waitset with no
     scheduling point between, so a wake-up lost (no write where one was
     due) leaves it parked for good: with every other thread done, a
     DEADLOCK.  A parked wait may also end spuriously (EINTR, a signal);
     a timed one may time out, and the model clock moves past its timeout;
   - close takes the file out of every set that watches it (the model has
     no dup).  A call on a closed fd answers EBADF; closing one twice, or
     any call on an fd the model did not make, fails the iteration.
   Not modelled: pipes, sockets, timerfd, epoll sets in epoll sets,
   blocking reads, EFD_SEMAPHORE, EPOLLONESHOT, EPOLLEXCLUSIVE. */
namespace
{

struct interest {
    int fd;
    uint32_t events; /* as given, EPOLLET included */
    uint64_t data;
    bool queued; /* edge-triggered: an edge not reported yet */
};
enum file_kind { EVENTFD, EPOLL };
struct file {
    file_kind kind;
    bool open;
    bool nonblock;
    uint64_t count;           /* eventfd */
    vector<interest> watched; /* epoll */
    zero_atomic<uint64_t> *lock;
};

/* This iteration's files by fd - FD_BASE; each kept to the iteration's
   end, so that a pointer to one stays valid across scheduling points. */
vector<file *> &files()
{
    static vector<file *> f;
    return f;
}

/* The file fd names, open or closed; fails the iteration for an fd the
   model did not make. */
file &fd_file(int fd, const char *call, rl::debug_info_param info)
{
    if (fd < FD_BASE || (size_t)(fd - FD_BASE) >= files().size()) {
        static char what[96];
        snprintf(what, sizeof(what), "%s(%d): an fd the model did not make", call, fd);
        fail(what, rl::test_result_user_assert_failed, info);
    }
    return *files()[(size_t)(fd - FD_BASE)];
}

int fd_make(file_kind kind, bool nonblock, uint64_t count)
{
    file *f = make_object<file>();
    keep(f, drop_object<file>);
    f->kind = kind;
    f->open = true;
    f->nonblock = nonblock;
    f->count = count;
    f->lock = make_object<zero_atomic<uint64_t>>();
    fresh_init(*f->lock);
    keep(f->lock, drop_object<zero_atomic<uint64_t>>);
    files().push_back(f);
    return FD_BASE + (int)(files().size() - 1);
}

/* The kernel's lock of f: the first one a call takes is its scheduling
   point; the others are taken with preemption disabled. */
void take_lock(file &f, rl::debug_info_param info)
{
    f.lock->fetch_add(1, rl::mo_acq_rel, info);
}

int fail_errno(int err)
{
    errno = err;
    return -1;
}

uint32_t ready_events(const file &f)
{
    if (f.kind == EVENTFD)
        return (f.count > 0 ? (uint32_t)EPOLLIN : 0) |
               (f.count < UINT64_MAX - 1 ? (uint32_t)EPOLLOUT : 0);
    return 0;
}

/* What entry i of a set reports now (0: nothing). */
uint32_t reportable(const interest &i)
{
    const file &f = *files()[(size_t)(i.fd - FD_BASE)];
    uint32_t r = ready_events(f) & (i.events | EPOLLERR | EPOLLHUP);
    if ((i.events & EPOLLET) && !i.queued)
        return 0;
    return r;
}

interest *find_interest(file &ep, int fd)
{
    for (interest &i : ep.watched)
        if (i.fd == fd)
            return &i;
    return nullptr;
}

void wake_waiters(file &ep, rl::debug_info_param info)
{
    ep.lock->wake(rl::ctx(), (rl::thread_id_t)MAX_THREADS, info);
}

} // namespace

int fd_eventfd(unsigned initval, int flags, rl::debug_info_param info)
{
    if (flags & EFD_SEMAPHORE)
        fd_unmodelled("eventfd(EFD_SEMAPHORE)", info);
    return fd_make(EVENTFD, (flags & EFD_NONBLOCK) != 0, initval);
}

int fd_epoll_create1(int flags, rl::debug_info_param info)
{
    (void)flags;
    (void)info;
    return fd_make(EPOLL, false, 0);
}

int fd_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev,
                 rl::debug_info_param info)
{
    rl::context &c = rl::ctx();
    file &ep = fd_file(epfd, "epoll_ctl", info);
    file &t = fd_file(fd, "epoll_ctl", info);
    if (t.kind == EPOLL)
        fd_unmodelled("epoll_ctl of an epoll set in an epoll set", info);
    take_lock(ep, info);
    rl::preemption_disabler no_switch(c);
    if (!ep.open || !t.open)
        return fail_errno(EBADF);
    if (ep.kind != EPOLL || fd == epfd)
        return fail_errno(EINVAL);
    take_lock(t, info);
    interest *i = find_interest(ep, fd);
    if (op == EPOLL_CTL_DEL) {
        if (i == nullptr)
            return fail_errno(ENOENT);
        *i = ep.watched.back();
        ep.watched.pop_back();
        return 0;
    }
    if (op == EPOLL_CTL_ADD) {
        if (i != nullptr)
            return fail_errno(EEXIST);
        ep.watched.push_back(interest{ fd, 0, 0, false });
        i = &ep.watched.back();
    } else if (op == EPOLL_CTL_MOD) {
        if (i == nullptr)
            return fail_errno(ENOENT);
    } else {
        return fail_errno(EINVAL);
    }
    if (ev->events & (EPOLLONESHOT | EPOLLEXCLUSIVE))
        fd_unmodelled("epoll_ctl with EPOLLONESHOT or EPOLLEXCLUSIVE", info);
    i->events = ev->events;
    i->data = ev->data.u64;
    /* the kernel polls the file at ADD and MOD: readiness found is an edge */
    i->queued = (ready_events(t) & (i->events | EPOLLERR | EPOLLHUP)) != 0;
    if (reportable(*i))
        wake_waiters(ep, info);
    return 0;
}

int fd_epoll_wait(int epfd, struct epoll_event *events, int max, int64_t timeout_ns,
                  rl::debug_info_param info)
{
    rl::context &c = rl::ctx();
    file &ep = fd_file(epfd, "epoll_wait", info);
    for (;;) {
        take_lock(ep, info);
        int n = 0;
        {
            rl::preemption_disabler no_switch(c);
            if (!ep.open)
                return fail_errno(EBADF);
            if (ep.kind != EPOLL || max <= 0)
                return fail_errno(EINVAL);
            for (interest &i : ep.watched) {
                if (n == max)
                    break;
                uint32_t r = reportable(i);
                i.queued = false; /* reported now, or not ready: off the list */
                if (r == 0)
                    continue;
                take_lock(*files()[(size_t)(i.fd - FD_BASE)], info);
                events[n].events = r;
                events[n].data.u64 = i.data;
                n++;
            }
        }
        if (n > 0 || timeout_ns == 0)
            return n;
        /* nothing ready: park, with no scheduling point since the check */
        rl::unpark_reason why = ep.lock->wait(c, timeout_ns > 0, true, info);
        if (why == rl::unpark_reason_timeout) {
            clock_now += timeout_ns;
            return 0;
        }
        if (why == rl::unpark_reason_spurious)
            return fail_errno(EINTR);
    }
}

int fd_epoll_wait_ms(int epfd, struct epoll_event *events, int max, int ms,
                     rl::debug_info_param info)
{
    return fd_epoll_wait(epfd, events, max, ms < 0 ? -1 : (int64_t)ms * 1000000, info);
}

long syscall(long number, int epfd, struct epoll_event *events, int max,
             const struct timespec *timeout, const void *sigmask, size_t sigsetsize)
{
    (void)sigsetsize;
    rl::debug_info info = $;
    if (number != SYS_epoll_pwait2)
        fail("a syscall the model does not know", rl::test_result_user_assert_failed,
             info);
    if (sigmask != nullptr)
        fd_unmodelled("epoll_pwait2 with a signal mask", info);
    int64_t ns = timeout == nullptr
                     ? -1
                     : (int64_t)timeout->tv_sec * 1000000000 + timeout->tv_nsec;
    return fd_epoll_wait(epfd, events, max, ns, info);
}

ssize_t fd_read(int fd, void *buf, size_t n, rl::debug_info_param info)
{
    file &f = fd_file(fd, "read", info);
    if (f.kind != EVENTFD)
        fd_unmodelled("read of an epoll fd", info);
    take_lock(f, info);
    if (!f.open)
        return fail_errno(EBADF);
    if (n < sizeof(uint64_t))
        return fail_errno(EINVAL);
    if (f.count == 0) {
        if (!f.nonblock)
            fd_unmodelled("a blocking read", info);
        return fail_errno(EAGAIN);
    }
    memcpy(buf, &f.count, sizeof(uint64_t));
    f.count = 0;
    return sizeof(uint64_t);
}

ssize_t fd_write(int fd, const void *buf, size_t n, rl::debug_info_param info)
{
    rl::context &c = rl::ctx();
    file &f = fd_file(fd, "write", info);
    if (f.kind != EVENTFD)
        fd_unmodelled("write to an epoll fd", info);
    take_lock(f, info);
    rl::preemption_disabler no_switch(c);
    if (!f.open)
        return fail_errno(EBADF);
    uint64_t v;
    if (n < sizeof(uint64_t))
        return fail_errno(EINVAL);
    memcpy(&v, buf, sizeof(v));
    if (v == UINT64_MAX)
        return fail_errno(EINVAL);
    if (v > UINT64_MAX - 1 - f.count)
        fd_unmodelled("an eventfd write that blocks or answers EAGAIN", info);
    f.count += v;
    if (v == 0)
        return sizeof(uint64_t);
    /* the wake-up callback of every set watching f: an edge, under the
       set's lock */
    for (file *ep : files()) {
        if (ep->kind != EPOLL || !ep->open)
            continue;
        interest *i = find_interest(*ep, fd);
        if (i == nullptr)
            continue;
        take_lock(*ep, info);
        i->queued = true;
        if (reportable(*i))
            wake_waiters(*ep, info);
    }
    return sizeof(uint64_t);
}

int fd_close(int fd, rl::debug_info_param info)
{
    rl::context &c = rl::ctx();
    file &f = fd_file(fd, "close", info);
    take_lock(f, info);
    rl::preemption_disabler no_switch(c);
    if (!f.open)
        fail("close() of an fd already closed", rl::test_result_double_free, info);
    f.open = false;
    f.watched.clear();
    for (file *ep : files()) {
        if (ep->kind != EPOLL || !ep->open)
            continue;
        interest *i = find_interest(*ep, fd);
        if (i == nullptr)
            continue;
        take_lock(*ep, info);
        *i = ep->watched.back();
        ep->watched.pop_back();
    }
    return 0;
}

int fd_fcntl(int fd, int cmd, rl::debug_info_param info)
{
    file &f = fd_file(fd, "fcntl", info);
    if (cmd != F_GETFD)
        fd_unmodelled("fcntl other than F_GETFD", info);
    return f.open ? FD_CLOEXEC : fail_errno(EBADF);
}

int fd_unmodelled(const char *call, rl::debug_info_param info)
{
    static char what[128];
    snprintf(what, sizeof(what), "%s: not in the model", call);
    fail(what, rl::test_result_user_assert_failed, info);
}

unsigned fds_open()
{
    unsigned n = 0;
    for (const file *f : files())
        n += f->open;
    return n;
}

/* ---- pthread stand-ins ---------------------------------------------------- */

int mutex_init(mutex *m)
{
    init(&m->locked, 0, $);
    return 0;
}

int mutex_lock(mutex *m, rl::debug_info_param info)
{
    for (;;) {
        int expected = 0;
        if (cas<false>(&m->locked, &expected, 1, rl::mo_acquire, rl::mo_relaxed, info))
            return 0;
        rl::yield(1, info);
    }
}

int mutex_unlock(mutex *m, rl::debug_info_param info)
{
    store(&m->locked, 0, rl::mo_release, info);
    return 0;
}

int run_once(once *o, void (*fn)(void))
{
    if (o->stamp != iteration) {
        o->stamp = iteration;
        fn();
    }
    return 0;
}

int key_create(pthread_key_t *key, void (*destroy)(void *))
{
    keys().push_back(key_slot{ destroy, {} });
    *key = (pthread_key_t)(keys().size() - 1);
    return 0;
}

int key_set(pthread_key_t key, const void *value)
{
    keys().at(key).value[thread_index()] = value;
    return 0;
}

void *key_get(pthread_key_t key)
{
    return const_cast<void *>(keys().at(key).value[thread_index()]);
}

void thread_exit()
{
    unsigned me = thread_index();
    for (key_slot &k : keys()) {
        const void *v = k.value[me];
        k.value[me] = nullptr;
        if (v != nullptr && k.destroy != nullptr)
            k.destroy(const_cast<void *>(v));
    }
}

/* ---- iterations ------------------------------------------------------------ */

void iteration_begin()
{
    /* After a failed iteration (or Relacy's replay of it) the objects of
       its context are gone with it: forget them, do not destroy them. */
    kept().clear();
    blocks().clear();
    keys().clear();
    files().clear();
    iteration++;
    if (iteration == FRESH || iteration == UNINITIALISED || iteration == FREED ||
        iteration == RECYCLED)
        iteration++;
    clock_now = CLOCK_START_NS;
    in_iteration = true;
}

void iteration_end()
{
    if (fds_open() != 0)
        fail("an fd still open at the iteration's end", rl::test_result_resource_leak, $);
    files().clear();
    for (auto &k : kept())
        k.second(k.first);
    kept().clear();
    /* freed blocks go back to Relacy now; a block still allocated is a
       leak, which Relacy reports when the iteration ends */
    for (auto &b : blocks())
        if (b.second.freed)
            rl::rl_free(b.second.raw, $);
    blocks().clear();
    for (void *p : mappings())
        ::free(p);
    mappings().clear();
    keys().clear();
    in_iteration = false;
}

/* ---- crashes and assert() ------------------------------------------------- */

static void on_crash(int sig)
{
    if (!in_iteration) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    static char what[64];
    snprintf(what, sizeof(what), "crash: signal %d (%s)", sig, strsignal(sig));
    /* Relacy records the failure and switches to its main fiber, which
       replays the iteration with history; this handler never returns. */
    rl::ctx().fail_test(what, rl::test_result_user_assert_failed, $);
    _exit(3);
}

void install_crash_handlers()
{
    struct sigaction sa = {};
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (int sig : { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT })
        sigaction(sig, &sa, nullptr);
}

} // namespace dq_rl

/* The library's assert() failing inside an iteration: a Relacy failure. */
extern "C" void __assert_fail(const char *assertion, const char *file, unsigned line,
                              const char *function)
{
    static char what[256];
    snprintf(what, sizeof(what), "assert(%s) in %s", assertion, function);
    if (!dq_rl::in_iteration) {
        fprintf(stderr, "%s:%u: %s\n", file, line, what);
        abort();
    }
    rl::ctx().fail_test(what, rl::test_result_user_assert_failed,
                        rl::debug_info(function, file, (int)line));
    _exit(3);
}
