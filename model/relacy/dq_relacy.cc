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
    iteration++;
    if (iteration == FRESH || iteration == UNINITIALISED || iteration == FREED ||
        iteration == RECYCLED)
        iteration++;
    clock_now = CLOCK_START_NS;
    in_iteration = true;
}

void iteration_end()
{
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
