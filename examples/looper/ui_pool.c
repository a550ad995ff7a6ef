/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A worker pool reporting to a UI-like looper.
 *
 * The "UI" thread runs dq_loop on its queue and owns the UI state (plain
 * fields: only that thread touches them).  Worker threads compute jobs and
 * hand each result to the UI with dq_invoke; now and then a worker asks
 * the UI for its progress with dq_call, which runs the question on the UI
 * thread and waits for the answer (a timeout bounds the wait).  A
 * repeating post ticks on the UI every few milliseconds, redraws, and,
 * once every result is in, cancels itself and quits the UI safely.
 *
 * Exit status 0 when every result arrived once, the tick ran and stopped,
 * and every query answered; 1 otherwise.
 */
#define _GNU_SOURCE
#include <deliqueue/deliqueue.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define WORKERS          4
#define JOBS_PER_WORKER  500
#define JOBS             (WORKERS * JOBS_PER_WORKER)
#define TICK_NS          (2 * 1000000)              /* 2 ms */
#define QUERY_TIMEOUT_NS (INT64_C(10) * 1000000000) /* 10 s */

/* -- UI state: touched on the UI thread only ------------------------------ */
static struct {
    dq_queue *q;
    int done[JOBS]; /* results received per job */
    int completed;
    long long sum;
    int ticks;
    dq_token tick;
    bool off_thread; /* a callback ran where dq_current() is not the UI */
} ui;

static _Atomic int failures;

static void fail(const char *what)
{
    fprintf(stderr, "ui_pool: %s\n", what);
    atomic_fetch_add(&failures, 1);
}

static void check_on_ui(void)
{
    if (dq_current() != ui.q || !dq_is_consumer(ui.q))
        ui.off_thread = true;
}

/* A worker's result, run on the UI thread (dq_invoke). */
typedef struct result {
    int job;
    long long value;
} result;

static void on_result(void *ctx)
{
    result *r = ctx;
    check_on_ui();
    ui.done[r->job]++;
    ui.completed++;
    ui.sum += r->value;
    free(r);
}

/* The periodic tick (dq_post_repeating): redraw; once everything is in,
   stop ticking and quit once the queue has drained. */
static void on_tick(dq_msg *m)
{
    (void)m;
    check_on_ui();
    ui.ticks++;
    if (ui.completed == JOBS) {
        if (dq_cancel(ui.q, ui.tick) != 0) /* inside its own delivery */
            fail("cancelling the tick");
        dq_quit_safely(ui.q);
    }
}

/* The query (dq_call): read UI state on the UI thread. */
static void read_progress(void *ctx)
{
    check_on_ui();
    *(int *)ctx = ui.completed;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg, last_seen = 0;
    for (int i = 0; i < JOBS_PER_WORKER; i++) {
        result *r = malloc(sizeof(*r));
        if (r == NULL) {
            fail("malloc");
            return NULL;
        }
        r->job = id * JOBS_PER_WORKER + i;
        r->value = (long long)r->job * r->job; /* the "work" */
        if (dq_invoke(ui.q, on_result, r) != 0) {
            fail("dq_invoke");
            free(r);
            return NULL;
        }
        if (i % 100 == 99) {
            int seen = -1;
            int rc = dq_call(ui.q, read_progress, &seen, QUERY_TIMEOUT_NS);
            /* dq_call returns after read_progress ran: its write is ours */
            if (rc != 0 || seen < last_seen || seen > JOBS)
                fail("a progress query");
            last_seen = seen;
        }
    }
    return NULL;
}

static void *ui_main(void *arg)
{
    (void)arg;
    if (dq_loop(ui.q) != 0)
        fail("dq_loop");
    return NULL;
}

int main(void)
{
    static const char tick_target[] = "tick";
    ui.q = dq_create(NULL);
    if (ui.q == NULL) {
        perror("dq_create");
        return 1;
    }
    dq_msg tick = { .target = tick_target, .callback = on_tick };
    if (dq_post_repeating(ui.q, &tick, dq_now() + TICK_NS, TICK_NS, DQ_FIXED_RATE,
                          &ui.tick) != 0) {
        fprintf(stderr, "dq_post_repeating failed\n");
        return 1;
    }
    pthread_t ui_thread, workers[WORKERS];
    pthread_create(&ui_thread, NULL, ui_main, NULL);
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&workers[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(workers[i], NULL);
    pthread_join(ui_thread, NULL); /* the tick quits it */

    long long want = 0;
    for (int j = 0; j < JOBS; j++) {
        want += (long long)j * j;
        if (ui.done[j] != 1)
            fail("a result lost or repeated");
    }
    if (ui.completed != JOBS || ui.sum != want)
        fail("the results do not add up");
    if (ui.ticks < 1)
        fail("the tick never ran");
    if (dq_cancel(ui.q, ui.tick) != -ENOENT)
        fail("the tick outlived its cancel");
    if (ui.off_thread)
        fail("a callback ran off the UI thread");
    if (dq_current() != NULL)
        fail("the main thread has a current queue");
    dq_unref(ui.q);
    int bad = atomic_load(&failures);
    printf("ui_pool: %d results, %d ticks, %s\n", JOBS, ui.ticks,
           bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}
