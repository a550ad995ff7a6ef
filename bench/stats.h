/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/stats.h: samples of the benchmark's metrics, one per repetition and
 * column (a contender, or a comparator), their medians and their per-
 * repetition ratios to column 0 (deliqueue, or the branchless comparator),
 * and the table / JSON / plot-data writers.
 *
 * Thread contract: none; only queue_bench's main thread records and
 * prints (worker threads hand their timings back first).
 */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stdbool.h>
#include <stdio.h>

#define STATS_MAX_COLS    8
#define STATS_MAX_REPS    64
#define STATS_MAX_METRICS 128

typedef struct stats_metric {
    const char *group;    /* "queues" or "heap": which columns */
    const char *scenario; /* insert, e2e, remove, cancel, heap */
    char name[96];        /* the row label */
    const char *unit;
    bool higher_better;
    long depth;    /* queue / heap depth, 0 if none */
    int producers; /* 0 if none */
    double v[STATS_MAX_COLS][STATS_MAX_REPS];
    bool have[STATS_MAX_COLS][STATS_MAX_REPS];
} stats_metric;

typedef struct stats {
    const char *cols[STATS_MAX_COLS]; /* per group: see stats_group */
    int ncols;
    stats_metric m[STATS_MAX_METRICS];
    int nmetrics;
} stats;

/* Find or add the metric with this group/scenario/name. */
stats_metric *stats_metric_get(stats *s, const char *group, const char *scenario,
                               const char *name, const char *unit, bool higher_better,
                               long depth, int producers);
void stats_put(stats_metric *m, int col, int rep, double value);

/* NaN if the column has no sample. */
double stats_median(const stats_metric *m, int col);
/* Median over repetitions of v[col][rep] / v[0][rep] (the paired ratio,
   in the JSON); NaN if none. */
double stats_ratio(const stats_metric *m, int col);
/* The A/A band: where noise alone puts the median of n per-repetition
   ratios (stats_ratio) in this run, learnt from column twin, the same
   code as column 0 measured as a contender of its own.  The null
   distribution of one repetition's ratio is the twin's ratios and their
   inverses (the two are exchangeable); [*lo, *hi] are the 2.5th and
   97.5th percentiles of the median of n draws from it, over
   STATS_BOOTSTRAP resamples (fixed seed).  A column whose stats_ratio
   lies inside is not measurably different from column 0 in this run.
   False (band unset) with fewer than 3 paired repetitions. */
#define STATS_BOOTSTRAP 2000
bool stats_noise_band(const stats_metric *m, int twin, double *lo, double *hi);
/* median(col) / median(0): the ratio the tables show, consistent with the
   medians beside it. */
double stats_ratio_of_medians(const stats_metric *m, int col);
/* Column 0's advantage over col in repetition rep: v[col] / v[0] when lower
   is better, v[0] / v[col] when higher is, so that above 1 always means
   column 0 was better; NaN unless both have a positive sample there. */
double stats_advantage(const stats_metric *m, int col, int rep);
/* A ratio as the tables show it: "1.23x", "12.3x", "123x", or "-" for NaN. */
void stats_format_ratio(char *buf, size_t n, double r);

/* Print every metric of group as a Markdown table, one column per name
   in cols (ncols of them), each cell "median (ratio of medians x)". */
void stats_print_table(FILE *out, const stats *s, const char *group,
                       const char *const *cols, int ncols);
/* The whole run as JSON: header (already-formatted JSON members, no
   trailing comma), then the metrics. */
void stats_write_json(FILE *out, const stats *s, const char *header,
                      const char *const *queue_cols, int nqueue_cols,
                      const char *const *heap_cols, int nheap_cols);
/* gnuplot data: one line per depth of the insert scenario, median
   per-producer ns/op per column, for the given producer count. */
void stats_write_plot_data(FILE *out, const stats *s, int producers,
                           const char *const *cols, int ncols);

#endif /* BENCH_STATS_H */
