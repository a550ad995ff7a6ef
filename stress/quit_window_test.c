/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quit_window_test: a remover that is inside the queue when it quits must
 * finish using the queue's internals before the teardown frees them.
 *
 * The race is a window of a few instructions (the tagged user count
 * decremented, then the removal list touched), far too narrow for a stress
 * run to hit by chance, so this test holds it open on purpose:
 *
 *   1. a canceller posts a message and cancels it; its on_discard (which
 *      runs inside dq_cancel, while the canceller counts as a user) blocks;
 *   2. the main thread quits the queue; the consumer, in dq_next, starts the
 *      teardown and parks until the last user leaves;
 *   3. the canceller is released.  Leaving as the last user while quitting,
 *      it wakes the consumer (a futex wake), and this test's interposed
 *      syscall() then stalls the canceller for a while, so the teardown
 *      runs to its end (free) before the canceller takes its next step.
 *
 * A queue that leaves the user count last (correct) does nothing after the
 * wake.  One that leaves it early and then pushes onto the removal list
 * writes freed memory: ASan and TSan report it, and in plain builds this
 * test's free() keeps freed blocks poisoned and checks that nobody wrote to
 * them.  (dq_remove_sync_barrier shares the code path, claim_token, but has no
 * on_discard in which to hold the window open.)
 *
 * With the portable wait (DQ_WAIT_PTHREAD) the wake is a condition variable
 * and the stall never happens; the test still passes (it just proves less).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <deliqueue/deliqueue.h>

#include "stress/stress_util.h"

/* ---- the stall: interposed syscall() -------------------------------------- */

static _Thread_local bool tl_stall_after_wake;
static _Atomic int stalls;

typedef long (*syscall_fn)(long, ...);
static _Atomic(syscall_fn) real_syscall;

__attribute__((constructor)) static void find_real_syscall(void)
{
    atomic_store(&real_syscall, (syscall_fn)dlsym(RTLD_NEXT, "syscall"));
}

long syscall(long number, ...)
{
    /* set by the constructor, before any thread; the lazy path is for a
       call that comes even earlier */
    syscall_fn real = atomic_load(&real_syscall);
    if (real == NULL) {
        real = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
        atomic_store(&real_syscall, real);
    }
    va_list ap;
    va_start(ap, number);
    long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
    long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
    va_end(ap);
    long r = real(number, a1, a2, a3, a4, a5, a6);
    if (number == SYS_futex && (a2 & FUTEX_CMD_MASK) == FUTEX_WAKE &&
        tl_stall_after_wake) {
        atomic_fetch_add(&stalls, 1);
        nap_ms(100); /* the teardown now runs to its end */
    }
    return r;
}

/* ---- write-after-free detector for plain builds ------------------------------ */

#ifndef DQ_STRESS_SANITIZED
extern void __libc_free(void *p);
#define MAX_KEPT 256
static _Atomic bool keep_frees;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static void *kept[MAX_KEPT];
static size_t kept_size[MAX_KEPT];
static int n_kept;

void free(void *p)
{
    if (p != NULL && atomic_load(&keep_frees)) {
        size_t n = malloc_usable_size(p);
        pthread_mutex_lock(&kept_lock);
        if (n_kept < MAX_KEPT) {
            memset(p, 0xdd, n);
            kept[n_kept] = p;
            kept_size[n_kept++] = n;
            pthread_mutex_unlock(&kept_lock);
            return;
        }
        pthread_mutex_unlock(&kept_lock);
    }
    __libc_free(p);
}

/* Returns how many kept blocks were written after they were freed. */
static int release_kept(void)
{
    atomic_store(&keep_frees, false);
    int bad = 0;
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < n_kept; i++) {
        const unsigned char *b = kept[i];
        for (size_t j = 0; j < kept_size[i]; j++)
            if (b[j] != 0xdd) {
                fprintf(stderr,
                        "quit_window_test: block %p (%zu bytes) written at +%zu "
                        "after it was freed\n",
                        kept[i], kept_size[i], j);
                bad++;
                break;
            }
        __libc_free(kept[i]);
    }
    n_kept = 0;
    pthread_mutex_unlock(&kept_lock);
    return bad;
}
#else
static _Atomic bool keep_frees;
static int release_kept(void)
{
    return 0;
}
#endif

/* ---- the scenario -------------------------------------------------------------- */

static dq_queue *q;
static _Atomic int phase; /* 1: canceller inside on_discard; 2: release it */
static int target;

static void on_discard(const dq_msg *m, void *ctx)
{
    (void)m;
    (void)ctx;
    if (!tl_stall_after_wake)
        return;
    atomic_store(&phase, 1);
    while (atomic_load(&phase) != 2)
        nap_ms(1);
}

static void *consumer_main(void *arg)
{
    (void)arg;
    dq_msg out;
    int err;
    while ((err = dq_next(q, &out)) == 0)
        ;
    if (err != -ESHUTDOWN)
        fprintf(stderr, "quit_window_test: dq_next returned %d\n", err);
    return NULL;
}

static void *canceller_main(void *arg)
{
    (void)arg;
    tl_stall_after_wake = true;
    dq_msg m = { .target = &target };
    dq_token t;
    if (dq_post_delayed(q, &m, 1000000000, &t) != 0) {
        fprintf(stderr, "quit_window_test: post failed\n");
        exit(1);
    }
    if (dq_cancel(q, t) != 0)
        fprintf(stderr, "quit_window_test: cancel failed\n");
    return NULL;
}

static int run(void)
{
    atomic_store(&phase, 0);
    atomic_store(&stalls, 0);
    dq_options o = { .on_discard = on_discard };
    q = dq_create(&o);
    if (q == NULL)
        return 1;
    pthread_t consumer, canceller;
    pthread_create(&consumer, NULL, consumer_main, NULL);
    nap_ms(20); /* the consumer is asleep in dq_next */
    pthread_create(&canceller, NULL, canceller_main, NULL);
    while (atomic_load(&phase) != 1)
        nap_ms(1);
    atomic_store(&keep_frees, true);
    /* the canceller is a user, blocked inside dq_cancel */
    dq_quit(q);
    nap_ms(50); /* the consumer is parked in the teardown */
    atomic_store(&phase, 2);
    pthread_join(canceller, NULL);
    pthread_join(consumer, NULL);
    int bad = release_kept();
    dq_unref(q);
    q = NULL;
    printf("quit_window_test: %d stall(s), %d block(s) written after free\n",
           atomic_load(&stalls), bad);
    return bad != 0;
}

int main(void)
{
    int bad = 0;
    for (int i = 0; i < 3; i++)
        bad |= run();
    if (bad) {
        printf("quit_window_test: FAIL: the queue was used after its teardown\n");
        return 1;
    }
    printf("quit_window_test: pass\n");
    return 0;
}
