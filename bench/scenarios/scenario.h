/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/scenarios/scenario.h: what queue_bench's driver (bench/queue_bench.c)
 * and its scenarios share: the run's configuration, the contender and
 * comparator columns, the results every point records into, and the helpers
 * that set a queue up the same way for every contender.
 *
 * One file per scenario (insert.c, e2e.c, remove.c, cancel.c, heap.c), each
 * running one point (one contender, one repetition, one parameter set) per
 * call; the driver decides the order, interleaving the contenders.  The
 * targets table (targets.c) reads the results once every repetition ran.
 *
 * Thread contract: the run_* entry points, the helpers and `results` belong
 * to the driver's main thread; the scenarios' own worker threads only time
 * and hand their timings back before the point records them.
 */
#ifndef BENCH_SCENARIOS_SCENARIO_H
#define BENCH_SCENARIOS_SCENARIO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "bench/contender.h"
#include "bench/stats.h"

/* contenders[]: deliqueue first (every ratio is against it), the A/A twin
   last; heap_cols[]: the library's branchless comparator first, its twin
   last. */
#define NCONTENDERS 7
#define NHEAPCOLS   5
extern const bench_contender *const contenders[NCONTENDERS];
extern const char *const heap_cols[NHEAPCOLS];

/* Every point's samples; printed and written by the driver. */
extern stats results;

/* Message targets: the background fill (fill_queue: message i has target
   fill_targets[i % 8]) and the measured posts. */
extern char fill_targets[8];
extern char burst_target;

#define STEADY_BLOCK 100 /* steady posts to one contender in a row */

typedef struct config {
    bool quick;
    int reps;
    bool run_insert, run_e2e, run_remove, run_cancel, run_heap;
    long depths[8];
    int ndepths;
    bool random_fill;        /* post the background in random order */
    bool aged_fill;          /* sorted, but from an aged allocator */
    unsigned contender_mask; /* bit i: run contenders[i] */
    const char *json_path;
    const char *plot_prefix;
    /* derived */
    long insert_target_ops;   /* per point */
    int64_t insert_budget_ns; /* per point */
    long e2e_depth, e2e_unpaced_msgs, e2e_paced_msgs, e2e_steady_msgs;
    int remove_calls;
    long heap_ops;
} config;

/* Prints what failed for whom and exits 2. */
_Noreturn void die(const char *what, const bench_contender *c, int err);

/* The contender that runs i-th in repetition rep: each repetition starts
   from the next one, so slow drift hits every contender alike. */
int rotate(int i, int rep, int n);

dq_msg make_msg(const void *target, int32_t what);

/* qsort's comparator of int64_t. */
int cmp_i64(const void *a, const void *b);

/* Due times of `n` background messages: far enough in the future that
   none falls due during a run, uniform over 5 s, ascending unless the
   fill is random (ascending is the legacy queue's best case: its tail
   fast path during the fill, and list nodes contiguous in memory).
   The caller frees the array. */
int64_t *fill_whens(long n, int64_t base, uint64_t seed, bool sorted);

/* --fill aged: the allocator aged for contender c at this depth (see
   common.c); held until aged_heap_free, after the point. */
typedef struct aged_heap {
    void **blocks;
    long n;
} aged_heap;
aged_heap age_allocator(const bench_contender *c, long depth);
void aged_heap_free(aged_heap *a);

/* Fill q with depth background messages (targets fill_targets[i % 8],
   what i % 128), returning their tokens if toks is not NULL. */
void fill_queue(const bench_contender *c, void *q, long depth, int64_t base,
                bool sorted, dq_token *toks);

/* The consumer absorbs what was posted; nothing may be due. */
void consumer_sweep(const bench_contender *c, void *q);

/* A new queue of contender c holding depth far-future background messages
   (their tokens in toks, unless NULL), swept by this thread, which is its
   consumer from now on; *aged is the allocator's aging for the point
   (aged_heap_free after it, once the queue is destroyed). */
void *background_queue(const config *cfg, const bench_contender *c, long depth,
                       dq_token *toks, aged_heap *aged);

/* Thread attributes that bind a thread to the k-th CPU this process may run
   on (counting from the last one down, modulo their number); false, and
   nothing bound, when there is only one.  The caller destroys attr. */
bool attr_on_cpu(pthread_attr_t *attr, int k);

/* The scenarios' points (col: the index in contenders[], or in heap_cols[]
   for the heap). */
void run_insert_point(const config *cfg, int col, int rep, long depth, int nproducers);
void run_e2e_point(const config *cfg, int col, int rep, int nproducers);
typedef enum e2e_mode {
    E2E_UNPACED, /* throughput: as fast as the producers go */
    E2E_PACED,   /* latency: bursts to a parked consumer */
    E2E_STEADY,  /* latency: a post every STEADY_GAP_NS to an awake one */
} e2e_mode;
void run_latency_interleaved(const config *cfg, int rep, int nproducers, e2e_mode mode);
void run_remove_point(const config *cfg, int col, int rep, long depth);
void run_cancel_point(const config *cfg, int col, int rep, long depth);
void run_heap_point(const config *cfg, int col, int rep, long depth, int64_t quantum);

/* The targets table, from the results of every repetition. */
void print_targets(void);

#endif /* BENCH_SCENARIOS_SCENARIO_H */
