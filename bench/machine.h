/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/machine.h: what the benchmark programs print about the machine
 * they ran on (the CPU model, how busy the shared machine was, and how
 * often it interrupts a busy CPU), and the thread CPU clock they measure
 * with.
 *
 * Thread contract: none; bench_now and bench_thread_cpu_ns from any
 * thread, the others from the programs' main threads.
 */
#ifndef BENCH_MACHINE_H
#define BENCH_MACHINE_H

#include <stddef.h>
#include <stdint.h>

/* The "model name" of /proc/cpuinfo, or "unknown". */
void bench_cpu_model(char *buf, size_t n);
/* The 1-minute load average, NaN if unknown. */
double bench_loadavg(void);
/* CLOCK_MONOTONIC nanoseconds, the same clock as dq_now(). */
int64_t bench_now(void);
/* The median of v[0..n) (n >= 1); sorts v in place. */
double bench_median(double *v, int n);
/* The calling thread's CPU time in ns: what a measurement costs without
   the time other processes of the shared machine ran instead. */
int64_t bench_thread_cpu_ns(void);

/* How much of a busy CPU's time the machine takes for itself.  A thread
   pinned to each online CPU (at most BENCH_PROBE_MAX_CPUS) reads the
   monotonic clock for `seconds`; a gap of over 1 us between two reads is
   an interruption (a timer tick, an IPI, the hypervisor running something
   else).  A message that meets one on its consumer's CPU waits it out, so
   these gaps make the latency tails: when they hold about 1% of the
   messages, a p99 lies on their edge and moves with the machine. */
#define BENCH_PROBE_MAX_CPUS 8
typedef struct bench_interruptions {
    int cpus;          /* probed */
    double per_second; /* gaps per second, all probed CPUs together */
    double lost_pct;   /* the largest share of one CPU's time in gaps */
    double median_us;  /* the median gap, over all of them */
} bench_interruptions;
/* 0, or -errno (no CPU could be probed: out->cpus is 0). */
int bench_probe_interruptions(double seconds, bench_interruptions *out);

#endif /* BENCH_MACHINE_H */
