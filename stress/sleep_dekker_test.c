/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sleep_dekker_test: the consumer's sleep and a producer's post are a
 * Dekker pair.  The consumer stores its sleep word and then re-reads the
 * stack's top; the producer pushes and then reads the sleep word.  Both
 * sides are seq_cst, so at least one sees the other.  With a weaker
 * store on the consumer's side, x86's store buffer lets the re-read pass
 * the store: the consumer finds no message, the producer finds it awake,
 * nobody wakes it, and the message waits for the consumer's deadline.
 *
 * The window is a store buffer's drain, a few nanoseconds, so the test
 * aims at it: the consumer never spins before sleeping (idle_spin_ns < 0),
 * and the producer posts each message a short, varying delay after it sees
 * the previous one delivered, sweeping the moment the consumer goes to
 * sleep.  A post that finds the consumer asleep wakes it before dq_post
 * returns, so from then on the consumer is runnable: a message still
 * undelivered while the consumer sits in state S (asleep in the kernel)
 * for SLEEP_CHECKS checks in a row is a lost wake-up, not a slow machine.
 *
 * Usage: sleep_dekker_test [--seconds=S] [--max-delay=N]
 * Exit 0 after S seconds (default 6) without a lost wake-up; 1 at the
 * first one; 2 on bad usage or a failed call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <deliqueue/deliqueue.h>

#define UNDELIVERED_NS (2 * 1000000)   /* then look at the consumer */
#define SLEEP_CHECKS   20              /* 1 ms apart, all asleep: lost */
#define NEXT_DEADLINE  (200 * 1000000) /* a lost wake-up ends by then */

static char target;
static dq_queue *q;
static _Atomic long delivered;
static _Atomic int consumer_tid;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void *consumer_main(void *arg)
{
    (void)arg;
    atomic_store(&consumer_tid, (int)syscall(SYS_gettid));
    for (;;) {
        dq_msg m;
        int err = dq_next_until(q, &m, now_ns() + NEXT_DEADLINE);
        if (err == -ETIMEDOUT)
            continue;
        if (err != 0 || m.arg1 < 0)
            return NULL;
        /* release: the producer's acquire load sees the delivery */
        atomic_store_explicit(&delivered, m.arg1, memory_order_release);
    }
}

/* The consumer thread's scheduler state ('S': asleep), from procfs. */
static char thread_state(int tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return '?';
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *end = strrchr(buf, ')'); /* the name may hold spaces */
    return end != NULL && end[1] == ' ' ? end[2] : '?';
}

static long delivered_now(void)
{
    /* acquire: pairs with the consumer's release */
    return atomic_load_explicit(&delivered, memory_order_acquire);
}

int main(int argc, char **argv)
{
    double seconds = 6;
    unsigned max_delay = 250;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--seconds=", 10) == 0)
            seconds = atof(argv[i] + 10);
        else if (strncmp(argv[i], "--max-delay=", 12) == 0)
            max_delay = (unsigned)atoi(argv[i] + 12);
        else {
            fprintf(stderr, "usage: sleep_dekker_test [--seconds=S] [--max-delay=N]\n");
            return 2;
        }
    }
    if (seconds <= 0 || max_delay == 0) {
        fprintf(stderr, "sleep_dekker_test: --seconds > 0, --max-delay > 0\n");
        return 2;
    }
    dq_options o;
    memset(&o, 0, sizeof(o));
    o.idle_spin_ns = -1; /* every idle transition sleeps at once */
    q = dq_create(&o);
    if (q == NULL) {
        perror("dq_create");
        return 2;
    }
    pthread_t consumer;
    if (pthread_create(&consumer, NULL, consumer_main, NULL) != 0)
        return 2;
    while (atomic_load(&consumer_tid) == 0)
        ;
    int tid = atomic_load(&consumer_tid);
    int64_t end = now_ns() + (int64_t)(seconds * 1e9);
    unsigned seed = 1;
    long posts = 0, slow = 0;
    int rc = 0;
    while (rc == 0 && now_ns() < end) {
        posts++;
        while (delivered_now() != posts - 1)
            ;
        /* a delay of 0 .. max_delay empty loop turns: the sweep */
        unsigned delay = (unsigned)rand_r(&seed) % max_delay;
        for (volatile unsigned k = 0; k < delay; k++)
            ;
        dq_msg m = { .target = &target, .arg1 = (int32_t)posts };
        if (dq_post(q, &m, NULL) != 0) {
            fprintf(stderr, "sleep_dekker_test: dq_post failed\n");
            rc = 2;
            break;
        }
        int64_t posted = now_ns();
        int asleep = 0;
        bool late = false;
        while (delivered_now() != posts) {
            if (now_ns() - posted < UNDELIVERED_NS)
                continue;
            slow += !late;
            late = true;
            if (thread_state(tid) != 'S') {
                asleep = 0;
                usleep(100);
                continue;
            }
            if (++asleep == SLEEP_CHECKS) {
                fprintf(stderr,
                        "sleep_dekker_test: lost wake-up: post %ld (delay %u) "
                        "undelivered while the consumer slept for %d ms\n",
                        posts, delay, SLEEP_CHECKS);
                rc = 1;
                break;
            }
            usleep(1000);
        }
    }
    while (rc == 1 && delivered_now() != posts)
        ; /* the consumer's deadline delivers it */
    dq_msg stop = { .target = &target, .arg1 = -1 };
    if (dq_post(q, &stop, NULL) != 0)
        rc = 2;
    pthread_join(consumer, NULL);
    dq_unref(q);
    printf("sleep_dekker_test: %ld posts, %ld slow, %s\n", posts, slow,
           rc == 0   ? "no lost wake-up"
           : rc == 1 ? "a lost wake-up"
                     : "failed");
    return rc;
}
