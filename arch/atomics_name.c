/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_atomics(): which atomics the running code uses.  Decided at compile
 * time from the flags this file is built with, so it is compiled into every
 * build variant of the queue: in the dispatched build one copy per variant
 * (renamed dq_atomics__llsc / dq_atomics__lse) sits behind the same ifunc
 * resolver as the rest of the API, so it names the variant that was chosen.
 * Any thread.
 */
#include <deliqueue/deliqueue.h>
#include <deliqueue_arch/cpu.h>

/* GCC defines no macro for -moutline-atomics; the BUILD file passes
   -DDQ_ATOMICS_OUTLINE in the arm64-outline config.  With LSE enabled at
   compile time GCC inlines LSE even under -moutline-atomics, so LSE wins. */
#if defined(__x86_64__)
#define DQ_BUILD_ATOMICS "x86_64"
#elif defined(__aarch64__) && defined(__ARM_FEATURE_ATOMICS)
#define DQ_BUILD_ATOMICS "arm64-lse"
#elif defined(__aarch64__) && defined(DQ_ATOMICS_OUTLINE)
#define DQ_BUILD_ATOMICS "arm64-outline"
#elif defined(__aarch64__)
#define DQ_BUILD_ATOMICS "arm64-llsc"
#else
#define DQ_BUILD_ATOMICS "generic"
#endif

const char *dq_arch_build_atomics(void)
{
    return DQ_BUILD_ATOMICS;
}

const char *dq_atomics(void)
{
    return DQ_BUILD_ATOMICS;
}
