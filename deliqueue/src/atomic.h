/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The atomics of the core: every file of deliqueue/src that shares memory
 * between threads includes this header, never <stdatomic.h> itself.
 *
 *   name                                  in every build of the library
 *   _Atomic(T), atomic_*_explicit,        <stdatomic.h>, as it is
 *   atomic_init, memory_order_*
 *   DQ_THREAD_LOCAL(type, name)           declares `_Thread_local type name`
 *   DQ_TLS(name)                          name: the calling thread's instance
 *   DQ_PROCESS_STATIC(type, name)         declares `type name`: plain state
 *                                         that lives as long as the process
 *   DQ_PROCESS_MALLOC(size)               malloc(size), for a block that
 *                                         lives as long as the process
 *   DQ_ATOMIC_LAYOUT_ASSERT(cond, msg)    _Static_assert(cond, msg), for a
 *                                         layout fact that rests on the sizes
 *                                         of C11 atomics
 *
 * So the library is plain C11 and its code is what it would be without
 * this header.  The one other build is the model checker's: model/relacy
 * compiles these same sources as C++ with DQ_RELACY defined and its own
 * directory on the include path, and its dq_relacy.h maps each name above
 * onto Relacy Race Detector (DESIGN.md, "Checked models").  Hence the
 * spelling rules for the core: an atomic type is written _Atomic(T), never
 * _Atomic T; a thread-local is declared and used through the two macros
 * (a simulated thread is not an OS thread there); a plain static that
 * outlives a queue, and a block never freed, are declared and allocated
 * through the two process names (the model's process is one iteration);
 * and the code stays in
 * the common subset of C and C++ (casts from void *, no nested or array
 * designators).
 */
#ifndef DELIQUEUE_SRC_ATOMIC_H
#define DELIQUEUE_SRC_ATOMIC_H

#ifdef DQ_RELACY
#include <dq_relacy.h>
#else
#include <stdatomic.h>

#define DQ_THREAD_LOCAL(type, name)        _Thread_local type name
#define DQ_TLS(name)                       name
#define DQ_PROCESS_STATIC(type, name)      type name
#define DQ_PROCESS_MALLOC(size)            malloc(size)
#define DQ_ATOMIC_LAYOUT_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#endif /* DELIQUEUE_SRC_ATOMIC_H */
