/* SPDX-License-Identifier: Apache-2.0 */
/*
 * push_decomp: where a post's cost goes, step by step from the floor up to
 * dq_post_at, so that "push within 1.5x of the floor" can be read against
 * what each step costs on this machine.  Prints ratios.
 *
 * Every case pushes ROUND_PUSHES nodes onto one atomic list top with the
 * same CAS loop as bench/contenders/floor.c; it differs from the previous
 * case in one thing:
 *
 *   floor            64-byte nodes the producer itself touched last, and
 *                    only `next` is written (contender 6, the floor)
 *   +copy, 1 line    the 56-byte message is copied too: node = next + msg,
 *                    one cache line
 *   +copy, 2 lines   next, state, owner, msg, due over two lines of a
 *                    192-byte node (dq_node's producer half until the
 *                    payload was packed into line 0)
 *   +recycled        the same nodes, but between rounds a consumer thread
 *                    reads every message and writes one word in each line
 *                    (a looper's delivery, generation bump and pool link),
 *                    so each line the producer writes was last written on
 *                    the other core, as a queue's recycled nodes are
 *   +prefetch        the same, prefetching node i + 7 for write (what the
 *                    pool does, with the same dq_arch_prefetch_for_write)
 *   1 line recycled  +copy, 1 line, recycled and prefetched: dq_node's
 *                    layout now (its producer half is line 0)
 *   +scattered       dq_node's memory without its code: 128-byte nodes
 *                    picked at random from a region of 11k (the background
 *                    and the round), line 0 written, taken in the order of
 *                    an array and prefetched 7 ahead; between rounds the
 *                    consumer writes both lines of each (retire, pool
 *                    link), as a looper does
 *   +48 moves        from +scattered: 48 independent register moves per
 *                    post, no memory access.  On x86 the locked CAS lets no
 *                    other instruction of the loop overlap it, so a post
 *                    costs the CAS plus its instruction count; this row
 *                    prices instructions (dq_post_at's path has ~65, the
 *                    synthetic steps ~20)
 *   +owner read      the same, and the post reads line 1 (the owner)
 *   +address order   the same nodes, taken in address order (as the pool's
 *                    free map hands them out: the lowest free nodes of a
 *                    64-node word first), with the owner
 *                    read: the library's memory now
 *   +pool chain      from +owner read: the next node is found through a
 *     through line 1 link in line 1 of the current one (with a hint to the
 *                    node 7 ahead for the prefetch), a chain of
 *                    batches, which the free map replaced
 *   +pool chain      from +scattered: the link and the hint are in line 0
 *     in line 0      (over the dead next and due) and line 1 is not read;
 *                    the pool does not chain through next, where a chain
 *                    hides a lost node from the out-of-memory test
 *   dq_post_at       deliqueue itself: 10k far-future background messages;
 *                    between rounds its looper thread removes the round's
 *                    messages and sweeps (as queue_bench's insert rounds)
 *
 * The consumer thread sleeps (on a semaphore) while the producer's round
 * runs, as queue_bench's consumer does between insert rounds: a consumer
 * spinning on the other core would share the machine with the producer
 * (on a KVM guest its vCPU may be the producer's hyperthread sibling),
 * and it made the same synthetic step cost 1.4x the floor in one run and
 * 3.5x in the next.
 *
 * Cases run interleaved, one round each in turn, ROUNDS rounds; each cell
 * is the median over rounds of the producer's CPU ns per push.
 *
 * Usage: push_decomp [--rounds N]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <deliqueue/deliqueue.h>
#include <deliqueue_arch/cpu.h>

#include "bench/machine.h"

#define ROUND_PUSHES   1000
#define BACKGROUND     10000
#define PREFETCH_AHEAD 7

/* ---- the synthetic nodes ------------------------------------------------ */

typedef struct line_node { /* one line: next + message */
    _Alignas(64) struct line_node *next;
    dq_msg msg;
} line_node;

typedef struct wide_node { /* dq_node's old layout: producer half in lines 0-1 */
    _Alignas(64) struct wide_node *next;
    uint64_t state;
    void *owner;
    dq_msg msg;
    int64_t due;
    void *link;                   /* line 1: the pool's link */
    _Alignas(64) uint64_t looper; /* line 2: the looper's fields */
} wide_node;

typedef struct pool_node { /* dq_node's memory: line 0 written, line 1 read */
    _Alignas(64) struct pool_node *next; /* +pool chain in line 0: the chain */
    uint64_t state;
    union {
        int64_t due;
        struct pool_node *ahead0; /* +pool chain in line 0: the hint */
    };
    char payload[40];
    _Alignas(64) void *owner;   /* line 1: read by a post */
    struct pool_node *aux_next; /* the pool's chain */
    struct pool_node *ahead;    /* its prefetch hint */
    uint64_t looper[5];         /* the looper's fields */
} pool_node;

#define POOL_REGION (BACKGROUND + ROUND_PUSHES)

_Static_assert(sizeof(line_node) == 64, "one line");
_Static_assert(sizeof(pool_node) == 128, "dq_node's size");
_Static_assert(sizeof(wide_node) == 192, "the old dq_node's size");

static _Alignas(64) _Atomic(void *) top;

static inline void push(void *n, void **next_field)
{
    /* relaxed first read: the CAS validates it; release publishes the
       node as the floor (llist_add) and dq_post_at do (seq_cst there) */
    void *old = atomic_load_explicit(&top, memory_order_relaxed);
    do {
        *next_field = old;
    } while (!atomic_compare_exchange_weak_explicit(&top, &old, n, memory_order_seq_cst,
                                                    memory_order_relaxed));
}

/* ---- the recycler: another thread touching the nodes between rounds ---- */

typedef struct recycler {
    pthread_t thread;
    sem_t go, done;
    int job; /* 1 wide, 2 line, 3 deliqueue, 4 pool, -1 quit */
    wide_node *wide;
    line_node *line;
    pool_node *pool;                 /* POOL_REGION nodes */
    pool_node *picked[ROUND_PUSHES]; /* this round's, in pool order */
    dq_queue *q;
    uint64_t sum;
} recycler;

static int burst_target, background_target;

static void *recycler_main(void *arg)
{
    recycler *r = arg;
    for (;;) {
        /* the semaphores order the round's node writes both ways */
        sem_wait(&r->go);
        int job = r->job;
        if (job < 0)
            return NULL;
        if (job == 1) {
            for (int i = 0; i < ROUND_PUSHES; i++) {
                wide_node *n = &r->wide[i];
                r->sum += (uint64_t)n->msg.what + (uint64_t)n->due;
                n->state += 8; /* generation bump, line 0 */
                n->link = n;   /* pool link, line 1 */
                n->looper = 0; /* reset, line 2 */
            }
        } else if (job == 2) {
            for (int i = 0; i < ROUND_PUSHES; i++) {
                line_node *n = &r->line[i];
                r->sum += (uint64_t)n->msg.what;
                n->msg.flags = 0; /* any write: the line is ours now */
            }
        } else if (job == 4 || job == 5) {
            for (int i = 0; i < ROUND_PUSHES; i++) {
                pool_node *n = r->picked[i];
                pool_node *next = i + 1 < ROUND_PUSHES ? r->picked[i + 1] : NULL;
                pool_node *ahead = i + PREFETCH_AHEAD < ROUND_PUSHES
                                       ? r->picked[i + PREFETCH_AHEAD]
                                       : NULL;
                r->sum += (uint64_t)n->due;
                n->state += 8;    /* generation bump, line 0 */
                n->looper[0] = 0; /* the looper's reset, line 1 */
                if (job == 4) {   /* the pool's links in line 1 */
                    n->aux_next = next;
                    n->ahead = ahead;
                } else { /* in line 0 */
                    n->next = next;
                    n->ahead0 = ahead;
                }
            }
        } else {
            dq_match burst = { .target = &burst_target };
            dq_msg out;
            size_t removed = dq_remove(r->q, &burst);
            (void)dq_try_next(r->q, &out);
            r->sum += removed;
        }
        sem_post(&r->done);
    }
}

static void recycle(recycler *r, int job)
{
    r->job = job;
    sem_post(&r->go);
    if (job >= 0)
        sem_wait(&r->done);
}

/* The pool cases' post of node n, and its prefetch some nodes ahead; the
   owner (line 1) only when read_owner. */
static inline void prefetch_pool_node(const pool_node *n, bool read_owner)
{
    dq_arch_prefetch_for_write(n);
    if (read_owner)
        __builtin_prefetch(&n->owner, 0);
}

static inline void post_pool_node(pool_node *n, const dq_msg *m, int64_t due,
                                  bool read_owner)
{
    n->state = (n->state & ~(uint64_t)7) | 1;
    n->due = due;
    memcpy(n->payload, m, sizeof(n->payload));
    if (read_owner && n->owner != &top)
        n->owner = &top;
    push(n, (void **)&n->next);
}

/* 48 register moves with no dependency between them and no memory
   access: what an instruction costs next to the CAS. */
static inline void spend_48_instructions(uint64_t *sum)
{
#if defined(__x86_64__)
#define MOV8                                               \
    "mov $1,%0\n\tmov $2,%1\n\tmov $3,%2\n\tmov $4,%3\n\t" \
    "mov $5,%4\n\tmov $6,%5\n\tmov $7,%6\n\tmov $8,%7\n\t"
#elif defined(__aarch64__)
#define MOV8                                               \
    "mov %0,#1\n\tmov %1,#2\n\tmov %2,#3\n\tmov %3,#4\n\t" \
    "mov %4,#5\n\tmov %5,#6\n\tmov %6,#7\n\tmov %7,#8\n\t"
#endif
#ifdef MOV8
    uint64_t a, b, c, d, e, f, g, h;
    __asm__ volatile(MOV8 MOV8 MOV8 MOV8 MOV8 MOV8
                     : "=r"(a), "=r"(b), "=r"(c), "=r"(d), "=r"(e), "=r"(f), "=r"(g),
                       "=r"(h));
#undef MOV8
    *sum += a ^ h;
#else
    (void)sum;
#endif
}

/* This round's nodes of the pool case: ROUND_PUSHES distinct nodes of the
   region in random order (a partial Fisher-Yates shuffle). */
static void pick_pool_nodes(recycler *r, uint64_t *rng)
{
    static uint32_t idx[POOL_REGION];
    for (uint32_t i = 0; i < POOL_REGION; i++)
        idx[i] = i;
    for (uint32_t i = 0; i < ROUND_PUSHES; i++) {
        *rng = *rng * 6364136223846793005u + 1442695040888963407u;
        uint32_t j = i + (uint32_t)((*rng >> 33) % (POOL_REGION - i));
        uint32_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
        r->picked[i] = &r->pool[idx[i]];
    }
}

static int cmp_node_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (pool_node *const *)a,
              y = (uintptr_t) * (pool_node *const *)b;
    return (x > y) - (x < y);
}

/* The same draw, in address order: what the free map hands out. */
static void pick_pool_nodes_in_address_order(recycler *r, uint64_t *rng)
{
    pick_pool_nodes(r, rng);
    qsort(r->picked, ROUND_PUSHES, sizeof(r->picked[0]), cmp_node_address);
}

/* ---- the cases ----------------------------------------------------------- */

enum {
    FLOOR,
    COPY_LINE,
    COPY_WIDE,
    WIDE_RECYCLED,
    WIDE_PREFETCH,
    LINE_PREFETCH,
    SCATTERED,
    MOVES,
    OWNER_READ,
    ADDRESS_ORDER,
    POOL_CHAIN,
    LINE0_CHAIN,
    DELIQUEUE,
    NCASES
};
static const char *const case_name[NCASES] = {
    "floor (bare push, own nodes)",
    "+copy, 1 line",
    "+copy, 2 lines",
    "+recycled by the consumer",
    "+prefetch 7 ahead",
    "1 line, recycled, prefetch",
    "+scattered over 11k nodes",
    "+48 register moves",
    "+owner read in line 1",
    "+address order (free map)",
    "+pool chain through line 1",
    "+pool chain in line 0",
    "dq_post_at",
};
/* the step each case adds to */
static const int case_base[NCASES] = {
    FLOOR,      FLOOR,         COPY_LINE,     COPY_WIDE, WIDE_RECYCLED,
    COPY_LINE,  LINE_PREFETCH, SCATTERED,     SCATTERED, OWNER_READ,
    OWNER_READ, SCATTERED,     ADDRESS_ORDER,
};

static double run_case(int c, recycler *r, const dq_msg *m, int64_t when, uint64_t *rng)
{
    wide_node *w = r->wide;
    line_node *l = r->line;
    pool_node *head = NULL;
    switch (c) {
    case FLOOR:
    case COPY_LINE:
        for (int i = 0; i < ROUND_PUSHES; i++) /* untimed, as floor.c's prepare */
            l[i].next = NULL;
        break;
    case COPY_WIDE:
        for (int i = 0; i < ROUND_PUSHES; i++)
            w[i].next = NULL, w[i].link = NULL;
        break;
    case WIDE_RECYCLED:
    case WIDE_PREFETCH: recycle(r, 1); break;
    case LINE_PREFETCH: recycle(r, 2); break;
    case SCATTERED:
    case MOVES:
    case OWNER_READ:
        pick_pool_nodes(r, rng);
        recycle(r, 4);
        break;
    case ADDRESS_ORDER:
        pick_pool_nodes_in_address_order(r, rng);
        recycle(r, 4);
        break;
    case POOL_CHAIN:
        pick_pool_nodes(r, rng);
        recycle(r, 4);
        head = r->picked[0];
        for (int i = 1; i < (int)PREFETCH_AHEAD; i++) /* as a batch's pool_first */
            prefetch_pool_node(r->picked[i], true);
        break;
    case LINE0_CHAIN:
        pick_pool_nodes(r, rng);
        recycle(r, 5);
        head = r->picked[0];
        for (int i = 1; i < (int)PREFETCH_AHEAD; i++)
            prefetch_pool_node(r->picked[i], false);
        break;
    default: break;
    }
    atomic_store_explicit(&top, NULL, memory_order_relaxed);
    int64_t t0 = bench_thread_cpu_ns();
    switch (c) {
    case FLOOR:
        for (int i = 0; i < ROUND_PUSHES; i++)
            push(&l[i], (void **)&l[i].next);
        break;
    case COPY_LINE:
        for (int i = 0; i < ROUND_PUSHES; i++) {
            l[i].msg = *m;
            push(&l[i], (void **)&l[i].next);
        }
        break;
    case LINE_PREFETCH:
        for (int i = 0; i < ROUND_PUSHES; i++) {
            if (i + PREFETCH_AHEAD < ROUND_PUSHES)
                dq_arch_prefetch_for_write(&l[i + PREFETCH_AHEAD]);
            l[i].msg = *m;
            push(&l[i], (void **)&l[i].next);
        }
        break;
    case COPY_WIDE:
    case WIDE_RECYCLED:
    case WIDE_PREFETCH:
        for (int i = 0; i < ROUND_PUSHES; i++) {
            if (c == WIDE_PREFETCH && i + PREFETCH_AHEAD < ROUND_PUSHES) {
                dq_arch_prefetch_for_write(&w[i + PREFETCH_AHEAD]);
                dq_arch_prefetch_for_write((char *)&w[i + PREFETCH_AHEAD] + 64);
            }
            w[i].state = (w[i].state & ~(uint64_t)7) | 1;
            w[i].owner = &top;
            w[i].msg = *m;
            w[i].msg.when = when + i;
            w[i].due = when + i;
            push(&w[i], (void **)&w[i].next);
        }
        break;
    case SCATTERED:
    case OWNER_READ:
    case ADDRESS_ORDER:
        for (int i = 0; i < ROUND_PUSHES; i++) {
            if (i + PREFETCH_AHEAD < ROUND_PUSHES)
                prefetch_pool_node(r->picked[i + PREFETCH_AHEAD], c != SCATTERED);
            post_pool_node(r->picked[i], m, when + i, c != SCATTERED);
        }
        break;
    case MOVES:
        for (int i = 0; i < ROUND_PUSHES; i++) {
            if (i + PREFETCH_AHEAD < ROUND_PUSHES)
                prefetch_pool_node(r->picked[i + PREFETCH_AHEAD], false);
            spend_48_instructions(&r->sum);
            post_pool_node(r->picked[i], m, when + i, false);
        }
        break;
    case POOL_CHAIN:
        for (int i = 0; head != NULL; i++) {
            pool_node *n = head;
            head = n->aux_next;
            if (n->ahead != NULL)
                prefetch_pool_node(n->ahead, true);
            post_pool_node(n, m, when + i, true);
        }
        break;
    case LINE0_CHAIN:
        for (int i = 0; head != NULL; i++) {
            pool_node *n = head;
            head = n->next;
            if (n->ahead0 != NULL)
                prefetch_pool_node(n->ahead0, false);
            post_pool_node(n, m, when + i, false);
        }
        break;
    case DELIQUEUE:
        for (int i = 0; i < ROUND_PUSHES; i++) {
            int err = dq_post_at(r->q, m, when + i, NULL);
            if (err) {
                fprintf(stderr, "push_decomp: dq_post_at: %s\n", strerror(-err));
                exit(2);
            }
        }
        break;
    }
    double ns = (double)(bench_thread_cpu_ns() - t0) / ROUND_PUSHES;
    if (c == DELIQUEUE)
        recycle(r, 3);
    return ns;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rounds = 400;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
            rounds = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--rounds N]\n", argv[0]);
            return 2;
        }
    }
    recycler r;
    memset(&r, 0, sizeof(r));
    r.wide = aligned_alloc(64, ROUND_PUSHES * sizeof(wide_node));
    r.line = aligned_alloc(64, ROUND_PUSHES * sizeof(line_node));
    r.pool = aligned_alloc(64, POOL_REGION * sizeof(pool_node));
    r.q = dq_create(NULL);
    double *samples = malloc((size_t)NCASES * (size_t)rounds * sizeof(double));
    if (r.wide == NULL || r.line == NULL || r.pool == NULL || r.q == NULL ||
        samples == NULL || sem_init(&r.go, 0, 0) || sem_init(&r.done, 0, 0)) {
        fprintf(stderr, "push_decomp: out of memory\n");
        return 2;
    }
    memset(r.wide, 0, ROUND_PUSHES * sizeof(wide_node));
    memset(r.line, 0, ROUND_PUSHES * sizeof(line_node));
    memset(r.pool, 0, POOL_REGION * sizeof(pool_node));
    dq_msg bg = { .target = &background_target, .what = 2 };
    int64_t far = dq_now() + 3600LL * 1000000000;
    for (int i = 0; i < BACKGROUND; i++)
        if (dq_post_at(r.q, &bg, far + i, NULL) != 0)
            return 2;
    if (pthread_create(&r.thread, NULL, recycler_main, &r))
        return 2;
    recycle(&r, 3); /* the recycler becomes the consumer and sweeps the fill */

    dq_msg m = { .target = &burst_target, .what = 1, .arg1 = 7 };
    int64_t when = far - 1000000000;
    uint64_t rng = 42;
    for (int round = 0; round < rounds; round++)
        for (int k = 0; k < NCASES; k++) {
            int c = (k + round) % NCASES; /* rotate who goes first */
            samples[c * rounds + round] = run_case(c, &r, &m, when, &rng);
        }
    recycle(&r, -1);
    pthread_join(r.thread, NULL);

    char model[128];
    bench_cpu_model(model, sizeof(model));
    printf("push_decomp: %s, %ld online cores, load %.2f; %d rounds of %d pushes, "
           "median CPU ns per push\n\n",
           model, sysconf(_SC_NPROCESSORS_ONLN), bench_loadavg(), rounds, ROUND_PUSHES);
    printf("| step | ns/push | vs floor | vs the step it adds to |\n"
           "|---|---:|---:|---|\n");
    double med[NCASES];
    for (int c = 0; c < NCASES; c++) {
        qsort(&samples[c * rounds], (size_t)rounds, sizeof(double), cmp_double);
        med[c] = samples[c * rounds + rounds / 2];
    }
    for (int c = 0; c < NCASES; c++)
        printf("| %s | %.2f | %.2fx | %.2fx (%s) |\n", case_name[c], med[c],
               med[c] / med[FLOOR], med[c] / med[case_base[c]],
               case_name[case_base[c]]);
    printf("\n(checksum %llu)\n", (unsigned long long)r.sum);
    dq_quit(r.q);
    dq_unref(r.q);
    free(samples);
    free(r.wide);
    free(r.line);
    free(r.pool);
    return 0;
}
