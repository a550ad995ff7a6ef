/* SPDX-License-Identifier: Apache-2.0 */
/* CPU feature detection.  Any thread; see deliqueue_arch/cpu.h. */
#include <deliqueue_arch/cpu.h>

#if defined(__linux__)
#include <sys/auxv.h>
#endif

uint64_t dq_arch_hwcap(void)
{
#if defined(__linux__)
    return (uint64_t)getauxval(AT_HWCAP);
#else
    return 0;
#endif
}

bool dq_arch_cpu_has_lse(void)
{
#if defined(__aarch64__) && defined(__linux__)
    /* HWCAP_ATOMICS (bit 8) is the kernel's name for FEAT_LSE. */
    return (dq_arch_hwcap() & (UINT64_C(1) << 8)) != 0;
#else
    return false;
#endif
}

const char *dq_arch_cpu_best_atomics(void)
{
#if defined(__x86_64__)
    return "x86_64";
#elif defined(__aarch64__)
    return dq_arch_cpu_has_lse() ? "arm64-lse" : "arm64-llsc";
#else
    return "generic";
#endif
}

const char *dq_arch_build_atomics(void)
{
    return DQ_ARCH_BUILD_ATOMICS;
}
