/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hot-path probes: one extern function per idiom of deliqueue_arch/atomics.h,
 * compiled with the flags of each config, so that tools/check_atomics can
 * prove the instruction families of the atomics layer itself, independently
 * of the queue.  Not used by the queue; any thread.
 */
#include <deliqueue_arch/atomics.h>

void dq_probe_push(_Atomic(uintptr_t) *top, uintptr_t node,
                   _Atomic(uintptr_t) *node_next)
{
    dq_atomic_push(top, node, node_next);
}

uintptr_t dq_probe_take_all(_Atomic(uintptr_t) *top)
{
    return dq_atomic_take_all(top);
}

bool dq_probe_claim(_Atomic(uint32_t) *state)
{
    return dq_atomic_claim(state, 0, 1);
}

uint64_t dq_probe_enter_leave(_Atomic(uint64_t) *users)
{
    uint64_t before = dq_atomic_enter(users);
    dq_atomic_leave(users);
    return before;
}
