/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A per-input watchdog for the fuzzers: an input that runs longer than
 * FUZZ_WATCHDOG_SECONDS is a hang (a cycle in the stack, a lost wake-up),
 * reported and aborted at once.  libFuzzer's own -timeout does this while
 * fuzzing; this also covers corpus replay in the other configs, where a
 * hang would otherwise wait for Bazel's test timeout.
 */
#ifndef DELIQUEUE_FUZZ_WATCHDOG_H
#define DELIQUEUE_FUZZ_WATCHDOG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef FUZZ_WATCHDOG_SECONDS
#define FUZZ_WATCHDOG_SECONDS 20
#endif

static _Atomic int64_t fuzz_watchdog_start; /* 0: no input running */

static int64_t fuzz_watchdog_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *fuzz_watchdog_main(void *arg)
{
    const char *name = arg;
    for (;;) {
        struct timespec nap = { 0, 100000000 };
        nanosleep(&nap, NULL);
        int64_t start = atomic_load(&fuzz_watchdog_start);
        if (start != 0 &&
            fuzz_watchdog_now() - start > (int64_t)FUZZ_WATCHDOG_SECONDS * 1000000000) {
            fprintf(stderr, "%s: one input has run for more than %d s: hang\n", name,
                    FUZZ_WATCHDOG_SECONDS);
            abort();
        }
    }
    return NULL;
}

static pthread_once_t fuzz_watchdog_once = PTHREAD_ONCE_INIT;
static const char *fuzz_watchdog_name;

static void fuzz_watchdog_spawn(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fuzz_watchdog_main, (void *)fuzz_watchdog_name) == 0)
        pthread_detach(t);
}

/* Call at the start and at the end of LLVMFuzzerTestOneInput. */
static void fuzz_watchdog_begin(const char *name)
{
    fuzz_watchdog_name = name;
    pthread_once(&fuzz_watchdog_once, fuzz_watchdog_spawn);
    atomic_store(&fuzz_watchdog_start, fuzz_watchdog_now());
}

static void fuzz_watchdog_end(void)
{
    atomic_store(&fuzz_watchdog_start, 0);
}

#endif /* DELIQUEUE_FUZZ_WATCHDOG_H */
