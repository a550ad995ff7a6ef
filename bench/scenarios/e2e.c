/* SPDX-License-Identifier: Apache-2.0 */
/*
 * e2e: end to end at depth 10k (far-future background messages): 1 or 2
 * producers post due-now messages while the consumer delivers.
 *   unpaced  throughput, one contender at a time;
 *   paced    (bursts of 4, then a ~20 us sleep): post-to-delivery latency
 *            p50/p99/p99.9, with every contender's queue and consumer
 *            alive at once and the bursts dealt to them in turn, so that
 *            the machine's slow phases hit all of them alike;
 *   steady   (1 producer, a post every 1 us, blocks of 100 dealt in turn,
 *            each primed): the same latencies with the consumer awake,
 *            where the queue's own path decides them and not a wake-up.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <deliqueue_arch/cpu.h>

#include "bench/machine.h"
#include "bench/scenarios/scenario.h"

static char primer_target; /* steady: wakes a consumer, not timed */

typedef struct e2e_run {
    const bench_contender *c;
    void *q;
    int nproducers;
    long per_producer;
    e2e_mode mode;
    _Atomic int ready; /* consumer 1, then each producer 1 */
    int64_t t_first_post;
    int64_t t_last_delivery;
    int64_t producer_ns[2];
    int64_t consumer_cpu_ns; /* the consumer's CPU time, all of it */
    int64_t *latency;        /* consumer only until joined: from the post */
    int64_t *burst_latency;  /* paced: from its burst's first post */
    _Atomic int primed;      /* steady: the block's primer was delivered */
    long delivered;
    int err;
} e2e_run;

/* The latency runs' posts carry the start of their own post in arg1:arg2
   (the low and high halves), which their consumer subtracts. */
static void set_post_start(dq_msg *m, int64_t t)
{
    m->arg1 = (int32_t)(uint32_t)t;
    m->arg2 = (int32_t)(uint32_t)((uint64_t)t >> 32);
}

static int64_t post_start_of(const dq_msg *m)
{
    return (int64_t)((uint64_t)(uint32_t)m->arg2 << 32 | (uint32_t)m->arg1);
}

#define PACED_BURST   4    /* posts per burst of the paced producers */
#define STEADY_GAP_NS 1000 /* between steady posts: under every idle spin */

typedef struct e2e_producer {
    e2e_run *run;
    int index;
} e2e_producer;

static void *e2e_consumer_main(void *arg)
{
    e2e_run *run = arg;
    const bench_contender *c = run->c;
    consumer_sweep(c, run->q); /* this thread is the consumer now */
    atomic_fetch_add(&run->ready, 1);
    long total = run->per_producer * run->nproducers;
    int64_t cpu0 = bench_thread_cpu_ns();
    while (run->delivered < total) {
        dq_msg out;
        int err = c->next_until(run->q, &out, bench_now() + 5000000000LL);
        int64_t now = bench_now();
        if (err) {
            run->err = err;
            break;
        }
        if (out.target == &primer_target) {
            /* release: the producer's first timed post follows this */
            atomic_store_explicit(&run->primed, 1, memory_order_release);
            continue;
        }
        if (out.target != &burst_target) {
            run->err = -EPROTO;
            break;
        }
        if (run->mode != E2E_UNPACED) {
            /* arg1:arg2 is the start of this message's own post, when the
               start of its burst's first (paced_producer_main; a steady
               post is its own burst) */
            run->latency[run->delivered] = now - post_start_of(&out);
            if (run->burst_latency)
                run->burst_latency[run->delivered] = now - out.when;
        } else {
            run->latency[run->delivered] = now - out.when;
        }
        run->delivered++;
        run->t_last_delivery = now;
    }
    run->consumer_cpu_ns = bench_thread_cpu_ns() - cpu0;
    return NULL;
}

static void *e2e_producer_main(void *arg)
{
    e2e_producer *p = arg;
    e2e_run *run = p->run;
    const bench_contender *c = run->c;
    dq_msg m = make_msg(&burst_target, p->index);
    atomic_fetch_add(&run->ready, 1);
    while (atomic_load(&run->ready) < 1 + run->nproducers)
        ;
    int64_t t0 = bench_now();
    if (p->index == 0)
        run->t_first_post = t0;
    for (long i = 0; i < run->per_producer; i++) {
        int err = c->post_at(run->q, &m, bench_now(), NULL);
        if (err) {
            run->err = err;
            break;
        }
    }
    run->producer_ns[p->index] = bench_now() - t0;
    return NULL;
}

static double percentile(int64_t *xs, long n, double p)
{
    if (n == 0)
        return NAN;
    long i = (long)ceil(p * (double)n) - 1;
    if (i < 0)
        i = 0;
    if (i >= n)
        i = n - 1;
    return (double)xs[i];
}

/* A queue of contender col with its background, and the run's buffers;
   *aged keeps the allocator's aging alive until e2e_finish. */
static void e2e_start(const config *cfg, int col, int nproducers, e2e_mode mode,
                      e2e_run *run, aged_heap *aged)
{
    const bench_contender *c = contenders[col];
    *aged = cfg->aged_fill ? age_allocator(c, cfg->e2e_depth) : (aged_heap){ NULL, 0 };
    memset(run, 0, sizeof(*run));
    run->c = c;
    run->nproducers = nproducers;
    run->mode = mode;
    bool paced = mode == E2E_PACED;
    run->per_producer = (mode == E2E_UNPACED ? cfg->e2e_unpaced_msgs
                         : paced             ? cfg->e2e_paced_msgs
                                             : cfg->e2e_steady_msgs) /
                        nproducers;
    run->latency = malloc((size_t)(run->per_producer * nproducers) * sizeof(int64_t));
    run->burst_latency =
        paced ? malloc((size_t)(run->per_producer * nproducers) * sizeof(int64_t))
              : NULL;
    run->q = c->create();
    if (run->q == NULL || run->latency == NULL || (paced && run->burst_latency == NULL))
        die("create", c, ENOMEM);
    fill_queue(c, run->q, cfg->e2e_depth, bench_now() + 3600LL * 1000000000,
               !cfg->random_fill, NULL);
}

/* After the run's threads are joined: its rows, then the teardown. */
static void e2e_finish(const config *cfg, int col, int rep, e2e_run *run,
                       aged_heap *aged)
{
    const bench_contender *c = contenders[col];
    int nproducers = run->nproducers;
    static const char *const mode_name[] = { "e2e", "e2e paced", "e2e steady" };
    if (run->err)
        die(mode_name[run->mode], c, run->err);
    c->destroy(run->q);
    aged_heap_free(aged);

    long n = run->delivered;
    char name[96];
    const char *ps = nproducers > 1 ? "s" : "";
    if (run->mode == E2E_UNPACED) {
        snprintf(name, sizeof(name), "e2e throughput, depth %ld, %d producer%s",
                 cfg->e2e_depth, nproducers, ps);
        stats_put(stats_metric_get(&results, "queues", "e2e", name, "Mmsg/s", true,
                                   cfg->e2e_depth, nproducers),
                  col, rep,
                  (double)n / (double)(run->t_last_delivery - run->t_first_post) * 1e3);
        double post_ns = 0;
        for (int i = 0; i < nproducers; i++)
            post_ns += (double)run->producer_ns[i];
        snprintf(name, sizeof(name), "e2e post cost, depth %ld, %d producer%s",
                 cfg->e2e_depth, nproducers, ps);
        stats_put(stats_metric_get(&results, "queues", "e2e", name, "ns/post", false,
                                   cfg->e2e_depth, nproducers),
                  col, rep, post_ns / (double)n);
        snprintf(name, sizeof(name), "e2e consumer CPU, depth %ld, %d producer%s",
                 cfg->e2e_depth, nproducers, ps);
        stats_put(stats_metric_get(&results, "queues", "e2e", name, "CPU ns/msg", false,
                                   cfg->e2e_depth, nproducers),
                  col, rep, (double)run->consumer_cpu_ns / (double)n);
    } else {
        bool paced = run->mode == E2E_PACED;
        qsort(run->latency, (size_t)n, sizeof(int64_t), cmp_i64);
        if (paced)
            qsort(run->burst_latency, (size_t)n, sizeof(int64_t), cmp_i64);
        static const double ps_[] = { 0.5, 0.99, 0.999 };
        static const char *const pn[] = { "p50", "p99", "p99.9" };
        for (int b = 0; b < (paced ? 2 : 1); b++)
            for (int k = 0; k < 3; k++) {
                snprintf(name, sizeof(name),
                         "%s-to-delivery %s, %s, depth %ld, %d producer%s",
                         b ? "burst" : "post", pn[k], paced ? "paced" : "steady",
                         cfg->e2e_depth, nproducers, ps);
                stats_put(stats_metric_get(&results, "queues", "e2e", name, "us", false,
                                           cfg->e2e_depth, nproducers),
                          col, rep,
                          percentile(b ? run->burst_latency : run->latency, n, ps_[k]) /
                              1e3);
            }
    }
    free(run->latency);
    free(run->burst_latency);
}

/* Unpaced: one contender at a time, so that its throughput has the machine. */
void run_e2e_point(const config *cfg, int col, int rep, int nproducers)
{
    const bench_contender *c = contenders[col];
    e2e_run run;
    aged_heap aged;
    e2e_start(cfg, col, nproducers, E2E_UNPACED, &run, &aged);
    pthread_t consumer, producers[2];
    e2e_producer p[2];
    if (pthread_create(&consumer, NULL, e2e_consumer_main, &run))
        die("pthread_create", c, errno);
    for (int i = 0; i < nproducers; i++) {
        p[i].run = &run;
        p[i].index = i;
        if (pthread_create(&producers[i], NULL, e2e_producer_main, &p[i]))
            die("pthread_create", c, errno);
    }
    for (int i = 0; i < nproducers; i++)
        pthread_join(producers[i], NULL);
    pthread_join(consumer, NULL);
    e2e_finish(cfg, col, rep, &run, &aged);
}

/* The latency runs: every contender's queue at once, and the producers'
   posts dealt to the contenders in turn.  A slow phase of the shared
   machine lasts longer than one contender's run; interleaved, every
   contender sees the same phases, so their tails compare.

   Paced: each consumer parked, and each producer sends its bursts to the
   contenders in turn (producer i starts at contender i).  A wake-up's
   latency is the scheduler's and the hypervisor's more than the queue's. */
typedef struct latency_producer {
    e2e_run **runs;
    int nruns;
    int index;
    int nproducers;
    _Atomic int *ready; /* producers that have arrived */
    int err;
    const bench_contender *failed;
} latency_producer;

static void *paced_producer_main(void *arg)
{
    latency_producer *p = arg;
    dq_msg m = make_msg(&burst_target, p->index);
    atomic_fetch_add(p->ready, 1);
    while (atomic_load(p->ready) < p->nproducers)
        ;
    long bursts = p->runs[0]->per_producer / PACED_BURST * p->nruns;
    struct timespec gap = { 0, 20000 };
    for (long b = 0; b < bursts; b++) {
        e2e_run *run = p->runs[(b + p->index) % p->nruns];
        /* due at the burst's start (so due at once, FIFO within the burst);
           arg1:arg2 carry each post's own start */
        int64_t burst_start = bench_now();
        for (int i = 0; i < PACED_BURST; i++) {
            int64_t t = i == 0 ? burst_start : bench_now();
            set_post_start(&m, t);
            int err = run->c->post_at(run->q, &m, burst_start, NULL);
            if (err) {
                p->err = err;
                p->failed = run->c;
                return NULL;
            }
        }
        nanosleep(&gap, NULL);
    }
    return NULL;
}

/* Steady: one producer posts a message every STEADY_GAP_NS to one
   contender for STEADY_BLOCK posts, then moves to the next.  The gap is a
   busy wait (a sleep would let the producer's CPU halt and put a wake-up
   in every post) and is shorter than every consumer's idle poll (the
   looper's default spin, bench_idle_poll), so a consumer that keeps up
   stays awake through a block.  Before each block an untimed primer wakes
   the consumer, and the block starts once it is delivered: what is timed
   is the queue's own path from post to delivery, not a wake-up.  One
   producer only: a second would put three busy threads on two CPUs. */
#define STEADY_PRIMER_TIMEOUT_NS (10 * 1000000000LL)
_Static_assert(STEADY_GAP_NS < DQ_IDLE_SPIN_DEFAULT_NS,
               "steady posts must come faster than the consumers' idle poll");

static void *steady_producer_main(void *arg)
{
    latency_producer *p = arg;
    dq_msg m = make_msg(&burst_target, p->index);
    const dq_msg primer = make_msg(&primer_target, p->index);
    atomic_fetch_add(p->ready, 1);
    long blocks = p->runs[0]->per_producer / STEADY_BLOCK * p->nruns;
    for (long b = 0; b < blocks; b++) {
        e2e_run *run = p->runs[b % p->nruns];
        /* relaxed: the consumer sets it only after it takes the primer,
           which the post below publishes (release) after this store */
        atomic_store_explicit(&run->primed, 0, memory_order_relaxed);
        int64_t t = bench_now();
        int err = run->c->post_at(run->q, &primer, t, NULL);
        /* acquire: pairs with the consumer's release once it delivered the
           primer; bounded, so that a consumer that died cannot hang us */
        while (err == 0 && !atomic_load_explicit(&run->primed, memory_order_acquire)) {
            if (bench_now() - t > STEADY_PRIMER_TIMEOUT_NS)
                err = -ETIMEDOUT;
            dq_arch_cpu_relax();
        }
        for (int i = 0; err == 0 && i < STEADY_BLOCK; i++) {
            t = bench_now();
            set_post_start(&m, t);
            err = run->c->post_at(run->q, &m, t, NULL);
            while (bench_now() - t < STEADY_GAP_NS)
                dq_arch_cpu_relax();
        }
        if (err) {
            p->err = err;
            p->failed = run->c;
            return NULL;
        }
    }
    return NULL;
}

void run_latency_interleaved(const config *cfg, int rep, int nproducers, e2e_mode mode)
{
    int cols[NCONTENDERS], nruns = 0;
    for (int i = 0; i < NCONTENDERS; i++) {
        int col = rotate(i, rep, NCONTENDERS);
        if ((cfg->contender_mask & (1u << col)) &&
            (contenders[col]->caps & BENCH_CONSUMES))
            cols[nruns++] = col;
    }
    if (nruns == 0)
        return;
    e2e_run runs[NCONTENDERS], *order[NCONTENDERS];
    aged_heap aged[NCONTENDERS];
    pthread_t consumers[NCONTENDERS], producers[2];
    for (int k = 0; k < nruns; k++) {
        e2e_start(cfg, cols[k], nproducers, mode, &runs[k], &aged[k]);
        order[k] = &runs[k];
    }
    /* The consumers wait at most 5 s for a message: start them once every
       queue is set up (aging the allocator can take seconds).  Placement:
       every consumer on one CPU and producer i on the i-th from the other
       end, so that each contender's wake-ups take the same path (to an idle
       CPU with one producer); left to the scheduler, which consumer last
       ran where decides more of the tail than its queue. */
    pthread_attr_t attr;
    for (int k = 0; k < nruns; k++) {
        attr_on_cpu(&attr, 0);
        int err = pthread_create(&consumers[k], &attr, e2e_consumer_main, &runs[k]);
        pthread_attr_destroy(&attr);
        if (err)
            die("pthread_create", runs[k].c, err);
        while (atomic_load(&runs[k].ready) < 1) /* it swept and is the consumer */
            sched_yield();
    }
    _Atomic int ready = 0;
    latency_producer p[2];
    for (int i = 0; i < nproducers; i++) {
        p[i] = (latency_producer){ .runs = order,
                                   .nruns = nruns,
                                   .index = i,
                                   .nproducers = nproducers,
                                   .ready = &ready };
        attr_on_cpu(&attr, 1 + i);
        int err = pthread_create(
            &producers[i], &attr,
            mode == E2E_STEADY ? steady_producer_main : paced_producer_main, &p[i]);
        pthread_attr_destroy(&attr);
        if (err)
            die("pthread_create", NULL, err);
    }
    for (int i = 0; i < nproducers; i++) {
        pthread_join(producers[i], NULL);
        if (p[i].err)
            die(mode == E2E_STEADY ? "e2e steady post" : "e2e paced post", p[i].failed,
                p[i].err);
    }
    for (int k = 0; k < nruns; k++) {
        pthread_join(consumers[k], NULL);
        e2e_finish(cfg, cols[k], rep, &runs[k], &aged[k]);
    }
}
