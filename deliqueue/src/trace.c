/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tracing: formatting the atrace markers and writing them to tracefs
 * (trace.h has the events and the thread contract).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "queue.h"
#include "trace.h"

#ifdef DQ_TEST_HOOKS
#include <deliqueue/testing.h>
#endif

dq_trace_flag dq_trace_state;

/* Where tracefs is mounted: its own mount point first, then the one under
   debugfs that older systems use. */
static const char *const marker_paths[] = {
    "/sys/kernel/tracing/trace_marker",
    "/sys/kernel/debug/tracing/trace_marker",
};

/* The marker's descriptor, -1 until opened.  Written under open_lock
   only; release/acquire: a writer that sees a descriptor sees it open. */
static _Atomic(int) marker_fd = -1;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *marker_path = "trace_marker"; /* under open_lock */
/* The process id in every marker; relaxed: a value, reset in a forked
   child before it can run anything else. */
static _Atomic(int) marker_pid;
/* Set once a failure has been reported: every later one is silent. */
static _Atomic(int) failure_reported;

static void report_once(const char *what, const char *path, int err)
{
    /* relaxed: only which thread reports matters, which the RMW decides */
    if (atomic_exchange_explicit(&failure_reported, 1, memory_order_relaxed))
        return;
    fprintf(stderr,
            "deliqueue: tracing: %s %s failed (%s); no trace events are "
            "recorded while it fails, and this is not reported again\n",
            what, path, strerror(err));
}

static void on_fork_child(void)
{
    atomic_store_explicit(&marker_pid, (int)getpid(), memory_order_relaxed);
}

static void register_fork_handler(void)
{
    (void)pthread_atfork(NULL, NULL, on_fork_child);
}

/* Under open_lock: open the marker if it is not open yet; 0 or -errno. */
static int marker_open_locked(void)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
    pthread_once(&atfork_once, register_fork_handler);
    atomic_store_explicit(&marker_pid, (int)getpid(), memory_order_relaxed);
    if (atomic_load_explicit(&marker_fd, memory_order_relaxed) >= 0)
        return 0;
    int err = ENOENT;
    for (size_t i = 0; i < sizeof(marker_paths) / sizeof(marker_paths[0]); i++) {
        int fd = open(marker_paths[i], O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            marker_path = marker_paths[i];
            atomic_store_explicit(&marker_fd, fd, memory_order_release);
            return 0;
        }
        /* the first path's error says most: it is where tracefs belongs */
        if (i == 0 || errno != ENOENT)
            err = errno;
    }
    report_once("opening", marker_paths[0], err);
    return -err;
}

int dq_trace_enable(bool on)
{
    pthread_mutex_lock(&open_lock);
    int err = on ? marker_open_locked() : 0;
    /* relaxed: the descriptor is published by its own release store, and
       a hot path that reads the flag late only misses an event */
    if (err == 0)
        atomic_store_explicit(&dq_trace_state.on, on, memory_order_relaxed);
    pthread_mutex_unlock(&open_lock);
    return err;
}

bool dq_trace_enabled(void)
{
    return dq_trace_on();
}

static void init_from_env_once(void)
{
    const char *v = getenv("DQ_TRACE");
    if (v != NULL && v[0] != '\0' && strcmp(v, "0") != 0)
        (void)dq_trace_enable(true); /* a failure is reported on stderr */
}

void dq_trace_init_from_env(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_from_env_once);
}

#ifdef DQ_TEST_HOOKS
int dq_test_trace_to_fd(int fd)
{
    if (fd < 0)
        return -EBADF;
    pthread_mutex_lock(&open_lock);
    marker_path = "(test descriptor)";
    /* relaxed: the caller installs the sink before the events it checks */
    atomic_store_explicit(&failure_reported, 0, memory_order_relaxed);
    atomic_store_explicit(&marker_pid, (int)getpid(), memory_order_relaxed);
    atomic_store_explicit(&marker_fd, fd, memory_order_release);
    pthread_mutex_unlock(&open_lock);
    return 0;
}
#endif

/* ---- names --------------------------------------------------------------- */

int dq_set_name(dq_queue *q, const char *name)
{
    if (q == NULL || name == NULL)
        return -EINVAL;
    size_t len = strlen(name);
    if (len == 0 || len >= DQ_NAME_MAX)
        return -EINVAL;
    /* printable ASCII without '|', which ends a marker's name field */
    for (size_t i = 0; i < len; i++)
        if (name[i] < 0x20 || name[i] > 0x7e || name[i] == '|')
            return -EINVAL;
    dq_trace_name *n = (dq_trace_name *)malloc(sizeof(*n) + len + 1);
    if (n == NULL)
        return -ENOMEM;
    memcpy(n->text, name, len + 1);
    /* release publishes the text to the events that acquire the name.
       The older name is only linked here, never read: the list is walked
       by dq_trace_names_free after the last reference, which dq_unref's
       count orders, so the acquire half of acq_rel orders nothing today. */
    n->older = atomic_exchange_explicit(&q->trace_name, n, memory_order_acq_rel);
    return 0;
}

void dq_trace_names_free(_Atomic(dq_trace_name *) *names)
{
    /* relaxed: the last reference's holder, after every other thread */
    dq_trace_name *n = atomic_load_explicit(names, memory_order_relaxed);
    while (n != NULL) {
        dq_trace_name *older = n->older;
        free(n);
        n = older;
    }
}

/* q's name, or its address when it has none. */
static const char *queue_name(dq_queue *q, char fallback[24])
{
    /* acquire: pairs with dq_set_name's exchange, so the text is whole */
    dq_trace_name *n = atomic_load_explicit(&q->trace_name, memory_order_acquire);
    if (n != NULL)
        return n->text;
    snprintf(fallback, 24, "%" PRIxPTR, (uintptr_t)q);
    return fallback;
}

/* ---- formatting -------------------------------------------------------- */

/* " due=+Nns", " due=now" or " due=front" (key = "due" or "until"). */
static int format_time(char *buf, size_t cap, const char *key, int64_t t, int64_t now)
{
    if (t == INT64_MAX)
        return snprintf(buf, cap, " %s=none", key);
    if (t == 0 && key[0] == 'd')
        return snprintf(buf, cap, " %s=front", key);
    if (t <= now)
        return snprintf(buf, cap, " %s=now", key);
    return snprintf(buf, cap, " %s=+%" PRId64 "ns", key, t - now);
}

size_t dq_trace_format(char *buf, size_t cap, const dq_trace_event *e)
{
    /* by kind, in the enum's order; END and BACKLOG have formats of
       their own */
    static const char *const verb[] = {
        "post",  "post refused", "barrier", "deliver", "dispatch",
        "sleep", NULL,           NULL,      "cancel",  "remove",
    };
    _Static_assert(sizeof(verb) / sizeof(verb[0]) == DQ_TRACE_REMOVE + 1 &&
                       DQ_TRACE_SLEEP == 5 && DQ_TRACE_CANCEL == 8,
                   "verb follows enum dq_trace_kind");
    int n;
    switch (e->kind) {
    case DQ_TRACE_END: n = snprintf(buf, cap, "E|%d", e->pid); break;
    case DQ_TRACE_BACKLOG:
        n = snprintf(buf, cap, "C|%d|dq:%s backlog|%" PRId64, e->pid, e->queue,
                     e->value);
        break;
    default: {
        char phase =
            e->kind == DQ_TRACE_DISPATCH || e->kind == DQ_TRACE_SLEEP ? 'B' : 'I';
        n = snprintf(buf, cap, "%c|%d|dq:%s %s", phase, e->pid, e->queue,
                     verb[e->kind]);
        if (n < 0 || (size_t)n >= cap)
            break;
        char *rest = buf + n;
        size_t room = cap - (size_t)n;
        int m = 0;
        switch (e->kind) {
        case DQ_TRACE_POST:
            m = snprintf(rest, room, " what=%" PRId32, e->what);
            if (m >= 0 && (size_t)m < room)
                m += format_time(rest + m, room - (size_t)m, "due", e->value, e->now);
            break;
        case DQ_TRACE_BARRIER:
            m = format_time(rest, room, "due", e->value, e->now);
            break;
        case DQ_TRACE_SLEEP:
            m = format_time(rest, room, "until", e->value, e->now);
            break;
        case DQ_TRACE_POST_REFUSED:
            m = snprintf(rest, room, " err=%" PRId64, e->value);
            break;
        default: /* deliver, dispatch, cancel, remove */
            m = snprintf(rest, room, " what=%" PRId32, e->what);
            break;
        }
        n = m < 0 ? -1 : n + m;
        break;
    }
    }
    if (n < 0) {
        buf[0] = '\0';
        return 0;
    }
    size_t len = (size_t)n < cap ? (size_t)n : cap - 1;
    if (len + 1 < cap) {
        buf[len++] = '\n';
        buf[len] = '\0';
    }
    return len;
}

/* ---- writing ------------------------------------------------------------- */

static void emit(dq_queue *q, enum dq_trace_kind kind, int32_t what, int64_t value)
{
    /* acquire: pairs with the store that published the descriptor */
    int fd = atomic_load_explicit(&marker_fd, memory_order_acquire);
    if (fd < 0)
        return;
    char name[24];
    dq_trace_event e = {
        .kind = kind,
        .pid = atomic_load_explicit(&marker_pid, memory_order_relaxed),
        .queue = q != NULL ? queue_name(q, name) : "",
        .what = what,
        .value = value,
        .now =
            kind == DQ_TRACE_POST || kind == DQ_TRACE_BARRIER || kind == DQ_TRACE_SLEEP
                ? (q != NULL ? dq_queue_time(q) : dq_now())
                : 0,
    };
    char line[DQ_TRACE_LINE_MAX];
    size_t len = dq_trace_format(line, sizeof(line), &e);
    if (write(fd, line, len) < 0) {
        int err = errno;
        pthread_mutex_lock(&open_lock);
        const char *path = marker_path;
        pthread_mutex_unlock(&open_lock);
        report_once("writing to", path, err);
    }
}

void dq_trace_post(dq_queue *q, int32_t what, int64_t when, bool barrier)
{
    emit(q, barrier ? DQ_TRACE_BARRIER : DQ_TRACE_POST, barrier ? 0 : what, when);
}

void dq_trace_post_refused(dq_queue *q, int err)
{
    emit(q, DQ_TRACE_POST_REFUSED, 0, err);
}

void dq_trace_deliver(dq_queue *q, int32_t what)
{
    emit(q, DQ_TRACE_DELIVER, what, 0);
}

void dq_trace_dispatch_begin(dq_queue *q, int32_t what)
{
    emit(q, DQ_TRACE_DISPATCH, what, 0);
}

void dq_trace_sleep_begin(dq_queue *q, int64_t deadline)
{
    emit(q, DQ_TRACE_SLEEP, 0, deadline);
}

void dq_trace_end(void)
{
    emit(NULL, DQ_TRACE_END, 0, 0);
}

void dq_trace_backlog(dq_queue *q, size_t count)
{
    emit(q, DQ_TRACE_BACKLOG, 0, (int64_t)count);
}

void dq_trace_cancel(dq_queue *q, int32_t what)
{
    emit(q, DQ_TRACE_CANCEL, what, 0);
}

void dq_trace_remove(dq_queue *q, int32_t what)
{
    emit(q, DQ_TRACE_REMOVE, what, 0);
}
