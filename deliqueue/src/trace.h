/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tracing: the queue's events as atrace markers on tracefs trace_marker,
 * which Perfetto (linux.ftrace) and trace-cmd record beside the kernel's
 * scheduling events.
 *
 *   event                     marker                                   thread
 *   post                      I|pid|dq:NAME post what=W due=+Dns       producer
 *                             (due=now when due at once, due=front;
 *                             written before the push, so that it
 *                             precedes the delivery)
 *   a refused post            I|pid|dq:NAME post refused err=E         producer
 *   sync barrier              I|pid|dq:NAME barrier due=...            producer
 *   delivery by dq_next*      I|pid|dq:NAME deliver what=W             consumer
 *   dispatch by dq_loop       B|pid|dq:NAME dispatch what=W ... E|pid  consumer
 *   the consumer's sleep      B|pid|dq:NAME sleep until=+Dns ... E|pid consumer
 *                             (until=none without a deadline)
 *   backlog                   C|pid|dq:NAME backlog|N                  consumer
 *   cancel by token           I|pid|dq:NAME cancel what=W              remover
 *   remove by criteria        I|pid|dq:NAME remove what=W (each one,   remover
 *                             the quit_safely trim's too)
 *
 * Who may call what concurrently: everything here may be called from any
 * thread at once.  Each event is one write(2) of one line, which the
 * kernel appends atomically, so events of several threads never
 * interleave within a line.
 *
 * Off by default.  dq_trace_on() is the only thing the hot paths pay for
 * it: one relaxed load of a flag that only dq_trace_enable writes, on a
 * cache line of its own, so it stays shared in every core's cache and the
 * branch on it is always predicted.
 *
 * The backlog is the consumer's count of the messages it holds in its
 * heaps (barriers not counted).  It leaves out posts it has not swept yet
 * and counts messages removed since its last step, so it equals
 * dq_pending at quiescent points: after the consumer's last step, with no
 * post or removal since.
 */
#ifndef DELIQUEUE_SRC_TRACE_H
#define DELIQUEUE_SRC_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <deliqueue/deliqueue.h>

#include "atomic.h"

/* A queue's name: immutable once published.  dq_set_name publishes a new
   one and keeps the old ones (a racing event may still read them) until
   the handle is freed. */
typedef struct dq_trace_name {
    struct dq_trace_name *older;
    char text[];
} dq_trace_name;

/* The tracing switch, alone on its cache line: the alignment rounds the
   struct's size up to the line. */
typedef struct dq_trace_flag {
    _Alignas(64) _Atomic(int) on;
} dq_trace_flag;
extern dq_trace_flag dq_trace_state;

/* The hot paths' test.  relaxed: a thread that misses a concurrent
   enable or disable records one event more or less, nothing else. */
static inline bool dq_trace_on(void)
{
    return __builtin_expect(
        atomic_load_explicit(&dq_trace_state.on, memory_order_relaxed), 0);
}

enum dq_trace_kind {
    DQ_TRACE_POST,
    DQ_TRACE_POST_REFUSED, /* value: the negative errno */
    DQ_TRACE_BARRIER,
    DQ_TRACE_DELIVER,
    DQ_TRACE_DISPATCH, /* begins a slice */
    DQ_TRACE_SLEEP,    /* begins a slice; value: the deadline */
    DQ_TRACE_END,      /* ends the thread's innermost slice */
    DQ_TRACE_BACKLOG,  /* value: the count */
    DQ_TRACE_CANCEL,
    DQ_TRACE_REMOVE,
};

/* One event, for dq_trace_format. */
typedef struct dq_trace_event {
    enum dq_trace_kind kind;
    int pid;
    const char *queue; /* the queue's name */
    int32_t what;
    int64_t value; /* a due time or deadline (absolute, see
                                  `now`), a count or an errno */
    int64_t now;   /* the queue's time when the event happened */
} dq_trace_event;

/* Longest marker line, newline included. */
#define DQ_TRACE_LINE_MAX 128

/* The marker line of *e into buf (cap bytes, cap >= 1), NUL-terminated,
   newline-ended when it fits; returns its length without the NUL (less
   than cap: a line that does not fit is cut short).  Pure: no I/O. */
size_t dq_trace_format(char *buf, size_t cap, const dq_trace_event *e);

/* The hooks: each writes one event of q when tracing is on (the caller
   tests dq_trace_on() first, so that they cost nothing when it is off).
   They never fail; a write that fails is reported once on stderr. */
void dq_trace_post(dq_queue *q, int32_t what, int64_t when, bool barrier);
void dq_trace_post_refused(dq_queue *q, int err);
void dq_trace_deliver(dq_queue *q, int32_t what);
void dq_trace_dispatch_begin(dq_queue *q, int32_t what);
void dq_trace_sleep_begin(dq_queue *q, int64_t deadline);
void dq_trace_end(void);
void dq_trace_backlog(dq_queue *q, size_t count);
void dq_trace_cancel(dq_queue *q, int32_t what);
void dq_trace_remove(dq_queue *q, int32_t what);

/* dq_create: applies DQ_TRACE from the environment, once per process. */
void dq_trace_init_from_env(void);
/* The last dq_unref: frees q's names. */
void dq_trace_names_free(_Atomic(dq_trace_name *) *names);

#endif /* DELIQUEUE_SRC_TRACE_H */
