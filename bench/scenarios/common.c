/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/scenarios/common.c: how every scenario sets a queue up, the same
 * way for every contender (scenario.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/heap_work.h"
#include "bench/machine.h"
#include "bench/scenarios/scenario.h"

char fill_targets[8];
char burst_target;

_Noreturn void die(const char *what, const bench_contender *c, int err)
{
    fprintf(stderr, "queue_bench: %s failed for %s: %s\n", what, c ? c->name : "-",
            strerror(err < 0 ? -err : err));
    exit(2);
}

int rotate(int i, int rep, int n)
{
    return (i + rep) % n;
}

dq_msg make_msg(const void *target, int32_t what)
{
    dq_msg m;
    memset(&m, 0, sizeof(m));
    m.target = target;
    m.what = what;
    return m;
}

int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t *fill_whens(long n, int64_t base, uint64_t seed, bool sorted)
{
    int64_t *w = malloc((size_t)(n ? n : 1) * sizeof(*w));
    if (w == NULL)
        die("malloc", NULL, ENOMEM);
    uint64_t rng = seed | 1;
    for (long i = 0; i < n; i++)
        w[i] = base + (int64_t)(bench_rng_next(&rng) % BENCH_HEAP_SPAN_NS);
    if (sorted)
        qsort(w, (size_t)n, sizeof(*w), cmp_i64);
    return w;
}

/* --fill aged: the state of a long-running process's allocator.  A queue
   filled in ascending order from a fresh heap gets its nodes at ascending
   addresses, so a list walk in `when` order streams through memory (the
   legacy queue's best case; deliqueue's type-stable pool is aged by the
   earlier scenarios anyway).  Android's perf test posts in random order
   instead, which leaves list order and address order unrelated, but a
   random-order fill of the legacy list is O(N^2) (minutes at 100k).  So
   the allocator is aged instead: the contender's bytes per message are
   measured (mallinfo2), and 2*depth blocks of that size are allocated and
   every other one freed in random order (the kept ones stop coalescing),
   so that the fill's mallocs get addresses in random order.  Applied to
   every contender alike; the spacers are freed after the point. */
aged_heap age_allocator(const bench_contender *c, long depth)
{
    aged_heap a = { NULL, 0 };
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    void *q = c->create();
    if (q == NULL)
        return a;
    if (c->producer_prepare)
        c->producer_prepare(q, 64);
    dq_msg m = make_msg(&fill_targets[0], 0);
    int64_t when = bench_now() + 3600LL * 1000000000;
    /* the most frequent growth per post: the node's chunk (occasional
       array growth, e.g. a heap's realloc, is not the node) */
    size_t deltas[64], per = 0;
    int best = 0;
    for (int i = 0; i < 64; i++) {
        size_t before = mallinfo2().uordblks;
        c->post_at(q, &m, when + i, NULL);
        deltas[i] = mallinfo2().uordblks - before;
    }
    for (int i = 0; i < 64; i++) {
        int n = 0;
        for (int j = 0; j < 64; j++)
            n += deltas[j] == deltas[i];
        if (deltas[i] != 0 && n > best) {
            best = n;
            per = deltas[i];
        }
    }
    c->destroy(q);
    if (best < 32)
        per = 0; /* no steady per-message malloc (a pool) */
    if (per < 32 || per > 4096)
        return a; /* nothing to age */
    a.n = 2 * depth;
    a.blocks = malloc((size_t)a.n * sizeof(void *));
    if (a.blocks == NULL) {
        a.n = 0;
        return a;
    }
    for (long i = 0; i < a.n; i++)
        a.blocks[i] = malloc(per - sizeof(size_t));
    /* free the even blocks in random order (Fisher-Yates over them) */
    long *order = malloc((size_t)depth * sizeof(long));
    uint64_t rng = 99;
    for (long i = 0; order && i < depth; i++)
        order[i] = 2 * i;
    for (long i = depth - 1; order && i > 0; i--) {
        long j = (long)(bench_rng_next(&rng) % (uint64_t)(i + 1));
        long t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (long i = 0; order && i < depth; i++) {
        free(a.blocks[order[i]]);
        a.blocks[order[i]] = NULL;
    }
    free(order);
#else
    (void)c;
    (void)depth;
#endif
    return a;
}

void aged_heap_free(aged_heap *a)
{
    for (long i = 0; i < a->n; i++)
        free(a->blocks[i]);
    free(a->blocks);
    a->blocks = NULL;
    a->n = 0;
}

void fill_queue(const bench_contender *c, void *q, long depth, int64_t base,
                bool sorted, dq_token *toks)
{
    int64_t *w = fill_whens(depth, base, 7, sorted);
    if (c->producer_prepare)
        c->producer_prepare(q, (size_t)depth);
    for (long i = 0; i < depth; i++) {
        dq_msg m = make_msg(&fill_targets[i % 8], (int32_t)(i % 128));
        int err = c->post_at(q, &m, w[i], toks ? &toks[i] : NULL);
        if (err)
            die("fill post", c, err);
    }
    free(w);
}

void consumer_sweep(const bench_contender *c, void *q)
{
    if (!(c->caps & BENCH_CONSUMES))
        return;
    dq_msg out;
    int err = c->try_next(q, &out);
    if (err != -EAGAIN)
        die("sweep (a message fell due, or an error)", c, err ? err : EPROTO);
}

bool attr_on_cpu(pthread_attr_t *attr, int k)
{
    cpu_set_t allowed, one;
    pthread_attr_init(attr);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2)
        return false;
    int want = CPU_COUNT(&allowed) - 1 - k % CPU_COUNT(&allowed), seen = 0;
    CPU_ZERO(&one);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &allowed) && seen++ == want) {
            CPU_SET(cpu, &one);
            break;
        }
    return pthread_attr_setaffinity_np(attr, sizeof(one), &one) == 0;
}

void *background_queue(const config *cfg, const bench_contender *c, long depth,
                       dq_token *toks, aged_heap *aged)
{
    *aged = cfg->aged_fill ? age_allocator(c, depth) : (aged_heap){ NULL, 0 };
    void *q = c->create();
    if (q == NULL)
        die("create", c, ENOMEM);
    fill_queue(c, q, depth, bench_now() + 3600LL * 1000000000, !cfg->random_fill, toks);
    consumer_sweep(c, q);
    return q;
}
