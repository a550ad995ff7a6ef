/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_relacy.h: the Relacy side of deliqueue/src/atomic.h.
 *
 * The harnesses here compile the library's own sources (the .c files of
 * deliqueue/src, unchanged) as C++ with -DDQ_RELACY and this directory on
 * the include path; atomic.h then includes this header instead of
 * <stdatomic.h>.  It
 * maps what the core shares between threads onto Relacy Race Detector,
 * which runs every simulated thread as a fiber of one OS thread and
 * explores their interleavings under the C++11 memory model (store
 * buffering, the seq_cst total order, release sequences):
 *
 *   library                        here
 *   _Atomic(T), atomic_*_explicit  dq_rl::atomic<T>: a Relacy atomic, made at
 *                                  the object's first access in an iteration
 *                                  (C code memsets and atomic_inits raw memory:
 *                                  no constructor runs)
 *   memory_order_*                 Relacy's orders
 *   DQ_THREAD_LOCAL, DQ_TLS        one instance per simulated thread, zero at
 *                                  each iteration's start
 *   DQ_PROCESS_STATIC,             zero at each iteration's start; a block
 *   DQ_PROCESS_MALLOC              zeroed and kept to the iteration's end
 *                                  (an iteration is the model's process)
 *   syscall(SYS_futex, ...)        Relacy's futex model (wait: a seq_cst fence,
 *                                  then the value check and the park, atomically;
 *                                  wake: a seq_cst fence, then unpark); a
 *                                  consumer parked with no deadline while every
 *                                  other thread is done is a Relacy DEADLOCK
 *   eventfd, epoll_create1,        the model's fds (dq_relacy.cc, "fds"): a
 *   epoll_ctl, epoll_wait,         table per iteration of eventfds (a counter)
 *   syscall(SYS_epoll_pwait2, ...),and epoll sets (an interest list, level- or
 *   read, write, close,            edge-triggered); each call is a scheduling
 *   fcntl(F_GETFD)                 point and an acq_rel RMW on a Relacy atomic
 *                                  per file (the kernel's lock of it); a
 *                                  blocking epoll wait checks readiness and
 *                                  parks with no switch between, so a wake-up
 *                                  lost leaves it parked: a DEADLOCK as on the
 *                                  futex; an fd still open at the iteration's
 *                                  end is a RESOURCE LEAK
 *   clock_gettime                  the model clock: constant through an
 *                                  iteration, moved to a wait's deadline when
 *                                  the wait times out
 *   malloc, calloc, realloc,       Relacy's heap (a leak is a MEMORY LEAK); a
 *   aligned_alloc, free            freed block is poisoned and kept to the
 *                                  iteration's end, so a later access to one of
 *                                  its atomics is ACCESS TO FREED MEMORY and a
 *                                  read of a plain field returns 0xdb bytes
 *   pthread_mutex_*                a stand-in on a Relacy atomic (acquire CAS,
 *                                  release store; a waiter yields)
 *   pthread_once, pthread_key_*,   per-iteration stand-ins; a key's destructor
 *   pthread_atfork, mmap, munmap,  runs at dq_rl_thread_exit; mmap hands out
 *   madvise, sched_yield, sysconf  zeroed memory kept to the iteration's end;
 *                                  the page is 256 bytes
 *   assert (__assert_fail), a      a Relacy failure with the history, not an
 *   crash (SIGSEGV, SIGBUS, ...)   abort of the whole run
 *
 * What does not change: the library's code, its memory orders, which
 * accesses are atomic, and the order of its operations.  Plain fields
 * (payloads, due keys, the looper's own fields) stay plain: Relacy checks
 * no race on them, only their effects (the harnesses' assertions, and the
 * poison of freed and recycled memory).  Layout assertions about atomics'
 * sizes (DQ_ATOMIC_LAYOUT_ASSERT) are compiled but not enforced: a Relacy
 * atomic is larger than a C11 one.
 */
#ifndef DQ_RELACY_H
#define DQ_RELACY_H

#ifndef __cplusplus
#error "dq_relacy.h: the model build compiles the library as C++ (-x c++)"
#endif

/* Every system header the library includes, before the macros below, so
   that none of them reaches a declaration there. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <type_traits>

/* Relacy's pieces without relacy.hpp's own macros (new, malloc, assert,
   errno, pthread_*, memory_order_*), which would rewrite the library. */
#include <relacy/base.hpp>
/* Relacy's headers with their private members open (the C++ library's
   headers are in already, through base.hpp): the layer completes the
   initial record of each atomic it makes (dq_rl::fresh_init_record). */
#define private public
#include <relacy/context.hpp>
#include <relacy/atomic.hpp>
#undef private
#include <relacy/context_base_impl.hpp>
#include <relacy/backoff.hpp>
#include <relacy/atomic_fence.hpp>
#include <relacy/atomic.hpp>
#include <relacy/var.hpp>
#include <relacy/thread_local.hpp>
#include <relacy/test_suite.hpp>
#include <relacy/dyn_thread.hpp>
#include <relacy/stdlib/mutex.hpp>
#include <relacy/stdlib/condition_variable.hpp>
#include <relacy/stdlib/semaphore.hpp>
#include <relacy/stdlib/event.hpp>

namespace dq_rl
{

/* The iteration under way: 1, 2, ... (dq_rl::iteration_begin).  An atomic
   or thread-local stamped with an older one is fresh again. */
extern uint32_t iteration;
/* The model clock (ns), what clock_gettime returns. */
extern int64_t clock_now;

/* Stamps that are not iterations: an atomic in memory that malloc handed
   out and nothing initialised, in a freed block, or in a node given back
   to the pool (the stub pool poisons `next` and `owner`). */
enum : uint32_t {
    FRESH = 0,
    UNINITIALISED = 0xcdcdcdcdu,
    FREED = 0xdbdbdbdbu,
    RECYCLED = 0x7ec7c1edu,
};

/* Fail the iteration (Relacy prints the history); never returns. */
[[noreturn]] void fail(const char *what, rl::test_result_e result,
                       rl::debug_info_param info);
[[noreturn]] void stale_access(uint32_t stamp, const void *where,
                               rl::debug_info_param info);
/* Coverage (harness --coverage): while covering, every atomic operation
   and fence that the harness's threads make while they run together
   records the function and file it is written in, so that a mutant of
   one function is judged by the harnesses that race it.  What before()
   and after() do alone (setup, the last unref, teardown) is ordered
   before or after every thread and is not counted. */
extern bool covering;
extern bool threads_running;
void cover(rl::debug_info_param info);
/* One line per function reached: "covers\tFILE\tFUNCTION". */
void print_coverage(FILE *out);

/* Keep obj until the iteration's end, then destroy it. */
void keep(void *obj, void (*destroy)(void *));

/* Memory for the model's own objects, from the C library: Relacy replaces
   operator new inside a simulation (its heap, leak-checked per
   iteration), and the sized and aligned deletes it does not replace would
   free its blocks with the C library's free. */
template <typename T, typename... Args> T *make_object(Args... args)
{
    void *p = (::aligned_alloc)(alignof(T) < 16 ? 16 : alignof(T),
                                (sizeof(T) + 63) & ~(size_t)63);
    if (p == nullptr)
        abort();
    return ::new (p) T(args...);
}
template <typename T> void drop_object(void *p)
{
    static_cast<T *>(p)->~T();
    (::free)(p);
}
template <typename T> struct raw_allocator {
    typedef T value_type;
    raw_allocator() = default;
    template <typename U> raw_allocator(const raw_allocator<U> &)
    {
    }
    T *allocate(size_t n)
    {
        void *p = (::malloc)(n * sizeof(T));
        if (p == nullptr)
            abort();
        return static_cast<T *>(p);
    }
    void deallocate(T *p, size_t)
    {
        (::free)(p);
    }
    template <typename U> bool operator==(const raw_allocator<U> &) const
    {
        return true;
    }
};

/* A Relacy atomic whose history starts with a zero that every thread may
   read (as an object zeroed before it was shared: static storage, or
   memory that memset cleared before publishing it). */
template <typename T> using zero_atomic = rl::generic_atomic<T, true>;

/* Relacy's atomic_init (the initial zero of a zero_atomic) fills its
   history record but for first_seen_order_, which keeps what the last
   atomic in that memory left there (Relacy recycles an iteration's atomic
   records).  Loads read it (which older values a thread may still read),
   so a systematic search would not be deterministic: the same prefix of
   choices could meet a different set of choices next, and the search
   tree's replay of it pick a choice out of range (a crash in Relacy's
   waitset, or its RL_VERIFY under RL_DO_ASSERT).  This sets it as a store
   would: seen by the creating thread now, by no other thread yet. */
void fresh_init_record(rl::atomic_data *data);
template <typename T> void fresh_init(zero_atomic<T> &a)
{
    fresh_init_record(a.impl_);
}

template <typename T> struct atomic {
    T init_;                       /* its value before the first access */
    mutable uint32_t stamp_;       /* iteration of live_, or a stamp above */
    mutable zero_atomic<T> *live_; /* the Relacy atomic of this iteration */

    constexpr atomic() : init_(), stamp_(FRESH), live_(nullptr)
    {
    }
    constexpr atomic(T v) : init_(v), stamp_(FRESH), live_(nullptr)
    {
    }

    zero_atomic<T> &get(rl::debug_info_param info) const
    {
        if (covering && threads_running)
            cover(info);
        if (stamp_ != iteration)
            make(info);
        return *live_;
    }

    /* The Relacy atomic of this iteration: zero, then init_ stored
       (relaxed) by the calling thread, with no scheduling point.  Made by
       atomic_init, or for zeroed and static memory at the first access. */
    void make(rl::debug_info_param info) const
    {
        if (stamp_ == UNINITIALISED || stamp_ == FREED || stamp_ == RECYCLED)
            stale_access(stamp_, this, info);
        rl::context &c = rl::ctx();
        rl::preemption_disabler no_switch(c);
        live_ = make_object<zero_atomic<T>>();
        fresh_init(*live_);
        stamp_ = iteration;
        keep(live_, drop_object<zero_atomic<T>>);
        if (init_ != T())
            live_->store(init_, rl::mo_relaxed, info);
    }
};

template <typename T> using value_of = std::type_identity_t<T>;

template <typename T>
inline void init(atomic<T> *a, value_of<T> v, rl::debug_info_param info)
{
    a->init_ = v;
    a->stamp_ = FRESH;
    a->make(info);
}
template <typename T>
inline T load(const atomic<T> *a, rl::memory_order mo, rl::debug_info_param info)
{
    return a->get(info).load(mo, info);
}
template <typename T>
inline void store(atomic<T> *a, value_of<T> v, rl::memory_order mo,
                  rl::debug_info_param info)
{
    a->get(info).store(v, mo, info);
}
template <typename T>
inline T exchange(atomic<T> *a, value_of<T> v, rl::memory_order mo,
                  rl::debug_info_param info)
{
    return a->get(info).exchange(v, mo, info);
}
template <bool weak, typename T>
inline bool cas(atomic<T> *a, T *expected, value_of<T> desired,
                rl::memory_order success, rl::memory_order failure,
                rl::debug_info_param info)
{
    return a->get(info).compare_exchange(rl::bool_t<weak>(), *expected, desired,
                                         success, failure, info);
}
template <typename T>
inline T fetch_add(atomic<T> *a, typename rl::atomic_add_type<T>::type v,
                   rl::memory_order mo, rl::debug_info_param info)
{
    return a->get(info).fetch_add(v, mo, info);
}
template <typename T>
inline T fetch_sub(atomic<T> *a, typename rl::atomic_add_type<T>::type v,
                   rl::memory_order mo, rl::debug_info_param info)
{
    return a->get(info).fetch_sub(v, mo, info);
}
template <typename T>
inline T fetch_or(atomic<T> *a, value_of<T> v, rl::memory_order mo,
                  rl::debug_info_param info)
{
    return a->get(info).fetch_or(v, mo, info);
}
template <typename T>
inline T fetch_and(atomic<T> *a, value_of<T> v, rl::memory_order mo,
                   rl::debug_info_param info)
{
    return a->get(info).fetch_and(v, mo, info);
}
inline void fence(rl::memory_order mo, rl::debug_info_param info)
{
    if (covering && threads_running)
        cover(info);
    rl::atomic_thread_fence(mo, info);
}

/* Thread-locals: a slot per simulated thread, zero at its first use in an
   iteration (as a new thread's are). */
inline constexpr unsigned MAX_THREADS = 8;
unsigned thread_index();

template <typename T> struct tls {
    T slot_[MAX_THREADS];
    uint32_t stamp_[MAX_THREADS];

    constexpr tls() : slot_(), stamp_()
    {
    }
    T &get()
    {
        unsigned i = thread_index();
        if (stamp_[i] != iteration) {
            slot_[i] = T();
            stamp_[i] = iteration;
        }
        return slot_[i];
    }
};

/* Plain process-wide state: zero again at each iteration's start, as
   every other static of the model's one-iteration process. */
template <typename T> struct process_static {
    T value_;
    uint32_t stamp_;

    constexpr process_static() : value_(), stamp_()
    {
    }
    T &get()
    {
        if (stamp_ != iteration) {
            value_ = T();
            stamp_ = iteration;
        }
        return value_;
    }
    operator T()
    {
        return get();
    }
    process_static &operator=(const T &v)
    {
        get() = v;
        return *this;
    }
};

/* The futex, on the 32-bit atomic of a dq_event, and epoll_pwait2 (the
   fds below); other syscalls are not modelled (a harness that reaches one
   fails). */
long syscall(long number, atomic<uint32_t> *word, int op, uint32_t value,
             const struct timespec *deadline, const void *word2, uint32_t value3);
long syscall(long number, ...);
int clock_gettime(clockid_t clock, struct timespec *ts);

/* File descriptors (dq_relacy.cc, "fds"): eventfds and epoll sets, numbered
   from FD_BASE, nothing of the real kernel's.  A call on any other fd, or
   one the model does not know (timerfd, nested epoll, a blocking read),
   fails the iteration. */
inline constexpr int FD_BASE = 1 << 20;
int fd_eventfd(unsigned initval, int flags, rl::debug_info_param info);
int fd_epoll_create1(int flags, rl::debug_info_param info);
int fd_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev,
                 rl::debug_info_param info);
/* timeout_ns: < 0 waits for good, 0 polls */
int fd_epoll_wait(int epfd, struct epoll_event *events, int max, int64_t timeout_ns,
                  rl::debug_info_param info);
int fd_epoll_wait_ms(int epfd, struct epoll_event *events, int max, int ms,
                     rl::debug_info_param info);
/* epoll_pwait2: a relative timespec, NULL for none */
long syscall(long number, int epfd, struct epoll_event *events, int max,
             const struct timespec *timeout, const void *sigmask, size_t sigsetsize);
ssize_t fd_read(int fd, void *buf, size_t n, rl::debug_info_param info);
ssize_t fd_write(int fd, const void *buf, size_t n, rl::debug_info_param info);
int fd_close(int fd, rl::debug_info_param info);
int fd_fcntl(int fd, int cmd, rl::debug_info_param info);
[[noreturn]] int fd_unmodelled(const char *call, rl::debug_info_param info);
/* The model's fds open now. */
unsigned fds_open();

/* The heap (Relacy's, poisoned on free; see the header comment). */
void *heap_alloc(size_t align, size_t size, bool zero, rl::debug_info_param info);
void *heap_realloc(void *p, size_t size, rl::debug_info_param info);
void heap_free(void *p, rl::debug_info_param info);
void *map_anonymous(size_t size);
/* sysconf: _SC_PAGESIZE is the model's page, MODEL_PAGE bytes (a page of
   the pool's registry slots then holds 8, not 128, and dq_pool_count walks
   8); any other name fails the iteration. */
inline constexpr long MODEL_PAGE = 256;
long model_sysconf(int name);
/* A block for the process's life: zeroed, kept to the iteration's end. */
void *process_block(size_t size);

struct mutex {
    atomic<int> locked;
};
int mutex_init(mutex *m);
int mutex_lock(mutex *m, rl::debug_info_param info);
int mutex_unlock(mutex *m, rl::debug_info_param info);

struct once {
    uint32_t stamp;
};
int run_once(once *o, void (*fn)(void));
int key_create(pthread_key_t *key, void (*destroy)(void *));
int key_set(pthread_key_t key, const void *value);
void *key_get(pthread_key_t key);

/* The harness's side: each iteration's before() and after(), and each
   thread's end (thread-key destructors). */
void iteration_begin();
void iteration_end();
void thread_exit();
/* Once per process: a crash inside an iteration becomes its failure. */
void install_crash_handlers();

} // namespace dq_rl

/* ---- the names the library uses ---------------------------------------- */

#define _Static_assert static_assert
#define _Alignas(n) alignas(n)
/* GNU C in the rewrites of tools/mutants (a read-modify-write split into a
   load and a store is a statement expression with __auto_type locals). */
#define __auto_type auto
#define _Bool                              bool
#define DQ_ATOMIC_LAYOUT_ASSERT(cond, msg) static_assert((cond) || true, msg)

#define _Atomic(T) ::dq_rl::atomic<T>
#define DQ_THREAD_LOCAL(type, name)   ::dq_rl::tls<type> name
#define DQ_TLS(name)                  (name).get()
#define DQ_PROCESS_STATIC(type, name) ::dq_rl::process_static<type> name
#define DQ_PROCESS_MALLOC(size)       ::dq_rl::process_block(size)

typedef rl::memory_order memory_order;
#define memory_order_relaxed ::rl::mo_relaxed
#define memory_order_consume ::rl::mo_consume
#define memory_order_acquire ::rl::mo_acquire
#define memory_order_release ::rl::mo_release
#define memory_order_acq_rel ::rl::mo_acq_rel
#define memory_order_seq_cst ::rl::mo_seq_cst

#define atomic_init(obj, value)              ::dq_rl::init((obj), (value), $)
#define atomic_load_explicit(obj, mo)        ::dq_rl::load((obj), (mo), $)
#define atomic_store_explicit(obj, v, mo)    ::dq_rl::store((obj), (v), (mo), $)
#define atomic_exchange_explicit(obj, v, mo) ::dq_rl::exchange((obj), (v), (mo), $)
#define atomic_compare_exchange_strong_explicit(obj, expected, desired, success, \
                                                failure)                         \
    ::dq_rl::cas<false>((obj), (expected), (desired), (success), (failure), $)
#define atomic_compare_exchange_weak_explicit(obj, expected, desired, success, \
                                              failure)                         \
    ::dq_rl::cas<true>((obj), (expected), (desired), (success), (failure), $)
#define atomic_fetch_add_explicit(obj, v, mo) ::dq_rl::fetch_add((obj), (v), (mo), $)
#define atomic_fetch_sub_explicit(obj, v, mo) ::dq_rl::fetch_sub((obj), (v), (mo), $)
#define atomic_fetch_or_explicit(obj, v, mo)  ::dq_rl::fetch_or((obj), (v), (mo), $)
#define atomic_fetch_and_explicit(obj, v, mo) ::dq_rl::fetch_and((obj), (v), (mo), $)
#define atomic_thread_fence(mo)               ::dq_rl::fence((mo), $)
#define atomic_load(obj)                      atomic_load_explicit(obj, memory_order_seq_cst)
#define atomic_store(obj, v)                  atomic_store_explicit(obj, v, memory_order_seq_cst)

#define syscall                ::dq_rl::syscall
#define clock_gettime(clk, ts) ::dq_rl::clock_gettime((clk), (ts))

#define malloc(size)             ::dq_rl::heap_alloc(16, (size), false, $)
#define calloc(count, size)      ::dq_rl::heap_alloc(16, (count) * (size), true, $)
#define aligned_alloc(align, sz) ::dq_rl::heap_alloc((align), (sz), false, $)
#define realloc(p, size)         ::dq_rl::heap_realloc((p), (size), $)
#define free(p)                  ::dq_rl::heap_free((p), $)

#define eventfd(initval, flags)     ::dq_rl::fd_eventfd((initval), (flags), $)
#define epoll_create1(flags)        ::dq_rl::fd_epoll_create1((flags), $)
#define epoll_ctl(epfd, op, fd, ev) ::dq_rl::fd_epoll_ctl((epfd), (op), (fd), (ev), $)
#define epoll_wait(epfd, events, max, ms) \
    ::dq_rl::fd_epoll_wait_ms((epfd), (events), (max), (ms), $)
#define read(fd, buf, n)     ::dq_rl::fd_read((fd), (buf), (n), $)
#define write(fd, buf, n)    ::dq_rl::fd_write((fd), (buf), (n), $)
#define close(fd)            ::dq_rl::fd_close((fd), $)
#define fcntl(fd, cmd, ...)  ::dq_rl::fd_fcntl((fd), (cmd), $)
#define timerfd_create(...)  ::dq_rl::fd_unmodelled("timerfd_create", $)
#define timerfd_settime(...) ::dq_rl::fd_unmodelled("timerfd_settime", $)

#define sysconf(name)                         ::dq_rl::model_sysconf(name)
#define mmap(addr, len, prot, flags, fd, off) ::dq_rl::map_anonymous(len)
#define munmap(addr, len)                     ((void)(addr), (void)(len), 0)
#define madvise(addr, len, advice)            ((void)(addr), (void)(len), 0)
#define sched_yield()                         (::rl::yield(1, $), 0)

#define pthread_mutex_t ::dq_rl::mutex
#undef PTHREAD_MUTEX_INITIALIZER
#define PTHREAD_MUTEX_INITIALIZER \
    {                             \
    }
#define pthread_mutex_init(m, attr) ::dq_rl::mutex_init(m)
#define pthread_mutex_destroy(m)    ((void)(m), 0)
#define pthread_mutex_lock(m)       ::dq_rl::mutex_lock((m), $)
#define pthread_mutex_unlock(m)     ::dq_rl::mutex_unlock((m), $)
#define pthread_once_t              ::dq_rl::once
#undef PTHREAD_ONCE_INIT
#define PTHREAD_ONCE_INIT \
    {                     \
    }
#define pthread_once(o, fn)           ::dq_rl::run_once((o), (fn))
#define pthread_key_create(key, dtor) ::dq_rl::key_create((key), (dtor))
#define pthread_setspecific(key, v)   ::dq_rl::key_set((key), (v))
#define pthread_getspecific(key)      ::dq_rl::key_get(key)
#define pthread_atfork(prepare, parent, child) \
    ((void)(prepare), (void)(parent), (void)(child), 0)

#endif /* DQ_RELACY_H */
