/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/contender.h: the one interface every queue in the benchmark is
 * driven through, so that the scenarios (bench/scenarios/) are written once
 * and the contenders differ only where they truly differ.
 *
 * Who may call what concurrently (for every contender)
 * ----------------------------------------------------
 *   role       operations                     may race with
 *   producer   post_at, producer_prepare       producers, consumer
 *   consumer   try_next, next_until            producers
 *   remover    cancel, remove                  see caps below
 *   owner      create, destroy                 nothing
 *
 * The first thread that calls a consumer operation is the consumer for the
 * queue's whole life (deliqueue and legacy enforce it with -EPERM).
 *
 * Benchmark-only contract of the baselines (mutex_heap, ck, urcu, floor):
 * a token passed to cancel must name a message that is still pending and is
 * not being delivered concurrently (the baselines have no safe memory
 * reclamation; the scenarios only cancel far-future messages).  deliqueue
 * and legacy have their full public contracts.
 */
#ifndef BENCH_CONTENDER_H
#define BENCH_CONTENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <deliqueue/deliqueue.h>

#include "bench/machine.h" /* bench_now, the contenders' clock */

/* bench_contender.caps */
#define BENCH_CONSUMES      1u /* has a consumer side (try_next, next_until) */
#define BENCH_REMOVE_ANY    2u /* cancel/remove from any thread */
#define BENCH_REMOVE_LOOPER 4u /* cancel/remove only on the consumer thread */

typedef struct bench_contender {
    const char *name;   /* short id used in tables and JSON */
    const char *design; /* one line: what it is */
    unsigned caps;
    /* owner: NULL on failure */
    void *(*create)(void);
    /* owner: drops (frees) everything pending */
    void (*destroy)(void *q);
    /* producer, untimed: called once by each producer thread before a timed
       run of at most n posts (the floor preallocates its nodes here); may
       be NULL */
    void (*producer_prepare)(void *q, size_t n);
    /* producer: 0 or negative errno; *tok may be NULL */
    int (*post_at)(void *q, const dq_msg *m, int64_t when, dq_token *tok);
    /* consumer: absorbs everything posted so far; 0 and *out delivered, or
       -EAGAIN when nothing is due */
    int (*try_next)(void *q, dq_msg *out);
    /* consumer: blocks until a message is due or deadline (-ETIMEDOUT) */
    int (*next_until)(void *q, dq_msg *out, int64_t deadline);
    /* remover (see caps): 0 or -ENOENT */
    int (*cancel)(void *q, dq_token tok);
    /* remover (see caps): number removed */
    size_t (*remove)(void *q, const dq_match *m);
} bench_contender;

extern const bench_contender bench_deliqueue;
extern const bench_contender bench_legacy;
extern const bench_contender bench_mutex_heap;
extern const bench_contender bench_ck_handoff;
extern const bench_contender bench_urcu_handoff;
extern const bench_contender bench_floor;
extern const bench_contender bench_deliqueue_twin; /* the A/A control */

#endif /* BENCH_CONTENDER_H */
