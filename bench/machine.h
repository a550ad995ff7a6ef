/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/machine.h: what the benchmark programs print about the machine
 * they ran on (the CPU model and how busy the shared machine was), and
 * the thread CPU clock they measure with.
 *
 * Thread contract: none; bench_thread_cpu_ns from any thread, the others
 * from the programs' main threads.
 */
#ifndef BENCH_MACHINE_H
#define BENCH_MACHINE_H

#include <stddef.h>
#include <stdint.h>

/* The "model name" of /proc/cpuinfo, or "unknown". */
void bench_cpu_model(char *buf, size_t n);
/* The 1-minute load average, NaN if unknown. */
double bench_loadavg(void);
/* The calling thread's CPU time in ns: what a measurement costs without
   the time other processes of the shared machine ran instead. */
int64_t bench_thread_cpu_ns(void);

#endif /* BENCH_MACHINE_H */
