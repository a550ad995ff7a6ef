/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deliqueue_arch/cpu.h: which atomic instructions this CPU and this build use.
 *
 * Who may call what concurrently
 * ------------------------------
 *   every function here: any thread, any time, races with everything.
 *   The answers are constants of the process (the CPU does not change
 *   under a running process; AT_HWCAP is fixed at exec).
 *
 * The build variants:
 *   name            compiled with                        hot atomics are
 *   "x86_64"        (host)                               lock cmpxchg / xchg / lock xadd
 *   "arm64-llsc"    -march=armv8-a -mno-outline-atomics  ldaxr/stlxr retry loops
 *   "arm64-lse"     -march=armv8.1-a                     cas / swp / ldadd (one instruction)
 *   "arm64-outline" -moutline-atomics (+DQ_ATOMICS_OUTLINE)  calls to __aarch64_* helpers,
 *                                                        which test a flag on every call
 *   dispatched      both llsc and lse copies, picked once at load time by
 *                   GNU ifunc resolvers from AT_HWCAP; reports the copy chosen.
 *
 * dq_atomics() (declared in <deliqueue/deliqueue.h>, defined by the
 * library with DQ_ARCH_BUILD_ATOMICS below) reports the row of the code
 * that runs.
 */
#ifndef DELIQUEUE_ARCH_CPU_H
#define DELIQUEUE_ARCH_CPU_H

#include <stdbool.h>
#include <stdint.h>

/* The row of the table above that the including file's compile flags
   select.  GCC defines no macro for -moutline-atomics: //arch defines
   DQ_ATOMICS_OUTLINE for its dependents in the arm64-outline config.  With
   LSE enabled at compile time GCC inlines LSE even under
   -moutline-atomics, so LSE wins. */
#if defined(__x86_64__)
#define DQ_ARCH_BUILD_ATOMICS "x86_64"
#elif defined(__aarch64__) && defined(__ARM_FEATURE_ATOMICS)
#define DQ_ARCH_BUILD_ATOMICS "arm64-lse"
#elif defined(__aarch64__) && defined(DQ_ATOMICS_OUTLINE)
#define DQ_ARCH_BUILD_ATOMICS "arm64-outline"
#elif defined(__aarch64__)
#define DQ_ARCH_BUILD_ATOMICS "arm64-llsc"
#else
#define DQ_ARCH_BUILD_ATOMICS "generic"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A spin-wait hint for one round of a polling loop: PAUSE on x86 (lets
   the sibling hyperthread run, and leaves the loop without a memory-order
   mis-speculation flush), YIELD on arm64; a compiler barrier elsewhere. */
static inline void dq_arch_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("pause" ::: "memory");
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#else
    __asm__ volatile("" ::: "memory");
#endif
}

/* A write-intent prefetch of the line holding p: the line arrives owned,
   so the stores that follow need no second transaction to take it from
   another core's cache.  A hint only: p need not be dereferenceable.  GCC
   emits PREFETCHW only for -march targets that list it, so x86-64 spells
   it out (0F 0D /1: every x86-64 CPU decodes it, as a NOP at worst);
   arm64 gets PRFM PSTL1KEEP. */
static inline void dq_arch_prefetch_for_write(const void *p)
{
#if defined(__x86_64__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

/* A read prefetch of the line holding p into every cache level
   (PREFETCHT0, PRFM PLDL1KEEP); a hint only, like the write one. */
static inline void dq_arch_prefetch_for_read(const void *p)
{
    __builtin_prefetch(p, 0, 3);
}

/* AT_HWCAP of this process (0 where there is no auxiliary vector). */
uint64_t dq_arch_hwcap(void);

/* Whether the CPU has the ARMv8.1 Large System Extensions (cas, swp, ldadd):
   AT_HWCAP & HWCAP_ATOMICS on Linux/arm64; false on every other target. */
bool dq_arch_cpu_has_lse(void);

/* The best atomics this CPU could run, whatever this build uses:
   "x86_64", "arm64-lse", "arm64-llsc" or "generic". */
const char *dq_arch_cpu_best_atomics(void);

/* DQ_ARCH_BUILD_ATOMICS as //arch itself is compiled: the same string as
   dq_atomics() in non-dispatched builds.  Constant, never NULL. */
const char *dq_arch_build_atomics(void);

#ifdef __cplusplus
}
#endif
#endif /* DELIQUEUE_ARCH_CPU_H */
