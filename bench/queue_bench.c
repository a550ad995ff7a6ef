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
 * Scenarios (--scenarios, comma separated; default all), one file each in
 * bench/scenarios/, which says what it times:
 *   insert  inserts into a busy queue at depth D, 1 or 2 producers
 *   e2e     end to end at depth 10k: throughput, paced and steady latency
 *   remove  remove by criteria at depth D
 *   cancel  cancel by token at depth D
 *   heap    the consumer's heap with each comparator
 * This file is the driver: the flags, the order of the points (the
 * interleaving above), the run's header, the tables and the JSON.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <deliqueue/deliqueue.h>

#include "bench/contender.h"
#include "bench/machine.h"
#include "bench/scenarios/scenario.h"
#include "bench/stats.h"

#ifndef BENCH_COPTS
#define BENCH_COPTS "(unknown)"
#endif

/* Sized by their initializers: a count other than scenario.h's NCONTENDERS
   or NHEAPCOLS conflicts with its declarations there. */
const bench_contender
    *const
        contenders[] = {
            &bench_deliqueue,      &bench_legacy,       &bench_mutex_heap,
            &bench_ck_handoff,     &bench_urcu_handoff, &bench_floor,
            &bench_deliqueue_twin, /* the A/A control: never a target's opponent */
        };

const char *const heap_cols[] = { "branchless", "branchy", "andor", "wide",
                                  "branchless_twin" };

stats results;

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
    fprintf(
        stderr,
        "usage: %s [--quick] [--reps N] [--scenarios insert,e2e,remove,cancel,heap]\n"
        "          [--depths 1000,10000,100000] [--fill aged|sorted|random]\n"
        "          [--contenders deliqueue,legacy,...] [--json PATH] [--plot-data "
        "PREFIX]\n",
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
    cfg.contender_mask =
        cfg.contender_mask ? cfg.contender_mask | 1u : (1u << NCONTENDERS) - 1;
    char *sc = strdup(scenarios);
    for (char *tok = strtok(sc, ","); tok; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "insert"))
            cfg.run_insert = true;
        else if (!strcmp(tok, "e2e"))
            cfg.run_e2e = true;
        else if (!strcmp(tok, "remove"))
            cfg.run_remove = true;
        else if (!strcmp(tok, "cancel"))
            cfg.run_cancel = true;
        else if (!strcmp(tok, "heap"))
            cfg.run_heap = true;
        else
            return usage(argv[0]);
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
        printf(
            "- interruptions: with all %d CPUs busy, %.0f gaps of over 1 us a second "
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
           cfg.quick ? "--quick" : "full", cfg.reps,
           cfg.random_fill ? "random"
           : cfg.aged_fill ? "aged"
                           : "sorted");
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
                 "  \"machine\": {\"cpu\": \"%s\", \"cores\": %ld, \"kernel\": \"%s %s "
                 "%s\", "
                 "\"interruptions\": {\"cpus\": %d, \"per_second\": %.1f, "
                 "\"median_us\": %.2f, "
                 "\"lost_pct\": %.3f}},\n"
                 "  \"build\": {\"compiler\": \"%s\", \"optimized\": %s, \"ndebug\": "
                 "%s, \"copts\": \"%s\"},\n"
                 "  \"atomics\": \"%s\",\n"
                 "  \"run\": {\"quick\": %s, \"repetitions\": %d, \"fill\": \"%s\"}",
                 model, ncpu, un.sysname, un.release, un.machine, irq.cpus,
                 irq.cpus ? irq.per_second : 0.0, irq.cpus ? irq.median_us : 0.0,
                 irq.cpus ? irq.lost_pct : 0.0, __VERSION__,
                 optimized[0] == 'y' ? "true" : "false",
                 ndebug[0] == 'y' ? "true" : "false", BENCH_COPTS, dq_atomics(),
                 cfg.quick ? "true" : "false", cfg.reps,
                 cfg.random_fill ? "random"
                 : cfg.aged_fill ? "aged"
                                 : "sorted");
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
