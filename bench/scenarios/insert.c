/* SPDX-License-Identifier: Apache-2.0 */
/*
 * insert: inserts into a busy queue.  Depth D pending messages due within
 * 5 s (Android's MessageQueue perf test), then 1 or 2 producer threads
 * insert more with random delays up to 5 s; cost per insert as seen by a
 * producer, total producer throughput, and the consumer's later cost of
 * absorbing them (sweep).  After each round of D/10 inserts the round's
 * messages are removed (untimed) so the depth stays at D.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/machine.h"
#include "bench/scenarios/scenario.h"

/* On this project's KVM guests the round trip of a cache line between the
   two vCPUs flips between about 110 and 500 ns from one second to the
   next, and every queue whose consumer hands memory back to its producer
   pays it, while the floor (own nodes, no consumer) does not.  So each
   insert point at depth 10k records the round trip just before it runs:
   its column says which phase of the machine that contender's point got. */
#define PROBE_TRIPS 2000

typedef struct probe {
    _Alignas(64) _Atomic long ball; /* odd: the pitcher's turn is over */
    int64_t ns;
} probe;

static void *probe_echo(void *arg)
{
    probe *p = arg;
    for (long i = 1; i <= PROBE_TRIPS; i++) {
        long b;
        while ((b = atomic_load_explicit(&p->ball, memory_order_acquire)) != 2 * i - 1)
            if (b < 0)
                return NULL; /* no pitcher */
        atomic_store_explicit(&p->ball, 2 * i, memory_order_release);
    }
    return NULL;
}

static void *probe_pitch(void *arg)
{
    probe *p = arg;
    int64_t t0 = bench_now();
    for (long i = 1; i <= PROBE_TRIPS; i++) {
        atomic_store_explicit(&p->ball, 2 * i - 1, memory_order_release);
        while (atomic_load_explicit(&p->ball, memory_order_acquire) != 2 * i)
            ;
    }
    p->ns = bench_now() - t0;
    return NULL;
}

/* The mean round trip in ns of one cache line between the process's last
   two CPUs (acquire/release hand-offs, PROBE_TRIPS of them); NaN with
   fewer than two CPUs. */
static double cross_core_round_trip_ns(void)
{
    probe *p = aligned_alloc(64, sizeof(*p));
    if (p == NULL)
        return NAN;
    atomic_init(&p->ball, 0);
    pthread_attr_t a0, a1;
    pthread_t t0, t1;
    double rtt = NAN;
    /* both, not short-circuited: each initializes its attributes, which
       are destroyed below whatever it returns */
    bool bound0 = attr_on_cpu(&a0, 0), bound1 = attr_on_cpu(&a1, 1);
    if (bound0 && bound1 && pthread_create(&t1, &a1, probe_echo, p) == 0) {
        if (pthread_create(&t0, &a0, probe_pitch, p) == 0) {
            pthread_join(t0, NULL);
            rtt = (double)p->ns / PROBE_TRIPS;
        } else {
            atomic_store(&p->ball, -1); /* releases the echo */
        }
        pthread_join(t1, NULL);
    }
    pthread_attr_destroy(&a0);
    pthread_attr_destroy(&a1);
    free(p);
    return rtt;
}

#define INSERT_WHENS 65536 /* per producer, reused cyclically */
#define INSERT_CHUNK 64    /* most posts between two clock reads */

typedef struct insert_run insert_run;

typedef struct insert_producer {
    insert_run *run;
    pthread_t thread;
    int index;
    int64_t *whens;
    size_t cursor;
    long ops_asked, ops_done;
    int64_t t_start, t_end;
    int64_t cpu_ns;
    int err;
} insert_producer;

struct insert_run {
    const bench_contender *c;
    void *q;
    int nproducers;
    pthread_barrier_t start, done;
    _Atomic int arrived; /* rendezvous counter, monotonic */
    int round;
    bool quit;        /* written before start, read after it */
    int64_t deadline; /* of the current round */
    insert_producer p[2];
};

static void *insert_producer_main(void *arg)
{
    insert_producer *p = arg;
    insert_run *run = p->run;
    const bench_contender *c = run->c;
    for (int round = 1;; round++) {
        pthread_barrier_wait(&run->start);
        if (run->quit)
            break;
        if (c->producer_prepare)
            c->producer_prepare(run->q, (size_t)p->ops_asked);
        dq_msg m = make_msg(&burst_target, p->index);
        /* rendezvous so that both producers post at the same time */
        atomic_fetch_add(&run->arrived, 1);
        while (atomic_load(&run->arrived) < round * run->nproducers)
            ;
        int64_t deadline = run->deadline;
        /* chunks start at 1 post and double while fast, so a slow
           contender (the legacy list at depth) never overshoots the
           round's deadline by a whole chunk */
        long done = 0, max_chunk = 1;
        int64_t c0 = bench_thread_cpu_ns();
        int64_t t0 = bench_now(), t = t0, prev;
        while (done < p->ops_asked) {
            long chunk = p->ops_asked - done;
            if (chunk > max_chunk)
                chunk = max_chunk;
            prev = t;
            for (long i = 0; i < chunk; i++) {
                int err = c->post_at(run->q, &m, p->whens[p->cursor], NULL);
                p->cursor = (p->cursor + 1) % INSERT_WHENS;
                if (err) {
                    p->err = err;
                    break;
                }
            }
            done += chunk;
            t = bench_now();
            if (p->err || t >= deadline)
                break;
            if (t - prev > 1000000)
                max_chunk = 1;
            else if (t - prev < 100000 && max_chunk < INSERT_CHUNK)
                max_chunk *= 2;
        }
        p->t_start = t0;
        p->t_end = bench_now();
        p->cpu_ns = bench_thread_cpu_ns() - c0;
        p->ops_done = done;
        pthread_barrier_wait(&run->done);
    }
    return NULL;
}

void run_insert_point(const config *cfg, int col, int rep, long depth, int nproducers)
{
    const bench_contender *c = contenders[col];
    aged_heap aged = cfg->aged_fill ? age_allocator(c, depth) : (aged_heap){ NULL, 0 };
    insert_run *run = calloc(1, sizeof(*run));
    if (run == NULL)
        die("malloc", c, ENOMEM);
    run->c = c;
    run->q = c->create();
    if (run->q == NULL)
        die("create", c, errno ? errno : ENOMEM);
    int64_t base = bench_now() + 3600LL * 1000000000;
    fill_queue(c, run->q, depth, base, !cfg->random_fill, NULL);
    consumer_sweep(c, run->q);

    double probe_rtt = depth == 10000 ? cross_core_round_trip_ns() : NAN;
    run->nproducers = nproducers;
    pthread_barrier_init(&run->start, NULL, (unsigned)nproducers + 1);
    pthread_barrier_init(&run->done, NULL, (unsigned)nproducers + 1);
    long round_ops = depth / 10;
    if (round_ops < 128)
        round_ops = 128;
    if (round_ops > 10000)
        round_ops = 10000;
    for (int i = 0; i < nproducers; i++) {
        insert_producer *p = &run->p[i];
        p->run = run;
        p->index = i;
        p->whens = fill_whens(INSERT_WHENS, base,
                              1000 + (uint64_t)i * 77 + (uint64_t)rep, false);
        p->ops_asked = round_ops / nproducers;
        if (pthread_create(&p->thread, NULL, insert_producer_main, p))
            die("pthread_create", c, errno);
    }

    double thread_ns = 0, cpu_ns = 0, wall_ns = 0, sweep_ns = 0;
    long ops = 0;
    int64_t point_end = bench_now() + cfg->insert_budget_ns;
    int64_t round_budget = cfg->insert_budget_ns / 4;
    dq_match burst = { .target = &burst_target };
    while (ops < cfg->insert_target_ops) {
        run->deadline = bench_now() + round_budget;
        pthread_barrier_wait(&run->start);
        pthread_barrier_wait(&run->done);
        int64_t t0 = INT64_MAX, t1 = INT64_MIN;
        long round_done = 0;
        for (int i = 0; i < nproducers; i++) {
            insert_producer *p = &run->p[i];
            if (p->err)
                die("insert post", c, p->err);
            thread_ns += (double)(p->t_end - p->t_start);
            cpu_ns += (double)p->cpu_ns;
            round_done += p->ops_done;
            t0 = p->t_start < t0 ? p->t_start : t0;
            t1 = p->t_end > t1 ? p->t_end : t1;
        }
        ops += round_done;
        wall_ns += (double)(t1 - t0);
        if (c->caps & BENCH_CONSUMES) {
            int64_t s0 = bench_thread_cpu_ns();
            consumer_sweep(c, run->q);
            sweep_ns += (double)(bench_thread_cpu_ns() - s0);
            /* restore the depth, untimed */
            size_t removed = c->remove(run->q, &burst);
            if ((long)removed != round_done)
                die("restore remove (count)", c, EPROTO);
            consumer_sweep(c, run->q);
        }
        if (bench_now() >= point_end)
            break;
    }
    run->quit = true;
    pthread_barrier_wait(&run->start);
    for (int i = 0; i < nproducers; i++) {
        pthread_join(run->p[i].thread, NULL);
        free(run->p[i].whens);
    }
    pthread_barrier_destroy(&run->start);
    pthread_barrier_destroy(&run->done);
    c->destroy(run->q);
    free(run);
    aged_heap_free(&aged);

    char name[96];
    snprintf(name, sizeof(name), "insert cost, depth %ld, %d producer%s", depth,
             nproducers, nproducers > 1 ? "s" : "");
    stats_put(stats_metric_get(&results, "queues", "insert", name, "CPU ns/insert",
                               false, depth, nproducers),
              col, rep, cpu_ns / (double)ops);
    snprintf(name, sizeof(name), "insert wall time, depth %ld, %d producer%s", depth,
             nproducers, nproducers > 1 ? "s" : "");
    stats_put(stats_metric_get(&results, "queues", "insert", name, "ns/insert", false,
                               depth, nproducers),
              col, rep, thread_ns / (double)ops);
    snprintf(name, sizeof(name), "insert throughput, depth %ld, %d producer%s", depth,
             nproducers, nproducers > 1 ? "s" : "");
    stats_put(stats_metric_get(&results, "queues", "insert", name, "Minserts/s", true,
                               depth, nproducers),
              col, rep, (double)ops / wall_ns * 1e3);
    if (c->caps & BENCH_CONSUMES) {
        snprintf(name, sizeof(name),
                 "consumer sweep of those inserts, depth %ld, %d producer%s", depth,
                 nproducers, nproducers > 1 ? "s" : "");
        stats_put(stats_metric_get(&results, "queues", "insert", name, "CPU ns/msg",
                                   false, depth, nproducers),
                  col, rep, sweep_ns / (double)ops);
    }
    if (!isnan(probe_rtt)) {
        snprintf(name, sizeof(name),
                 "cross-core round trip before the point, depth %ld, %d producer%s",
                 depth, nproducers, nproducers > 1 ? "s" : "");
        stats_put(stats_metric_get(&results, "queues", "insert", name,
                                   "ns (machine probe)", false, depth, nproducers),
                  col, rep, probe_rtt);
    }
}
