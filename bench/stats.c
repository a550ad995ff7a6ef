/* SPDX-License-Identifier: Apache-2.0 */
#include "bench/stats.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

stats_metric *stats_metric_get(stats *s, const char *group, const char *scenario,
                               const char *name, const char *unit, bool higher_better,
                               long depth, int producers)
{
    for (int i = 0; i < s->nmetrics; i++) {
        stats_metric *m = &s->m[i];
        if (!strcmp(m->group, group) && !strcmp(m->scenario, scenario) &&
            !strcmp(m->name, name))
            return m;
    }
    if (s->nmetrics == STATS_MAX_METRICS) {
        fprintf(stderr, "queue_bench: too many metrics\n");
        exit(2);
    }
    stats_metric *m = &s->m[s->nmetrics++];
    memset(m, 0, sizeof(*m));
    m->group = group;
    m->scenario = scenario;
    snprintf(m->name, sizeof(m->name), "%s", name);
    m->unit = unit;
    m->higher_better = higher_better;
    m->depth = depth;
    m->producers = producers;
    return m;
}

void stats_put(stats_metric *m, int col, int rep, double value)
{
    if (col < 0 || col >= STATS_MAX_COLS || rep < 0 || rep >= STATS_MAX_REPS)
        return;
    m->v[col][rep] = value;
    m->have[col][rep] = true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *xs, int n)
{
    if (n == 0)
        return NAN;
    qsort(xs, (size_t)n, sizeof(*xs), cmp_double);
    return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

double stats_median(const stats_metric *m, int col)
{
    double xs[STATS_MAX_REPS];
    int n = 0;
    for (int r = 0; r < STATS_MAX_REPS; r++)
        if (m->have[col][r])
            xs[n++] = m->v[col][r];
    return median_of(xs, n);
}

double stats_ratio(const stats_metric *m, int col)
{
    double xs[STATS_MAX_REPS];
    int n = 0;
    for (int r = 0; r < STATS_MAX_REPS; r++)
        if (m->have[col][r] && m->have[0][r] && m->v[0][r] > 0)
            xs[n++] = m->v[col][r] / m->v[0][r];
    return median_of(xs, n);
}

bool stats_noise_band(const stats_metric *m, int twin, double *lo, double *hi)
{
    /* The twin and column 0 are the same code, so which of the two is the
       numerator is arbitrary: each repetition gives its log ratio with
       both signs, and the band is centred on 1 by construction rather
       than on this run's draw of the twin's median. */
    double logs[2 * STATS_MAX_REPS], meds[STATS_BOOTSTRAP];
    int n = 0;
    for (int r = 0; r < STATS_MAX_REPS; r++)
        if (m->have[twin][r] && m->have[0][r] && m->v[0][r] > 0 && m->v[twin][r] > 0) {
            double l = log(m->v[twin][r] / m->v[0][r]);
            logs[2 * n] = l;
            logs[2 * n + 1] = -l;
            n++;
        }
    if (n < 3)
        return false;
    /* a fixed seed: the same samples always give the same band */
    uint64_t rng = 0x9e3779b97f4a7c15u;
    for (int b = 0; b < STATS_BOOTSTRAP; b++) {
        double pick[STATS_MAX_REPS];
        for (int i = 0; i < n; i++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            pick[i] = logs[(rng >> 33) % (uint64_t)(2 * n)];
        }
        meds[b] = median_of(pick, n);
    }
    qsort(meds, STATS_BOOTSTRAP, sizeof(meds[0]), cmp_double);
    *lo = exp(meds[STATS_BOOTSTRAP / 40]);                       /* 2.5th percentile */
    *hi = exp(meds[STATS_BOOTSTRAP - 1 - STATS_BOOTSTRAP / 40]); /* 97.5th */
    return true;
}

double stats_ratio_of_medians(const stats_metric *m, int col)
{
    double base = stats_median(m, 0);
    return base > 0 ? stats_median(m, col) / base : NAN;
}

double stats_advantage(const stats_metric *m, int col, int rep)
{
    if (rep < 0 || rep >= STATS_MAX_REPS || !m->have[0][rep] || !m->have[col][rep])
        return NAN;
    double base = m->v[0][rep], other = m->v[col][rep];
    if (!(base > 0) || !(other > 0))
        return NAN;
    return m->higher_better ? base / other : other / base;
}

/* Three significant digits, without exponents for the usual ranges. */
static void fmt_value(char *buf, size_t n, double v)
{
    double a = fabs(v);
    if (isnan(v))
        snprintf(buf, n, "-");
    else if (a >= 1000)
        snprintf(buf, n, "%.0f", v);
    else if (a >= 100)
        snprintf(buf, n, "%.0f", v);
    else if (a >= 10)
        snprintf(buf, n, "%.1f", v);
    else if (a >= 1)
        snprintf(buf, n, "%.2f", v);
    else
        snprintf(buf, n, "%.3f", v);
}

void stats_format_ratio(char *buf, size_t n, double r)
{
    if (isnan(r))
        snprintf(buf, n, "-");
    else if (r >= 100)
        snprintf(buf, n, "%.0fx", r);
    else if (r >= 10)
        snprintf(buf, n, "%.1fx", r);
    else
        snprintf(buf, n, "%.2fx", r);
}

void stats_print_table(FILE *out, const stats *s, const char *group,
                       const char *const *cols, int ncols)
{
    int rows = 0;
    for (int i = 0; i < s->nmetrics; i++)
        rows += !strcmp(s->m[i].group, group);
    if (rows == 0) {
        fprintf(out, "(not run)\n");
        return;
    }
    fprintf(out, "| metric | unit |");
    for (int c = 0; c < ncols; c++)
        fprintf(out, " %s |", cols[c]);
    fprintf(out, "\n|---|---|");
    for (int c = 0; c < ncols; c++)
        fprintf(out, "---:|");
    fprintf(out, "\n");
    for (int i = 0; i < s->nmetrics; i++) {
        const stats_metric *m = &s->m[i];
        if (strcmp(m->group, group))
            continue;
        fprintf(out, "| %s | %s %s |", m->name, m->unit,
                m->higher_better ? "(higher better)" : "(lower better)");
        for (int c = 0; c < ncols; c++) {
            char v[32], r[32];
            fmt_value(v, sizeof(v), stats_median(m, c));
            if (c == 0 || isnan(stats_median(m, c))) {
                fprintf(out, " %s |", v);
                continue;
            }
            stats_format_ratio(r, sizeof(r), stats_ratio_of_medians(m, c));
            fprintf(out, " %s (%s) |", v, r);
        }
        fprintf(out, "\n");
    }
}

static void json_number(FILE *out, double v)
{
    if (isnan(v) || isinf(v))
        fprintf(out, "null");
    else
        fprintf(out, "%.6g", v);
}

static void json_columns(FILE *out, const stats_metric *m, const char *const *cols,
                         int ncols)
{
    fprintf(out, "\"columns\": {");
    for (int c = 0; c < ncols; c++) {
        fprintf(out, "%s\n        \"%s\": {\"median\": ", c ? "," : "", cols[c]);
        json_number(out, stats_median(m, c));
        fprintf(out, ", \"ratio_to_%s\": ", cols[0]);
        json_number(out, stats_ratio_of_medians(m, c));
        fprintf(out, ", \"paired_ratio_to_%s\": ", cols[0]);
        json_number(out, stats_ratio(m, c));
        fprintf(out, ", \"samples\": [");
        bool first = true;
        for (int r = 0; r < STATS_MAX_REPS; r++) {
            if (!m->have[c][r])
                continue;
            fprintf(out, "%s", first ? "" : ", ");
            json_number(out, m->v[c][r]);
            first = false;
        }
        fprintf(out, "]}");
    }
    fprintf(out, "}");
}

void stats_write_json(FILE *out, const stats *s, const char *header,
                      const char *const *queue_cols, int nqueue_cols,
                      const char *const *heap_cols, int nheap_cols)
{
    fprintf(out, "{\n%s,\n  \"metrics\": [", header);
    for (int i = 0; i < s->nmetrics; i++) {
        const stats_metric *m = &s->m[i];
        bool heap = !strcmp(m->group, "heap");
        fprintf(out,
                "%s\n    {\"group\": \"%s\", \"scenario\": \"%s\", "
                "\"name\": \"%s\", \"unit\": \"%s\", \"better\": \"%s\", "
                "\"depth\": %ld, \"producers\": %d,\n      ",
                i ? "," : "", m->group, m->scenario, m->name, m->unit,
                m->higher_better ? "higher" : "lower", m->depth, m->producers);
        json_columns(out, m, heap ? heap_cols : queue_cols,
                     heap ? nheap_cols : nqueue_cols);
        fprintf(out, "}");
    }
    fprintf(out, "\n  ]\n}\n");
}

void stats_write_plot_data(FILE *out, const stats *s, int producers,
                           const char *const *cols, int ncols)
{
    fprintf(out,
            "# insert into a busy queue, %d producer(s): median CPU ns per "
            "insert per producer\ndepth",
            producers);
    for (int c = 0; c < ncols; c++)
        fprintf(out, " %s", cols[c]);
    fprintf(out, "\n");
    for (int i = 0; i < s->nmetrics; i++) {
        const stats_metric *m = &s->m[i];
        if (strcmp(m->scenario, "insert") || m->producers != producers ||
            strncmp(m->name, "insert cost", 11))
            continue;
        fprintf(out, "%ld", m->depth);
        for (int c = 0; c < ncols; c++) {
            double v = stats_median(m, c);
            if (isnan(v))
                fprintf(out, " NaN");
            else
                fprintf(out, " %.6g", v);
        }
        fprintf(out, "\n");
    }
}
