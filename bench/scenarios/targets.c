/* SPDX-License-Identifier: Apache-2.0 */
/*
 * targets: the ratios the benchmark exists to show, from this run's
 * medians, each with how it held repetition by repetition and the A/A band
 * of its metric.  Reported, never asserted.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/scenarios/scenario.h"

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
    int held, n;
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
    int twin;     /* the twin's column, -1 if none */
    int opponent; /* parity targets: the opponent's column; else -1 */
} target_aa;

/* One target line: `what`, the measured value (medians), the verdict of
   the medians, how it held by repetition, and the A/A band (ratios in the
   tables' sense: the twin's median / deliqueue's); inverted: the measured
   ratio is shown as 1 / advantage (a cost against the floor). */
static void target_line(const char *what, double measured, const char *shown, bool met,
                        target_reps t, bool inverted, target_aa aa)
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
    printf("| %s | %s | %d of %d (%s-%s) | %s | %s%s |\n", what, shown, t.held, t.n, lo,
           hi, band, met ? "met" : "MISSED",
           tie ? ", a tie (inside the A/A band)" : "");
}

void print_targets(void)
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
        snprintf(name, sizeof(name),
                 "insert at depth 100k, %d producer%s: >= 5000x faster than legacy", np,
                 np > 1 ? "s" : "");
        target_line(name, r, buf, r >= 5000, target_by_rep(m, &legacy, 1, 5000), false,
                    (target_aa){ m, twin, -1 });
    }
    m = find_metric("insert throughput, depth 10000, 2 producers");
    double r = m ? 1 / stats_ratio_of_medians(m, mutex_heap) : NAN;
    snprintf(buf, sizeof(buf), "deliqueue / mutex_heap = %.2fx", r);
    target_line("2-producer insert throughput (depth 10k) >= 3x mutex_heap", r, buf,
                r >= 3, target_by_rep(m, &mutex_heap, 1, 3), false,
                (target_aa){ m, twin, -1 });
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
    target_line("(also) 2-producer end-to-end throughput >= 3x mutex_heap", r, buf,
                r >= 3, target_by_rep(m, &mutex_heap, 1, 3), false,
                (target_aa){ m, twin, -1 });
    for (int np = 1; np <= 2; np++) {
        char name[96], what[96];
        snprintf(name, sizeof(name), "insert cost, depth 10000, %d producer%s", np,
                 np > 1 ? "s" : "");
        m = find_metric(name);
        r = m ? 1 / stats_ratio_of_medians(m, floor_) : NAN;
        snprintf(buf, sizeof(buf), "deliqueue / floor = %.2fx", r);
        snprintf(what, sizeof(what),
                 "push cost (depth 10k, %d producer%s) within 1.5x of the floor", np,
                 np > 1 ? "s" : "");
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
    static const struct {
        const char *kind, *how, *also;
        int np;
    } lat[] = {
        { "post", "paced", "", 1 },         { "post", "paced", "", 2 },
        { "post", "steady", "", 1 },        { "burst", "paced", "(also) ", 1 },
        { "burst", "paced", "(also) ", 2 },
    };
    for (size_t t = 0; t < sizeof(lat) / sizeof(lat[0]); t++) {
        const char *ps = lat[t].np > 1 ? "s" : "";
        char name[96], what[128];
        snprintf(name, sizeof(name),
                 "%s-to-delivery p99, %s, depth 10000, %d producer%s", lat[t].kind,
                 lat[t].how, lat[t].np, ps);
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
                 who_col >= 0 ? contenders[who_col]->name : "", worst,
                 m ? stats_median(m, 0) : NAN);
        snprintf(what, sizeof(what),
                 "%sp99 %s-to-delivery at depth 10k, %s, %d producer%s, lowest",
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
