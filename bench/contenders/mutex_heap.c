/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Contender 3: one pthread mutex around the library's dq_heap, the
 * strongest simple locked design.  O(log n) inserts under the lock; the
 * consumer polls for the idle spin every consumer shares (bench_idle_poll),
 * then sleeps on a condition variable, signalled only when a post becomes
 * the new earliest message while it waits.  cancel and remove
 * take the lock (any thread).
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "bench/contender.h"
#include "bench/contenders/baseline.h"

typedef struct mutex_heap {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    dq_heap heap; /* under lock */
    /* the last insertion sequence: written under lock; read without it
       by the consumer's idle poll, as a hint that something was posted
       (it re-takes the lock before it looks) */
    _Atomic int64_t seq;
    int64_t consumer_now; /* under lock: the consumer's last clock read */
    bool waiting;         /* under lock: the consumer sleeps on wake */
} mutex_heap;

static void *create(void)
{
    mutex_heap *q = malloc(sizeof(*q));
    if (q == NULL)
        return NULL;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&q->wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&q->lock, NULL);
    dq_heap_init(&q->heap);
    atomic_init(&q->seq, 0);
    q->consumer_now = 0;
    q->waiting = false;
    return q;
}

static void destroy(void *qv)
{
    mutex_heap *q = qv;
    bench_heap_free_all(&q->heap);
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

static int post_at(void *qv, const dq_msg *m, int64_t when, dq_token *tok)
{
    mutex_heap *q = qv;
    int err;
    bench_node *n = bench_node_new(m, when, &err); /* outside the lock */
    if (n == NULL)
        return err;
    pthread_mutex_lock(&q->lock);
    /* the consumer's last look at the clock: what was due by then takes
       the heap's due run (a stale time only misses the fast path) */
    int64_t seq = atomic_load_explicit(&q->seq, memory_order_relaxed) + 1;
    err = dq_heap_push_due(&q->heap, &n->heap, bench_node_key(n, seq), q->consumer_now);
    bool signal = err == 0 && q->waiting && dq_heap_peek(&q->heap) == &n->heap;
    /* relaxed: the lock orders the writers, and the poller takes the lock
       before it reads the heap; stored last, so that the poller does not
       meet the lock still held by this push */
    atomic_store_explicit(&q->seq, seq, memory_order_relaxed);
    pthread_mutex_unlock(&q->lock);
    if (err) {
        free(n);
        return err;
    }
    if (signal)
        pthread_cond_signal(&q->wake);
    if (tok)
        *tok = (dq_token)(uintptr_t)n;
    return 0;
}

/* Under lock: pop the earliest due message into *out. */
static int take_locked(mutex_heap *q, dq_msg *out, int64_t now)
{
    q->consumer_now = now;
    const dq_key *k = dq_heap_peek_key(&q->heap);
    if (k == NULL || k->when > now)
        return -EAGAIN;
    bench_node *n = BENCH_NODE_OF_HEAP(dq_heap_pop(&q->heap));
    *out = n->msg;
    free(n);
    return 0;
}

static int try_next(void *qv, dq_msg *out)
{
    mutex_heap *q = qv;
    pthread_mutex_lock(&q->lock);
    int r = take_locked(q, out, bench_now());
    pthread_mutex_unlock(&q->lock);
    return r;
}

typedef struct posted_since {
    const mutex_heap *q;
    int64_t seen;
} posted_since;

static bool has_news(const void *arg)
{
    const posted_since *p = arg;
    return atomic_load_explicit(&p->q->seq, memory_order_relaxed) != p->seen;
}

static int next_until(void *qv, dq_msg *out, int64_t deadline)
{
    mutex_heap *q = qv;
    bool polled = false; /* once before each wait, off the lock */
    pthread_mutex_lock(&q->lock);
    for (;;) {
        int64_t now = bench_now();
        if (take_locked(q, out, now) == 0)
            break;
        if (now >= deadline) {
            pthread_mutex_unlock(&q->lock);
            return -ETIMEDOUT;
        }
        const dq_key *k = dq_heap_peek_key(&q->heap);
        int64_t until = k != NULL && k->when < deadline ? k->when : deadline;
        if (!polled) {
            posted_since since = { q, atomic_load_explicit(&q->seq,
                                                           memory_order_relaxed) };
            pthread_mutex_unlock(&q->lock);
            (void)bench_idle_poll(has_news, &since, until);
            pthread_mutex_lock(&q->lock);
            polled = true;
            continue; /* take again: a post while unlocked did not signal */
        }
        polled = false;
        struct timespec ts = { until / 1000000000, until % 1000000000 };
        q->waiting = true;
        pthread_cond_timedwait(&q->wake, &q->lock, &ts);
        q->waiting = false;
    }
    pthread_mutex_unlock(&q->lock);
    return 0;
}

static int cancel(void *qv, dq_token tok)
{
    mutex_heap *q = qv;
    if (tok == 0)
        return -EINVAL;
    bench_node *n = (bench_node *)(uintptr_t)tok;
    pthread_mutex_lock(&q->lock);
    bool pending = n->heap.index != DQ_HEAP_NONE;
    if (pending)
        dq_heap_remove(&q->heap, &n->heap);
    pthread_mutex_unlock(&q->lock);
    if (!pending)
        return -ENOENT;
    free(n);
    return 0;
}

static size_t remove_matching(void *qv, const dq_match *m)
{
    mutex_heap *q = qv;
    pthread_mutex_lock(&q->lock);
    size_t n = bench_heap_remove_matching(&q->heap, m);
    pthread_mutex_unlock(&q->lock);
    return n;
}

const bench_contender bench_mutex_heap = {
    .name = "mutex_heap",
    .design = "pthread mutex around the shared dq_heap, idle poll then condvar for the "
              "consumer",
    .caps = BENCH_CONSUMES | BENCH_REMOVE_ANY,
    .create = create,
    .destroy = destroy,
    .post_at = post_at,
    .try_next = try_next,
    .next_until = next_until,
    .cancel = cancel,
    .remove = remove_matching,
};
