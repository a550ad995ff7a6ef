/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/machine.h: what the benchmark programs print about the machine
 * they ran on (the CPU model and how busy the shared machine was).
 *
 * Thread contract: none; called from the programs' main threads.
 */
#ifndef BENCH_MACHINE_H
#define BENCH_MACHINE_H

#include <stddef.h>

/* The "model name" of /proc/cpuinfo, or "unknown". */
void bench_cpu_model(char *buf, size_t n);
/* The 1-minute load average, NaN if unknown. */
double bench_loadavg(void);

#endif /* BENCH_MACHINE_H */
