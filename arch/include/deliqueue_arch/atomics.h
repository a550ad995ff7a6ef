/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deliqueue_arch/atomics.h: the atomic idioms of the queue, in C11.
 *
 * The queue core writes its atomics with <stdatomic.h> directly (so TSan and
 * ASan see every one); this header names the handful of idioms it uses, says
 * why each memory order is enough, and is what arch/atomics_probe.c compiles
 * in every config so that tools/check_atomics can check the instruction
 * families even of code that has no queue around it.
 *
 * Who may call what concurrently
 * ------------------------------
 *   idiom                     callers            races with
 *   dq_atomic_push            any thread         push, take_all, loads
 *   dq_atomic_take_all        any thread         push
 *   dq_atomic_claim           any thread         claim (exactly one wins)
 *   dq_atomic_enter/leave     any thread         enter, leave, quit bit CAS
 *
 * What each becomes (checked by tools/check_atomics, not assumed):
 *   idiom        x86_64           arm64-llsc          arm64-lse   arm64-outline
 *   push CAS     lock cmpxchg     ldxr/stlxr loop     casl        __aarch64_cas8_rel
 *   take_all     xchg             ldaxr/stxr loop     swpa        __aarch64_swp8_acq
 *   claim        lock cmpxchg     ldaxr/stlxr loop    casal       __aarch64_cas4_acq_rel
 *   enter/leave  lock xadd / sub  ldxr/stlxr loop     ldadd(a|l)  __aarch64_ldadd8_*
 */
#ifndef DELIQUEUE_ARCH_ATOMICS_H
#define DELIQUEUE_ARCH_ATOMICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Treiber push of node (whose link word is *node_next) onto *top.
   The relaxed loads are enough: nothing is read through the old top here.
   The release on success publishes node's fields (and its link) to whoever
   acquires top later (take_all, or a walker's acquire load of top). */
static inline void dq_atomic_push(_Atomic(uintptr_t) *top, uintptr_t node,
                                  _Atomic(uintptr_t) *node_next)
{
    uintptr_t old = atomic_load_explicit(top, memory_order_relaxed);
    do {
        atomic_store_explicit(node_next, old, memory_order_relaxed);
    } while (!atomic_compare_exchange_weak_explicit(
        top, &old, node, memory_order_release, memory_order_relaxed));
}

/* Detach the whole stack (the free list drain).  Acquire pairs with the
   release of every dq_atomic_push that built it. */
static inline uintptr_t dq_atomic_take_all(_Atomic(uintptr_t) *top)
{
    return atomic_exchange_explicit(top, 0, memory_order_acquire);
}

/* One-shot state transition (live -> delivered, or live -> removed).
   acq_rel: the winner acquires the poster's writes and releases its own to
   the loser, who reads the final state with acquire on failure. */
static inline bool dq_atomic_claim(_Atomic(uint32_t) *state, uint32_t from,
                                   uint32_t to)
{
    return atomic_compare_exchange_strong_explicit(
        state, &from, to, memory_order_acq_rel, memory_order_acquire);
}

/* Tagged user count: enter adds a user (acquire: our uses of the queue come
   after the count says we are in), leave drops one (release: our uses come
   before the looper can see zero).  Both return the previous word. */
static inline uint64_t dq_atomic_enter(_Atomic(uint64_t) *users)
{
    return atomic_fetch_add_explicit(users, 1, memory_order_acquire);
}

static inline uint64_t dq_atomic_leave(_Atomic(uint64_t) *users)
{
    return atomic_fetch_sub_explicit(users, 1, memory_order_release);
}

#endif /* DELIQUEUE_ARCH_ATOMICS_H */
