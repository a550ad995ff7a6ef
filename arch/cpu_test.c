/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_atomics() names the code that runs, and CPU detection agrees with it:
 *   fixed builds     the config's variant (and an LSE build only runs where
 *                    the CPU has LSE: it would have trapped before main)
 *   dispatched       "arm64-lse" exactly when AT_HWCAP has HWCAP_ATOMICS,
 *                    else "arm64-llsc": what the ifunc resolvers chose.
 * Prints the answer so that the test log shows it under each QEMU_CPU.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <deliqueue/deliqueue.h>
#include <deliqueue_arch/cpu.h>

Test(cpu, atomics_match_build_and_cpu)
{
    const char *a = dq_atomics();
    const char *best = dq_arch_cpu_best_atomics();
    printf("dq_atomics()=%s cpu_best=%s hwcap=%#llx build=%s\n", a, best,
           (unsigned long long)dq_arch_hwcap(), dq_arch_build_atomics());
    fflush(stdout);
#if !defined(DQ_EXPECT_DISPATCH)
    cr_assert_str_eq(a, dq_arch_build_atomics()); /* one variant, built as //arch is */
#endif
#if defined(__x86_64__)
    cr_assert_str_eq(a, "x86_64");
    cr_assert(!dq_arch_cpu_has_lse());
#elif defined(DQ_EXPECT_DISPATCH)
    cr_assert_str_eq(a, dq_arch_cpu_has_lse() ? "arm64-lse" : "arm64-llsc");
    cr_assert_str_eq(a, best);
#elif defined(DQ_EXPECT_OUTLINE)
    cr_assert_str_eq(a, "arm64-outline");
#elif defined(DQ_EXPECT_LSE)
    cr_assert_str_eq(a, "arm64-lse");
    cr_assert(dq_arch_cpu_has_lse());
#elif defined(__aarch64__)
    cr_assert_str_eq(a, "arm64-llsc");
#endif
}
