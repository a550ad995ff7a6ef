/* SPDX-License-Identifier: Apache-2.0 */
/* bench/machine.c: see machine.h. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/machine.h"

void bench_cpu_model(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *v = strchr(line, ':');
            if (v) {
                v++;
                while (*v == ' ' || *v == '\t')
                    v++;
                v[strcspn(v, "\n")] = 0;
                snprintf(buf, n, "%s", v);
            }
            break;
        }
    }
    fclose(f);
}

double bench_loadavg(void)
{
    double l = NAN;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = NAN;
        fclose(f);
    }
    return l;
}

int64_t bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int64_t bench_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define PROBE_GAP_NS   1000
#define PROBE_MAX_GAPS 65536

typedef struct probe_cpu {
    int64_t ns; /* the probe's span */
    int64_t seconds_ns;
    int64_t lost_ns; /* in gaps */
    long ngaps;      /* all of them; the first PROBE_MAX_GAPS kept */
    int64_t *gaps;
} probe_cpu;

static void *probe_cpu_main(void *arg)
{
    probe_cpu *p = arg;
    int64_t t0 = bench_now(), prev = t0, end = t0 + p->seconds_ns;
    for (;;) {
        int64_t t = bench_now();
        if (t - prev > PROBE_GAP_NS) {
            if (p->ngaps < PROBE_MAX_GAPS)
                p->gaps[p->ngaps] = t - prev;
            p->ngaps++;
            p->lost_ns += t - prev;
        }
        prev = t;
        if (t >= end)
            break;
    }
    p->ns = prev - t0;
    return NULL;
}

static int cmp_gap(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int bench_probe_interruptions(double seconds, bench_interruptions *out)
{
    memset(out, 0, sizeof(*out));
    out->per_second = out->lost_pct = out->median_us = NAN;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int ncpus = online < 1                      ? 1
                : online > BENCH_PROBE_MAX_CPUS ? BENCH_PROBE_MAX_CPUS
                                                : (int)online;
    probe_cpu p[BENCH_PROBE_MAX_CPUS];
    pthread_t t[BENCH_PROBE_MAX_CPUS];
    bool started[BENCH_PROBE_MAX_CPUS] = { false };
    int err = 0;
    for (int i = 0; i < ncpus; i++) {
        p[i] = (probe_cpu){ .seconds_ns = (int64_t)(seconds * 1e9) };
        p[i].gaps = malloc(PROBE_MAX_GAPS * sizeof(int64_t));
        if (p[i].gaps == NULL) {
            err = -ENOMEM;
            continue;
        }
        /* every CPU busy at once, each probe on its own: the state the
           benchmarks run in */
        pthread_attr_t attr;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(i, &set);
        pthread_attr_init(&attr);
        pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
        int e = pthread_create(&t[i], &attr, probe_cpu_main, &p[i]);
        pthread_attr_destroy(&attr);
        if (e)
            err = -e;
        else
            started[i] = true;
    }
    long total = 0, kept = 0;
    double seconds_run = 0;
    for (int i = 0; i < ncpus; i++) {
        if (!started[i])
            continue;
        pthread_join(t[i], NULL);
        out->cpus++;
        total += p[i].ngaps;
        seconds_run = p[i].ns / 1e9 > seconds_run ? p[i].ns / 1e9 : seconds_run;
        double pct = p[i].ns > 0 ? 100.0 * (double)p[i].lost_ns / (double)p[i].ns : NAN;
        if (isnan(out->lost_pct) || pct > out->lost_pct)
            out->lost_pct = pct;
    }
    int64_t *all = malloc((size_t)(total > 0 ? total : 1) * sizeof(int64_t));
    for (int i = 0; all != NULL && i < ncpus; i++) {
        if (!started[i])
            continue;
        long k = p[i].ngaps < PROBE_MAX_GAPS ? p[i].ngaps : PROBE_MAX_GAPS;
        memcpy(all + kept, p[i].gaps, (size_t)k * sizeof(int64_t));
        kept += k;
    }
    for (int i = 0; i < ncpus; i++)
        free(p[i].gaps);
    if (out->cpus == 0) {
        free(all);
        return err ? err : -EINVAL;
    }
    out->per_second = seconds_run > 0 ? (double)total / seconds_run : NAN;
    if (all != NULL && kept > 0) {
        qsort(all, (size_t)kept, sizeof(int64_t), cmp_gap);
        out->median_us = (double)all[kept / 2] / 1e3;
    } else if (kept == 0) {
        out->median_us = 0;
    }
    free(all);
    return 0;
}
