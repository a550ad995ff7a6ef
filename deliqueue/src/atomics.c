/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_atomics(): which atomics the running code uses, as the flags this
 * file is compiled with say (DQ_ARCH_BUILD_ATOMICS, <deliqueue_arch/cpu.h>).
 * Part of every build variant of the library: in the dispatched build each
 * variant has its own copy behind the same ifunc resolver as the rest of
 * the API, so it names the variant that was chosen.  Any thread.
 */
#include <deliqueue/deliqueue.h>
#include <deliqueue_arch/cpu.h>

const char *dq_atomics(void)
{
    return DQ_ARCH_BUILD_ATOMICS;
}
