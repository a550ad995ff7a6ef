/* SPDX-License-Identifier: Apache-2.0 */
/*
 * queue_bench: deliqueue against the legacy queue and against peers, as
 * ratios measured in one process run.
 *
 * Every contender (contender.h) runs every scenario point in the same run,
 * interleaved: repetition r runs each point for all contenders, starting
 * from a different contender each repetition, so slow drift of a shared,
 * noisy machine hits all of them alike.  Reported: the median over
 * repetitions and its ratio to deliqueue's median (the JSON also has every
 * sample and the median of the per-repetition ratios).
 *
 * Clocks: single-threaded costs (per insert, sweep, remove, cancel, heap)
 * are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so that the other
 * processes of a shared, oversubscribed machine do not count; a lock
 * waiter asleep in the kernel costs no CPU, so contended locked designs
 * also get the wall-clock rows (insert wall time, throughputs, latency).
 *
 * Scenarios (--scenarios, comma separated; default all):
 *   insert  inserts into a busy queue: depth D pending messages due within
 *           5 s (Android's MessageQueue perf test), then 1 or 2 producer
 *           threads insert more with random delays up to 5 s; cost per
 *           insert as seen by a producer, total producer throughput, and
 *           the consumer's later cost of absorbing them (sweep).  After
 *           each round of D/10 inserts the round's messages are removed
 *           (untimed) so the depth stays at D.
 *   e2e     end to end at depth 10k (far-future background messages):
 *           1 or 2 producers post due-now messages while the consumer
 *           delivers; unpaced: throughput, one contender at a time; paced
 *           (bursts of 4, then a ~20 us sleep): post-to-delivery latency
 *           p50/p99/p99.9, with every contender's queue and consumer alive
 *           at once and the bursts dealt to them in turn, so that the
 *           machine's slow phases hit all of them alike; steady (1
 *           producer, a post every 1 us, blocks of 100 dealt in turn,
 *           each primed): the same latencies with the consumer awake,
 *           where the queue's own path decides them and not a wake-up.
 *   remove  remove by criteria (target + what, ~D/1024 matches) at depth D,
 *           on the consumer thread; the call alone, and with the
 *           consumer's cleanup (its next try_next) added.
 *   cancel  cancel by token of D/10 (at most 1000) random pending messages.
 *   heap    the consumer's heap work (heap_work.h) with the branchless
 *           (library) and branchy comparators, and two candidate
 *           branchless spellings (andor, wide).
 *
 * The A/A control: deliqueue_twin (the same deliqueue code, a contender of
 * its own) and branchless_twin (the library's comparator again) run in
 * every scenario like any other column.  Their ratios to deliqueue (to
 * branchless) are what noise alone makes of a ratio in this run; the
 * targets table gives each target's A/A band (stats_noise_band) and calls a missed
 * target a tie when the contender it was measured against lies inside it.
 *
 * Usage: queue_bench [--quick] [--reps N] [--scenarios LIST] [--depths LIST]
 *                    [--contenders LIST (deliqueue always runs)]
 *                    [--fill aged|sorted|random] [--json PATH] [--plot-data PREFIX]
 *
 * --fill: how the background messages are laid out (see age_allocator):
 *   aged (default) posted in ascending order from an aged allocator, so
 *          list order and address order are unrelated, as after Android's
 *          random-order fill; sorted: ascending from a fresh heap (the
 *          legacy list's best case: it streams through memory); random:
 *          posted in random order (O(N^2) for legacy: minutes at 100k).
 * Exit 0; 2 on bad usage or when a contender fails an operation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <deliqueue_arch/cpu.h>

#include "bench/contender.h"
#include "bench/heap_work.h"
#include "bench/machine.h"
#include "bench/stats.h"

#ifndef BENCH_COPTS
#define BENCH_COPTS "(unknown)"
#endif

static const bench_contender *const contenders[] = {
    &bench_deliqueue, &bench_legacy,       &bench_mutex_heap,
    &bench_ck_handoff, &bench_urcu_handoff, &bench_floor,
    &bench_deliqueue_twin, /* the A/A control: never a target's opponent */
};
#define NCONTENDERS ((int)(sizeof(contenders) / sizeof(contenders[0])))

static const char *const heap_cols[] = { "branchless", "branchy", "andor", "wide",
                                         "branchless_twin" };
#define NHEAPCOLS 5

/* Message targets: the background fill, the measured posts, and the
   others of the remove scenario. */
static char fill_targets[8];
static char burst_target;
static char primer_target;      /* steady: wakes a consumer, not timed */

typedef struct config {
    bool   quick;
    int    reps;
    bool   run_insert, run_e2e, run_remove, run_cancel, run_heap;
    long   depths[8];
    int    ndepths;
    bool   random_fill;         /* post the background in random order */
    bool   aged_fill;           /* sorted, but from an aged allocator */
    unsigned contender_mask;    /* bit i: run contenders[i] */
    const char *json_path;
    const char *plot_prefix;
    /* derived */
    long   insert_target_ops;   /* per point */
    int64_t insert_budget_ns;   /* per point */
    long   e2e_depth, e2e_unpaced_msgs, e2e_paced_msgs, e2e_steady_msgs;
    int    remove_calls;
    long   heap_ops;
} config;

static stats results;

static void die(const char *what, const bench_contender *c, int err)
{
    fprintf(stderr, "queue_bench: %s failed for %s: %s\n", what,
            c ? c->name : "-", strerror(err < 0 ? -err : err));
    exit(2);
}

/* The contender that runs i-th in repetition rep: each repetition starts
   from the next one, so slow drift hits every contender alike. */
static int rotate(int i, int rep, int n)
{
    return (i + rep) % n;
}

static dq_msg make_msg(const void *target, int32_t what)
{
    dq_msg m;
    memset(&m, 0, sizeof(m));
    m.target = target;
    m.what = what;
    return m;
}

/* Due times of `n` background messages: far enough in the future that
   none falls due during a run, uniform over 5 s, ascending unless the
   fill is random (ascending is the legacy queue's best case: its tail
   fast path during the fill, and list nodes contiguous in memory). */
static int64_t *fill_whens(long n, int64_t base, uint64_t seed, bool sorted);

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t *fill_whens(long n, int64_t base, uint64_t seed, bool sorted)
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
typedef struct aged_heap {
    void **blocks;
    long   n;
} aged_heap;

static aged_heap age_allocator(const bench_contender *c, long depth)
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
        per = 0;   /* no steady per-message malloc (a pool) */
    if (per < 32 || per > 4096)
        return a;   /* nothing to age */
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

static void aged_heap_free(aged_heap *a)
{
    for (long i = 0; i < a->n; i++)
        free(a->blocks[i]);
    free(a->blocks);
    a->blocks = NULL;
    a->n = 0;
}

/* Fill q with depth background messages (targets fill_targets[i % 8],
   what i % 128), returning their tokens if toks is not NULL. */
static void fill_queue(const bench_contender *c, void *q, long depth,
                       int64_t base, bool sorted, dq_token *toks)
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

/* The consumer absorbs what was posted; nothing may be due. */
static void consumer_sweep(const bench_contender *c, void *q)
{
    if (!(c->caps & BENCH_CONSUMES))
        return;
    dq_msg out;
    int err = c->try_next(q, &out);
    if (err != -EAGAIN)
        die("sweep (a message fell due, or an error)", c, err ? err : EPROTO);
}

/* Thread attributes that bind a thread to the k-th CPU this process may run
   on (counting from the last one down, modulo their number); false, and
   nothing bound, when there is only one. */
static bool attr_on_cpu(pthread_attr_t *attr, int k)
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

/* ---- machine probe ----------------------------------------------------- */

/* On this project's KVM guests the round trip of a cache line between the
   two vCPUs flips between about 110 and 500 ns from one second to the
   next, and every queue whose consumer hands memory back to its producer
   pays it, while the floor (own nodes, no consumer) does not.  So each
   insert point at depth 10k records the round trip just before it runs:
   its column says which phase of the machine that contender's point got. */
#define PROBE_TRIPS 2000

typedef struct probe {
    _Alignas(64) _Atomic long ball;   /* odd: the pitcher's turn is over */
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

/* ---- insert into a busy queue ------------------------------------------ */

#define INSERT_WHENS 65536     /* per producer, reused cyclically */
#define INSERT_CHUNK 64        /* most posts between two clock reads */

typedef struct insert_run insert_run;

typedef struct insert_producer {
    insert_run *run;
    pthread_t   thread;
    int         index;
    int64_t    *whens;
    size_t      cursor;
    long        ops_asked, ops_done;
    int64_t     t_start, t_end;
    int64_t     cpu_ns;
    int         err;
} insert_producer;

struct insert_run {
    const bench_contender *c;
    void            *q;
    int              nproducers;
    pthread_barrier_t start, done;
    _Atomic int      arrived;     /* rendezvous counter, monotonic */
    int              round;
    bool             quit;        /* written before start, read after it */
    int64_t          deadline;    /* of the current round */
    insert_producer  p[2];
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

static void run_insert_point(const config *cfg, int col, int rep, long depth,
                             int nproducers)
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
        p->whens = fill_whens(INSERT_WHENS, base, 1000 + (uint64_t)i * 77 + (uint64_t)rep, false);
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
    stats_put(stats_metric_get(&results, "queues", "insert", name, "ns/insert",
                               false, depth, nproducers),
              col, rep, thread_ns / (double)ops);
    snprintf(name, sizeof(name), "insert throughput, depth %ld, %d producer%s",
             depth, nproducers, nproducers > 1 ? "s" : "");
    stats_put(stats_metric_get(&results, "queues", "insert", name, "Minserts/s",
                               true, depth, nproducers),
              col, rep, (double)ops / wall_ns * 1e3);
    if (c->caps & BENCH_CONSUMES) {
        snprintf(name, sizeof(name), "consumer sweep of those inserts, depth %ld, %d producer%s",
                 depth, nproducers, nproducers > 1 ? "s" : "");
        stats_put(stats_metric_get(&results, "queues", "insert", name, "CPU ns/msg",
                                   false, depth, nproducers),
                  col, rep, sweep_ns / (double)ops);
    }
    if (!isnan(probe_rtt)) {
        snprintf(name, sizeof(name), "cross-core round trip before the point, depth %ld, %d producer%s",
                 depth, nproducers, nproducers > 1 ? "s" : "");
        stats_put(stats_metric_get(&results, "queues", "insert", name,
                                   "ns (machine probe)", false, depth, nproducers),
                  col, rep, probe_rtt);
    }
}

/* ---- end to end ---------------------------------------------------------- */

typedef enum e2e_mode {
    E2E_UNPACED,    /* throughput: as fast as the producers go */
    E2E_PACED,      /* latency: bursts to a parked consumer */
    E2E_STEADY,     /* latency: a post every STEADY_GAP_NS to an awake one */
} e2e_mode;

typedef struct e2e_run {
    const bench_contender *c;
    void           *q;
    int             nproducers;
    long            per_producer;
    e2e_mode        mode;
    _Atomic int     ready;        /* consumer 1, then each producer 1 */
    int64_t         t_first_post;
    int64_t         t_last_delivery;
    int64_t         producer_ns[2];
    int64_t         consumer_cpu_ns;  /* the consumer's CPU time, all of it */
    int64_t        *latency;      /* consumer only until joined: from the post */
    int64_t        *burst_latency; /* paced: from its burst's first post */
    _Atomic int     primed;       /* steady: the block's primer was delivered */
    long            delivered;
    int             err;
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

#define PACED_BURST 4           /* posts per burst of the paced producers */
#define STEADY_GAP_NS 1000      /* between steady posts: under every idle spin */
#define STEADY_BLOCK 100        /* steady posts to one contender in a row */

typedef struct e2e_producer {
    e2e_run *run;
    int      index;
} e2e_producer;

static void *e2e_consumer_main(void *arg)
{
    e2e_run *run = arg;
    const bench_contender *c = run->c;
    consumer_sweep(c, run->q);        /* this thread is the consumer now */
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
                                             : cfg->e2e_steady_msgs) / nproducers;
    run->latency = malloc((size_t)(run->per_producer * nproducers) * sizeof(int64_t));
    run->burst_latency = paced ? malloc((size_t)(run->per_producer * nproducers) * sizeof(int64_t))
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
                  col, rep, (double)n / (double)(run->t_last_delivery - run->t_first_post) * 1e3);
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
                snprintf(name, sizeof(name), "%s-to-delivery %s, %s, depth %ld, %d producer%s",
                         b ? "burst" : "post", pn[k], paced ? "paced" : "steady",
                         cfg->e2e_depth, nproducers, ps);
                stats_put(stats_metric_get(&results, "queues", "e2e", name, "us", false,
                                           cfg->e2e_depth, nproducers),
                          col, rep,
                          percentile(b ? run->burst_latency : run->latency, n, ps_[k]) / 1e3);
            }
    }
    free(run->latency);
    free(run->burst_latency);
}

/* Unpaced: one contender at a time, so that its throughput has the machine. */
static void run_e2e_point(const config *cfg, int col, int rep, int nproducers)
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
    e2e_run   **runs;
    int         nruns;
    int         index;
    int         nproducers;
    _Atomic int *ready;          /* producers that have arrived */
    int         err;
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

static void run_latency_interleaved(const config *cfg, int rep, int nproducers,
                                    e2e_mode mode)
{
    int cols[NCONTENDERS], nruns = 0;
    for (int i = 0; i < NCONTENDERS; i++) {
        int col = rotate(i, rep, NCONTENDERS);
        if ((cfg->contender_mask & (1u << col)) && (contenders[col]->caps & BENCH_CONSUMES))
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
        p[i] = (latency_producer){ .runs = order, .nruns = nruns, .index = i,
                                 .nproducers = nproducers, .ready = &ready };
        attr_on_cpu(&attr, 1 + i);
        int err = pthread_create(&producers[i], &attr,
                                 mode == E2E_STEADY ? steady_producer_main : paced_producer_main,
                                 &p[i]);
        pthread_attr_destroy(&attr);
        if (err)
            die("pthread_create", NULL, err);
    }
    for (int i = 0; i < nproducers; i++) {
        pthread_join(producers[i], NULL);
        if (p[i].err)
            die(mode == E2E_STEADY ? "e2e steady post" : "e2e paced post", p[i].failed, p[i].err);
    }
    for (int k = 0; k < nruns; k++) {
        pthread_join(consumers[k], NULL);
        e2e_finish(cfg, cols[k], rep, &runs[k], &aged[k]);
    }
}

/* ---- remove by criteria, cancel by token -------------------------------- */

static void run_remove_point(const config *cfg, int col, int rep, long depth)
{
    const bench_contender *c = contenders[col];
    aged_heap aged = cfg->aged_fill ? age_allocator(c, depth) : (aged_heap){ NULL, 0 };
    void *q = c->create();
    if (q == NULL)
        die("create", c, ENOMEM);
    fill_queue(c, q, depth, bench_now() + 3600LL * 1000000000, !cfg->random_fill, NULL);
    consumer_sweep(c, q);
    double call_ns = 0, total_ns = 0;
    /* fill_queue gives message j target j % 8 and what j % 128, so what w
       (a multiple of 8) matches the j < D with j % 128 == w, and a what
       met again (every 16 calls) matches nothing left: every contender
       must remove exactly this many, or its timing is not of this work */
    long expected = 0, removed_total = 0;
    for (int i = 0; i < cfg->remove_calls && i < 16; i++)
        if (8L * i < depth)
            expected += (depth - 8L * i + 127) / 128;
    for (int i = 0; i < cfg->remove_calls; i++) {
        /* target 0 holds what 0, 8, 16, ...: what = 8 * i matches ~D/1024 */
        dq_match match = { .target = &fill_targets[0], .fields = DQ_MATCH_WHAT,
                           .what = (int32_t)((8 * i) % 128) };
        int64_t t0 = bench_thread_cpu_ns();
        size_t removed = c->remove(q, &match);
        int64_t t1 = bench_thread_cpu_ns();
        consumer_sweep(c, q);
        int64_t t2 = bench_thread_cpu_ns();
        removed_total += (long)removed;
        call_ns += (double)(t1 - t0);
        total_ns += (double)(t2 - t0);
    }
    if (removed_total != expected) {
        fprintf(stderr, "queue_bench: %s removed %ld messages by criteria at depth %ld, "
                        "not %ld\n", c->name, removed_total, depth, expected);
        die("remove by criteria", c, EPROTO);
    }
    c->destroy(q);
    aged_heap_free(&aged);
    char name[96];
    snprintf(name, sizeof(name), "remove by criteria, depth %ld", depth);
    stats_put(stats_metric_get(&results, "queues", "remove", name, "CPU us/call", false, depth, 1),
              col, rep, call_ns / cfg->remove_calls / 1e3);
    snprintf(name, sizeof(name), "remove by criteria + consumer cleanup, depth %ld", depth);
    stats_put(stats_metric_get(&results, "queues", "remove", name, "CPU us/call", false, depth, 1),
              col, rep, total_ns / cfg->remove_calls / 1e3);
}

static void run_cancel_point(const config *cfg, int col, int rep, long depth)
{
    const bench_contender *c = contenders[col];
    aged_heap aged = cfg->aged_fill ? age_allocator(c, depth) : (aged_heap){ NULL, 0 };
    void *q = c->create();
    dq_token *toks = malloc((size_t)depth * sizeof(*toks));
    if (q == NULL || toks == NULL)
        die("create", c, ENOMEM);
    fill_queue(c, q, depth, bench_now() + 3600LL * 1000000000, !cfg->random_fill, toks);
    consumer_sweep(c, q);
    long k = depth / 10 < 1000 ? depth / 10 : 1000;
    if (k < 1)
        k = 1;
    /* distinct pseudo-random victims: a stride coprime to depth */
    long stride = 7919 % depth ? 7919 : 7907;
    long start = (long)((uint64_t)rep * 104729u % (uint64_t)depth);
    int64_t t0 = bench_thread_cpu_ns();
    for (long i = 0; i < k; i++) {
        int err = c->cancel(q, toks[(start + i * stride) % depth]);
        if (err)
            die("cancel", c, err);
    }
    int64_t t1 = bench_thread_cpu_ns();
    consumer_sweep(c, q);
    int64_t t2 = bench_thread_cpu_ns();
    c->destroy(q);
    free(toks);
    aged_heap_free(&aged);
    char name[96];
    snprintf(name, sizeof(name), "cancel by token, depth %ld", depth);
    stats_put(stats_metric_get(&results, "queues", "cancel", name, "CPU ns/cancel", false, depth, 1),
              col, rep, (double)(t1 - t0) / (double)k);
    snprintf(name, sizeof(name), "cancel by token + consumer cleanup, depth %ld", depth);
    stats_put(stats_metric_get(&results, "queues", "cancel", name, "CPU ns/cancel", false, depth, 1),
              col, rep, (double)(t2 - t0) / (double)k);
}

/* ---- consumer heap: branchless vs branchy -------------------------------- */

static void run_heap_point(const config *cfg, int col, int rep, long depth,
                           int64_t quantum)
{
    /* CPU time of this one thread: its wall time minus the time the
       shared machine ran something else instead */
    int64_t t0 = bench_thread_cpu_ns();
    uint64_t sum = bench_heap_comparators[col].work(
        (uint32_t)depth, (uint64_t)cfg->heap_ops, 42 + (uint64_t)rep, quantum);
    int64_t t1 = bench_thread_cpu_ns();
    if (sum == 0)
        die("heap workload", NULL, ENOMEM);
    char name[96];
    snprintf(name, sizeof(name), "heap hold (pop+push), depth %ld, due times %s",
             depth, quantum == 1 ? "in ns (no ties)" : "in ms (ties)");
    stats_put(stats_metric_get(&results, "heap", "heap", name, "CPU ns/op", false, depth, 0),
              col, rep, (double)(t1 - t0) / (double)(cfg->heap_ops + depth));
}

/* ---- targets (issue 6): measured ratios, reported, never asserted -------- */

static const stats_metric *find_metric(const char *name)
{
    for (int i = 0; i < results.nmetrics; i++)
        if (!strcmp(results.m[i].name, name))
            return &results.m[i];
    return NULL;
}

static int col_of(const char *name)
{
    for (int i = 0; i < NCONTENDERS; i++)
        if (!strcmp(contenders[i]->name, name))
            return i;
    return -1;
}

/* A target repetition by repetition: in each repetition where every
   column has a sample, deliqueue's least advantage over cols
   (stats_advantage: above 1, deliqueue was better) against at_least.  The
   medians give the verdict; this says whether it held in most
   repetitions or only in the medians, on a machine whose phases move
   single repetitions by 2x. */
typedef struct target_reps {
    int    held, n;
    double lo, hi; /* range of the least advantage */
} target_reps;

static target_reps target_by_rep(const stats_metric *m, const int *cols, int ncols,
                                 double at_least)
{
    target_reps t = { 0, 0, NAN, NAN };
    for (int r = 0; m && r < STATS_MAX_REPS; r++) {
        double least = NAN;
        for (int i = 0; i < ncols; i++) {
            double a = stats_advantage(m, cols[i], r);
            if (isnan(a)) {
                least = NAN;
                break;
            }
            if (isnan(least) || a < least)
                least = a;
        }
        if (isnan(least))
            continue;
        t.n++;
        t.held += least >= at_least;
        if (isnan(t.lo) || least < t.lo)
            t.lo = least;
        if (isnan(t.hi) || least > t.hi)
            t.hi = least;
    }
    return t;
}

static const char *column_name(const stats_metric *m, int col)
{
    return strcmp(m->group, "heap") ? contenders[col]->name : heap_cols[col];
}

/* The A/A control of a target: the twin's band for its metric
   (stats_noise_band) and, for a parity target (deliqueue at least as good
   as an opponent: a ratio threshold of 1), the opponent's column, whose
   paired ratio inside the band makes the verdict a tie. */
typedef struct target_aa {
    const stats_metric *m;
    int twin;      /* the twin's column, -1 if none */
    int opponent;  /* parity targets: the opponent's column; else -1 */
} target_aa;

/* One target line: `what`, the measured value (medians), the verdict of
   the medians, how it held by repetition, and the A/A band (ratios in the
   tables' sense: the twin's median / deliqueue's); inverted: the measured
   ratio is shown as 1 / advantage (a cost against the floor). */
static void target_line(const char *what, double measured, const char *shown,
                        bool met, target_reps t, bool inverted, target_aa aa)
{
    if (isnan(measured)) {
        printf("| %s | not measured in this run | - | - | - |\n", what);
        return;
    }
    char lo[32], hi[32], band[96] = "-";
    stats_format_ratio(lo, sizeof(lo), inverted ? 1 / t.hi : t.lo);
    stats_format_ratio(hi, sizeof(hi), inverted ? 1 / t.lo : t.hi);
    double blo, bhi;
    bool tie = false;
    if (aa.m && aa.twin >= 0 && stats_noise_band(aa.m, aa.twin, &blo, &bhi)) {
        char a[32], b[32];
        stats_format_ratio(a, sizeof(a), blo);
        stats_format_ratio(b, sizeof(b), bhi);
        snprintf(band, sizeof(band), "%s-%s", a, b);
        if (aa.opponent >= 0) {
            double r = stats_ratio(aa.m, aa.opponent);
            tie = r >= blo && r <= bhi;
            char o[32];
            stats_format_ratio(o, sizeof(o), r);
            snprintf(band + strlen(band), sizeof(band) - strlen(band), " (%s: %s)",
                     column_name(aa.m, aa.opponent), o);
        }
    }
    printf("| %s | %s | %d of %d (%s-%s) | %s | %s%s |\n", what, shown, t.held, t.n, lo, hi,
           band, met ? "met" : "MISSED", tie ? ", a tie (inside the A/A band)" : "");
}

static void print_targets(void)
{
    char buf[128];
    const stats_metric *m;
    const int legacy = col_of("legacy"), mutex_heap = col_of("mutex_heap"),
              floor_ = col_of("floor");
    const int handoffs[] = { col_of("ck_handoff"), col_of("urcu_handoff") };
    const int twin = col_of("deliqueue_twin");
    printf("\n## Targets (ratios from this run)\n\n"
           "The verdict is the medians'; \"held in\" counts the repetitions where the\n"
           "target held on that repetition's own samples (the range is deliqueue's\n"
           "ratio in the measured column's sense, against the closest contender).\n"
           "The A/A band is where noise alone put the median ratio of deliqueue's\n"
           "twin (the same code run as a contender of its own) to deliqueue: 95%%\n"
           "bootstrap interval, in the tables' sense (median / deliqueue's).  For a\n"
           "parity target it also gives the opponent's ratio; inside the band, the\n"
           "two are not measurably different in this run: a tie.\n\n"
           "| target | measured (medians) | held in (range) | A/A band | |\n"
           "|---|---|---|---|---|\n");
    for (int np = 1; np <= 2; np++) {
        char name[96];
        snprintf(name, sizeof(name), "insert cost, depth 100000, %d producer%s", np,
                 np > 1 ? "s" : "");
        m = find_metric(name);
        double r = m ? stats_ratio_of_medians(m, legacy) : NAN;
        snprintf(buf, sizeof(buf), "legacy / deliqueue = %.0fx", r);
        snprintf(name, sizeof(name), "insert at depth 100k, %d producer%s: >= 5000x faster than legacy",
                 np, np > 1 ? "s" : "");
        target_line(name, r, buf, r >= 5000, target_by_rep(m, &legacy, 1, 5000), false,
                    (target_aa){ m, twin, -1 });
    }
    m = find_metric("insert throughput, depth 10000, 2 producers");
    double r = m ? 1 / stats_ratio_of_medians(m, mutex_heap) : NAN;
    snprintf(buf, sizeof(buf), "deliqueue / mutex_heap = %.2fx", r);
    target_line("2-producer insert throughput (depth 10k) >= 3x mutex_heap", r, buf, r >= 3,
                target_by_rep(m, &mutex_heap, 1, 3), false, (target_aa){ m, twin, -1 });
    double best = NAN;
    int best_col = -1;
    for (int i = 0; m && i < 2; i++) {
        double x = stats_ratio_of_medians(m, handoffs[i]);
        if (isnan(best) || x > best) {
            best = x;
            best_col = handoffs[i];
        }
    }
    snprintf(buf, sizeof(buf), "deliqueue / %s = %.2fx",
             best_col >= 0 ? contenders[best_col]->name : "", 1 / best);
    target_line("2-producer insert throughput (depth 10k) >= best ck/urcu handoff",
                best, buf, 1 / best >= 1, target_by_rep(m, handoffs, 2, 1), false,
                (target_aa){ m, twin, best_col });
    m = find_metric("e2e throughput, depth 10000, 2 producers");
    r = m ? 1 / stats_ratio_of_medians(m, mutex_heap) : NAN;
    snprintf(buf, sizeof(buf), "deliqueue / mutex_heap = %.2fx", r);
    target_line("(also) 2-producer end-to-end throughput >= 3x mutex_heap", r, buf, r >= 3,
                target_by_rep(m, &mutex_heap, 1, 3), false, (target_aa){ m, twin, -1 });
    for (int np = 1; np <= 2; np++) {
        char name[96], what[96];
        snprintf(name, sizeof(name), "insert cost, depth 10000, %d producer%s", np,
                 np > 1 ? "s" : "");
        m = find_metric(name);
        r = m ? 1 / stats_ratio_of_medians(m, floor_) : NAN;
        snprintf(buf, sizeof(buf), "deliqueue / floor = %.2fx", r);
        snprintf(what, sizeof(what), "push cost (depth 10k, %d producer%s) within 1.5x of the floor",
                 np, np > 1 ? "s" : "");
        /* floor / deliqueue >= 1 / 1.5 */
        target_line(what, r, buf, r <= 1.5, target_by_rep(m, &floor_, 1, 1 / 1.5), true,
                    (target_aa){ m, twin, -1 });
    }
    /* post-to-delivery is the target; burst-to-delivery times every
       message from its burst's first post, what the poster of the burst
       waits for its last message, so that a post that returns sooner is no
       longer a head start for the messages after it (the paced producer).
       Paced, the consumer is parked at every burst and the p99 is mostly
       a wake-up; steady, it is awake and the p99 is the queue's path. */
    int consumers[NCONTENDERS], nconsumers = 0;
    for (int c = 1; c < NCONTENDERS; c++)
        if ((contenders[c]->caps & BENCH_CONSUMES) && c != twin)
            consumers[nconsumers++] = c;
    static const struct { const char *kind, *how, *also; int np; } lat[] = {
        { "post", "paced", "", 1 },          { "post", "paced", "", 2 },
        { "post", "steady", "", 1 },
        { "burst", "paced", "(also) ", 1 },  { "burst", "paced", "(also) ", 2 },
    };
    for (size_t t = 0; t < sizeof(lat) / sizeof(lat[0]); t++) {
        const char *ps = lat[t].np > 1 ? "s" : "";
        char name[96], what[128];
        snprintf(name, sizeof(name), "%s-to-delivery p99, %s, depth 10000, %d producer%s",
                 lat[t].kind, lat[t].how, lat[t].np, ps);
        m = find_metric(name);
        double worst = NAN;
        int who_col = -1;
        for (int i = 0; m && i < nconsumers; i++) {
            double x = stats_ratio_of_medians(m, consumers[i]);
            if (!isnan(x) && (isnan(worst) || x < worst)) {
                worst = x;
                who_col = consumers[i];
            }
        }
        snprintf(buf, sizeof(buf), "next best %s at %.2fx deliqueue's p99 (%.2f us)",
                 who_col >= 0 ? contenders[who_col]->name : "",
                 worst, m ? stats_median(m, 0) : NAN);
        snprintf(what, sizeof(what), "%sp99 %s-to-delivery at depth 10k, %s, %d producer%s, lowest",
                 lat[t].also, lat[t].kind, lat[t].how, lat[t].np, ps);
        target_line(what, worst, buf, worst >= 1,
                    target_by_rep(m, consumers, nconsumers, 1), false,
                    (target_aa){ m, twin, who_col });
    }
    for (int i = 0; i < results.nmetrics; i++) {
        m = &results.m[i];
        if (strcmp(m->group, "heap"))
            continue;
        r = stats_ratio_of_medians(m, 1);
        snprintf(buf, sizeof(buf), "branchy / branchless time = %.2fx", r);
        char what[160];
        snprintf(what, sizeof(what), "branchless not slower: %s", m->name);
        const int branchy = 1, branchless_twin = NHEAPCOLS - 1;
        target_line(what, r, buf, r >= 1, target_by_rep(m, &branchy, 1, 1), false,
                    (target_aa){ m, branchless_twin, branchy });
    }
    printf("\nSimulated mispredictions (cachegrind): see bench/run_all's table.\n");
}

/* ---- driver --------------------------------------------------------------- */

static bool parse_list(const char *s, long *out, int max, int *n)
{
    *n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || *n == max)
            return false;
        out[(*n)++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return false;
    }
    return *n > 0;
}

static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--quick] [--reps N] [--scenarios insert,e2e,remove,cancel,heap]\n"
            "          [--depths 1000,10000,100000] [--fill aged|sorted|random]\n"
            "          [--contenders deliqueue,legacy,...] [--json PATH] [--plot-data PREFIX]\n",
            argv0);
    return 2;
}

/* Under `bazel run` the working directory is the runfiles tree: resolve a
   relative output path against the directory bazel was invoked from. */
static const char *output_path(const char *path)
{
    static char buf[2][4096];
    static int which;
    const char *cwd = getenv("BUILD_WORKING_DIRECTORY");
    if (path == NULL || path[0] == '/' || cwd == NULL || cwd[0] == 0)
        return path;
    char *b = buf[which++ % 2];
    snprintf(b, sizeof(buf[0]), "%s/%s", cwd, path);
    return b;
}

int main(int argc, char **argv)
{
    config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.reps = 5;
    cfg.depths[0] = 1000;
    cfg.depths[1] = 10000;
    cfg.depths[2] = 100000;
    cfg.ndepths = 3;
    cfg.aged_fill = true;
    bool reps_given = false, depths_given = false;
    const char *scenarios = "insert,e2e,remove,cancel,heap";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            cfg.quick = true;
        } else if (!strcmp(a, "--reps") && v) {
            cfg.reps = atoi(v);
            reps_given = true;
            i++;
        } else if (!strcmp(a, "--scenarios") && v) {
            scenarios = v;
            i++;
        } else if (!strcmp(a, "--depths") && v) {
            if (!parse_list(v, cfg.depths, 8, &cfg.ndepths))
                return usage(argv[0]);
            depths_given = true;
            i++;
        } else if (!strcmp(a, "--fill") && v) {
            if (strcmp(v, "sorted") && strcmp(v, "random") && strcmp(v, "aged"))
                return usage(argv[0]);
            cfg.random_fill = !strcmp(v, "random");
            cfg.aged_fill = !strcmp(v, "aged");
            i++;
        } else if (!strcmp(a, "--contenders") && v) {
            char *list = strdup(v);
            for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
                int k = 0;
                while (k < NCONTENDERS && strcmp(contenders[k]->name, t))
                    k++;
                if (k == NCONTENDERS)
                    return usage(argv[0]);
                cfg.contender_mask |= 1u << k;
            }
            free(list);
            i++;
        } else if (!strcmp(a, "--json") && v) {
            cfg.json_path = v;
            i++;
        } else if (!strcmp(a, "--plot-data") && v) {
            cfg.plot_prefix = v;
            i++;
        } else {
            return usage(argv[0]);
        }
    }
    if (cfg.reps < 1 || cfg.reps > STATS_MAX_REPS)
        return usage(argv[0]);
    cfg.json_path = output_path(cfg.json_path);
    cfg.plot_prefix = output_path(cfg.plot_prefix);
    /* deliqueue always runs: every ratio is against it */
    cfg.contender_mask = cfg.contender_mask ? cfg.contender_mask | 1u
                                            : (1u << NCONTENDERS) - 1;
    char *sc = strdup(scenarios);
    for (char *tok = strtok(sc, ","); tok; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "insert")) cfg.run_insert = true;
        else if (!strcmp(tok, "e2e")) cfg.run_e2e = true;
        else if (!strcmp(tok, "remove")) cfg.run_remove = true;
        else if (!strcmp(tok, "cancel")) cfg.run_cancel = true;
        else if (!strcmp(tok, "heap")) cfg.run_heap = true;
        else return usage(argv[0]);
    }
    free(sc);
    if (cfg.quick) {
        if (!reps_given)
            cfg.reps = 2;
        if (!depths_given) {
            cfg.depths[0] = 1000;
            cfg.depths[1] = 10000;
            cfg.ndepths = 2;
        }
        cfg.insert_target_ops = 4000;
        cfg.insert_budget_ns = 20000000;
        cfg.e2e_depth = 1000;
        cfg.e2e_unpaced_msgs = 20000;
        cfg.e2e_paced_msgs = 2000;
        cfg.e2e_steady_msgs = 2 * STEADY_BLOCK;
        cfg.remove_calls = 4;
        cfg.heap_ops = 50000;
    } else {
        cfg.insert_target_ops = 200000;
        cfg.insert_budget_ns = 300000000;
        cfg.e2e_depth = 10000;
        cfg.e2e_unpaced_msgs = 200000;
        cfg.e2e_paced_msgs = 40000; /* p99 over 400 tail samples per repetition */
        cfg.e2e_steady_msgs = 1000 * STEADY_BLOCK; /* 0.1 s per contender */
        cfg.remove_calls = 16;
        cfg.heap_ops = 1000000;
    }

    const char *cols[NCONTENDERS];
    for (int i = 0; i < NCONTENDERS; i++)
        cols[i] = contenders[i]->name;

    char model[256];
    bench_cpu_model(model, sizeof(model));
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    struct utsname un;
    uname(&un);
#ifdef __OPTIMIZE__
    const char *optimized = "yes";
#else
    const char *optimized = "NO (build with -c opt)";
#endif
#ifdef NDEBUG
    const char *ndebug = "yes";
#else
    const char *ndebug = "no";
#endif
    printf("# queue_bench\n\n");
    printf("- machine: %s, %ld online cores, %s %s %s\n", model, ncpu, un.sysname,
           un.release, un.machine);
    double load_start = bench_loadavg();
    printf("- load average at start: %.2f\n", load_start);
    bench_interruptions irq;
    if (bench_probe_interruptions(cfg.quick ? 0.2 : 1.0, &irq) == 0)
        printf("- interruptions: with all %d CPUs busy, %.0f gaps of over 1 us a second "
               "(median %.1f us), up to %.2f%% of one CPU's time (a message that meets "
               "one on its consumer's CPU waits it out: the latency tails)\n",
               irq.cpus, irq.per_second, irq.median_us, irq.lost_pct);
    else
        printf("- interruptions: not probed\n");
    printf("- build: compiler %s, optimized %s, NDEBUG %s, copts %s\n", __VERSION__,
           optimized, ndebug, BENCH_COPTS);
    printf("- deliqueue atomics: %s\n", dq_atomics());
    printf("- run: %s, %d repetitions, interleaved, background fill %s; "
           "cells: median (median / deliqueue's median)\n",
           cfg.quick ? "--quick" : "full", cfg.reps, cfg.random_fill ? "random" : cfg.aged_fill ? "aged" : "sorted");
    printf("- contenders:\n");
    for (int i = 0; i < NCONTENDERS; i++)
        printf("  - %s: %s\n", contenders[i]->name, contenders[i]->design);
    fflush(stdout);

    for (int rep = 0; rep < cfg.reps; rep++) {
        fprintf(stderr, "queue_bench: repetition %d/%d\n", rep + 1, cfg.reps);
        if (cfg.run_insert)
            for (int d = 0; d < cfg.ndepths; d++)
                for (int np = 1; np <= 2; np++)
                    for (int i = 0; i < NCONTENDERS; i++) {
                        int col = rotate(i, rep, NCONTENDERS);
                        if (cfg.contender_mask & (1u << col))
                            run_insert_point(&cfg, col, rep, cfg.depths[d], np);
                    }
        if (cfg.run_e2e)
            for (int np = 1; np <= 2; np++) {
                for (int i = 0; i < NCONTENDERS; i++) {
                    int col = rotate(i, rep, NCONTENDERS);
                    if ((cfg.contender_mask & (1u << col)) &&
                        (contenders[col]->caps & BENCH_CONSUMES))
                        run_e2e_point(&cfg, col, rep, np);
                }
                run_latency_interleaved(&cfg, rep, np, E2E_PACED);
            }
        if (cfg.run_e2e)
            run_latency_interleaved(&cfg, rep, 1, E2E_STEADY);
        if (cfg.run_remove || cfg.run_cancel)
            for (int d = 0; d < cfg.ndepths; d++)
                for (int i = 0; i < NCONTENDERS; i++) {
                    int col = rotate(i, rep, NCONTENDERS);
                    if (!(cfg.contender_mask & (1u << col)) ||
                        !(contenders[col]->caps & BENCH_CONSUMES))
                        continue;
                    if (cfg.run_remove)
                        run_remove_point(&cfg, col, rep, cfg.depths[d]);
                    if (cfg.run_cancel)
                        run_cancel_point(&cfg, col, rep, cfg.depths[d]);
                }
        if (cfg.run_heap) {
            long hd[2] = { 10000, 100000 };
            for (int d = 0; d < 2; d++)
                for (int qi = 0; qi < 2; qi++)
                    for (int i = 0; i < NHEAPCOLS; i++)
                        run_heap_point(&cfg, rotate(i, rep, NHEAPCOLS), rep,
                                       cfg.quick ? hd[d] / 10 : hd[d],
                                       qi ? 1000000 : 1);
        }
    }

    printf("- load average at end: %.2f (above %ld the machine was oversubscribed)\n",
           bench_loadavg(), ncpu);
    printf("\n## Queues\n\n");
    stats_print_table(stdout, &results, "queues", cols, NCONTENDERS);
    printf("\n## Consumer heap comparators\n\n");
    stats_print_table(stdout, &results, "heap", heap_cols, NHEAPCOLS);
    print_targets();
    fflush(stdout);

    if (cfg.json_path) {
        FILE *f = fopen(cfg.json_path, "w");
        if (f == NULL) {
            perror(cfg.json_path);
            return 2;
        }
        char header[2048];
        snprintf(header, sizeof(header),
                 "  \"machine\": {\"cpu\": \"%s\", \"cores\": %ld, \"kernel\": \"%s %s %s\", "
                 "\"interruptions\": {\"cpus\": %d, \"per_second\": %.1f, \"median_us\": %.2f, "
                 "\"lost_pct\": %.3f}},\n"
                 "  \"build\": {\"compiler\": \"%s\", \"optimized\": %s, \"ndebug\": %s, \"copts\": \"%s\"},\n"
                 "  \"atomics\": \"%s\",\n"
                 "  \"run\": {\"quick\": %s, \"repetitions\": %d, \"fill\": \"%s\"}",
                 model, ncpu, un.sysname, un.release, un.machine, irq.cpus,
                 irq.cpus ? irq.per_second : 0.0, irq.cpus ? irq.median_us : 0.0,
                 irq.cpus ? irq.lost_pct : 0.0, __VERSION__,
                 optimized[0] == 'y' ? "true" : "false", ndebug[0] == 'y' ? "true" : "false",
                 BENCH_COPTS, dq_atomics(), cfg.quick ? "true" : "false", cfg.reps,
                 cfg.random_fill ? "random" : cfg.aged_fill ? "aged" : "sorted");
        stats_write_json(f, &results, header, cols, NCONTENDERS, heap_cols, NHEAPCOLS);
        fclose(f);
    }
    if (cfg.plot_prefix) {
        for (int np = 1; np <= 2; np++) {
            char path[1024];
            snprintf(path, sizeof(path), "%s%d.dat", cfg.plot_prefix, np);
            FILE *f = fopen(path, "w");
            if (f == NULL) {
                perror(path);
                return 2;
            }
            stats_write_plot_data(f, &results, np, cols, NCONTENDERS);
            fclose(f);
        }
    }
    return 0;
}
