/* SPDX-License-Identifier: Apache-2.0 */
/* The library out of memory: a looper step whose heap cannot grow (this
   binary links with --wrap=realloc), a post whose pool cannot map a slab,
   a thread's first post that cannot register its cache (the pool's fault
   hook).  Each reports -ENOMEM, and nothing is lost, torn, leaked or
   recycled while still reachable. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "test_util.h"

/* While set, every realloc of the library (the heaps' growth) fails. */
static _Atomic int realloc_fails;

void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n)
{
    if (atomic_load(&realloc_fails)) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_realloc(p, n);
}

/* While set on a thread, the pool's slab mapping there fails, and so
   does the pthread_setspecific of its first post (ENOMEM: glibc allocates
   for a process's keys past its first 32). */
static _Thread_local bool slab_fails, key_fails;

static bool pool_fails_here(int step)
{
    return step == DQ_TEST_POOL_MAP_SLAB  ? slab_fails
           : step == DQ_TEST_POOL_SET_KEY ? key_fails
                                          : false;
}

static void nomem_setup(void)
{
    fixture_setup();
    dq_test_pool_fault(pool_fails_here);
}

static void nomem_teardown(void)
{
    dq_test_pool_fault(NULL);
    fixture_teardown();
}

TestSuite(nomem, .init = nomem_setup, .fini = nomem_teardown, .timeout = 30);

/* Deliver everything due; returns how many, failing on a repeat. */
static size_t drain(bool *seen, size_t nseen)
{
    size_t got = 0;
    dq_msg out;
    for (int guard = 0; guard < 100000; guard++) {
        int err = dq_try_next(q, &out);
        if (err == -EAGAIN)
            return got;
        cr_assert_eq(err, 0, "dq_try_next: %d", err);
        cr_assert(out.what >= 0 && (size_t)out.what < nseen, "what %d", out.what);
        cr_assert(!seen[out.what], "message %d delivered twice", out.what);
        seen[out.what] = true;
        got++;
    }
    cr_assert_fail("the queue never ran dry: its stack has a cycle");
    return got;
}

/* The node a removal unlinks is the topmost one the looper has swept, with
   unswept posts above it; finding its newer neighbour normally takes a
   sweep, which needs heap room.  Without room the unlink must still
   happen (or the node wait): a node recycled while still linked under the
   unswept posts would reappear in the stack as a new post (a cycle, or
   lost messages). */
static dq_token victim;

static void *cancel_victim(void *unused)
{
    (void)unused;
    return (void *)(intptr_t)dq_cancel(q, victim);
}

enum { LATER = 200 };

/* The posts after the removal, from a thread of their own: its empty
   magazine claims the lowest free nodes, among them the cancelled one,
   however many free nodes the test thread's magazine still holds. */
static void *post_later(void *unused)
{
    (void)unused;
    for (int i = 0; i < LATER; i++) {
        dq_msg m = msg_what(&target_b, i);
        if (dq_post_at_front(q, &m, NULL) != 0)
            return (void *)1;
    }
    return NULL;
}

static void unlink_under_unswept_posts(bool from_another_thread)
{
    enum { FILL = 64 }; /* FILL: the heaps' first capacity */
    int64_t t = 2000000;
    dq_token tok[FILL];
    for (int i = 0; i < FILL; i++) {
        dq_msg m = msg_what(&target_a, 1000 + i);
        cr_assert_eq(dq_post_at(q, &m, t + i, &tok[i]), 0);
    }
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN); /* swept: the heap is full */
    /* two unswept posts above them: with the removed node out of the heap
       there is still no room for both */
    for (int i = 0; i < 2; i++) {
        dq_msg m = msg_what(&target_a, LATER + i);
        cr_assert_eq(dq_post_at(q, &m, t + FILL + i, NULL), 0);
    }
    /* the last post of the fill is the topmost swept node; a cancel on
       the consumer's thread takes it out at once, one on another thread
       through the removal list at the consumer's next step */
    atomic_store(&realloc_fails, 1);
    victim = tok[FILL - 1];
    if (from_another_thread) {
        pthread_t t;
        void *rc;
        cr_assert_eq(pthread_create(&t, NULL, cancel_victim, NULL), 0);
        cr_assert_eq(pthread_join(t, &rc), 0);
        cr_assert_eq((intptr_t)rc, 0);
    } else {
        cr_assert_eq(dq_cancel(q, victim), 0);
    }
    cr_assert_eq(dq_try_next(q, &out), -ENOMEM);
    cr_assert_eq(dq_try_next(q, &out), -ENOMEM, "still no room for the sweep");
    atomic_store(&realloc_fails, 0);

    /* retire the rest of the fill, so the cancelled node's pool batch fills
       up and is handed back, and the posts below take it again */
    for (int i = 0; i < FILL - 1; i++)
        cr_assert_eq(dq_cancel(q, tok[i]), 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    pthread_t poster;
    void *rc;
    cr_assert_eq(pthread_create(&poster, NULL, post_later, NULL), 0);
    cr_assert_eq(pthread_join(poster, &rc), 0);
    cr_assert_null(rc, "a later post failed");
    test_advance_to(t + FILL + 2);
    bool seen[LATER + 2] = { false };
    cr_assert_eq(drain(seen, LATER + 2), LATER + 2,
                 "every post delivered once, the one above the removal too");
    cr_assert_eq(atomic_load(&rec.discards), FILL, "every cancel reported once");
}

Test(nomem, unlink_under_unswept_posts_without_heap_room)
{
    unlink_under_unswept_posts(false);
}

Test(nomem, unlink_under_unswept_posts_without_heap_room_cancelled_elsewhere)
{
    unlink_under_unswept_posts(true);
}

/* A step whose sweep finds no heap room reports it and delivers nothing;
   once memory is back, everything is delivered once. */
Test(nomem, step_without_heap_room_reports_enomem_and_loses_nothing)
{
    enum { FILL = 64 };
    int64_t t = 2000000;
    for (int i = 0; i < FILL; i++) {
        dq_msg m = msg_what(&target_a, i);
        /* the last one is due first */
        cr_assert_eq(dq_post_at(q, &m, i == FILL - 1 ? t : t + 10 + i, NULL), 0);
    }
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    dq_msg above = msg_what(&target_a, FILL);
    cr_assert_eq(dq_post_at(q, &above, t + 10 + FILL, NULL), 0);

    test_advance_to(t);
    atomic_store(&realloc_fails, 1);
    /* the sweep fails first, and the step reports it, delivering nothing */
    cr_assert_eq(dq_try_next(q, &out), -ENOMEM);
    atomic_store(&realloc_fails, 0);

    bool seen[FILL + 1 + LATER] = { false };
    size_t got = drain(seen, FILL + 1);
    cr_assert_eq(got, 1);
    cr_assert(seen[FILL - 1]);
    for (int i = 0; i < LATER; i++) {
        dq_msg m = msg_what(&target_b, FILL + 1 + i);
        cr_assert_eq(dq_post_at_front(q, &m, NULL), 0);
    }
    test_advance_to(t + 10 + FILL + 1);
    cr_assert_eq(drain(seen, FILL + 1 + LATER), FILL + LATER);
    cr_assert_eq(atomic_load(&rec.discards), 0);
}

/* ---- the node pool ----------------------------------------------------- */

/* Once every queue is torn down and every other thread has exited, each
   node the pool made is free or in this thread's cache. */
static void check_every_node_back(void)
{
    struct dq_pool_stats s;
    cr_assert_eq(dq_pool_stats(&s), 0);
    cr_assert_eq(s.nodes_in_use, 0,
                 "free %llu + cached %llu + limbo %llu of %llu nodes made",
                 (unsigned long long)s.nodes_free, (unsigned long long)s.nodes_cached,
                 (unsigned long long)s.nodes_limbo, (unsigned long long)s.nodes_total);
    cr_assert_eq(s.nodes_free + s.nodes_cached + s.nodes_limbo, s.nodes_total);
}

/* A post that needs a new slab and cannot map one fails with -ENOMEM and
   changes nothing: the chunk index its grow took is given back, so the
   next grow, once memory is back, makes that chunk and hands out its
   first node. */
Test(nomem, a_post_without_a_slab_fails_and_gives_its_chunk_back)
{
    dq_queue *sq = dq_create(NULL);
    cr_assert_not_null(sq);
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(sq, &m, NULL), 0, "registered, with memory");
    slab_fails = true;
    int err = 0;
    long posts = 0;
    while (posts < 64 * 4096 && (err = dq_post(sq, &m, NULL)) == 0)
        posts++;
    cr_assert_eq(err, -ENOMEM, "%ld posts, and no slab was needed", posts);
    struct dq_pool_stats before, after;
    cr_assert_eq(dq_pool_stats(&before), 0);
    cr_assert_eq(dq_post(sq, &m, NULL), -ENOMEM, "still no memory");
    cr_assert_eq(dq_pool_stats(&after), 0);
    cr_assert_eq(after.nodes_total, before.nodes_total);
    cr_assert_eq(after.reserved_bytes, before.reserved_bytes);
    slab_fails = false;
    dq_token tok;
    cr_assert_eq(dq_post(sq, &m, &tok), 0);
    cr_assert_eq(index_of(tok), before.nodes_total,
                 "the post took node %u, not the next chunk's first, %llu",
                 index_of(tok), (unsigned long long)before.nodes_total);
    dq_unref(sq);
    check_every_node_back();
}

/* Two threads post without pause, each to its own queue: one can map no
   slab, the other can.  The first fails each time the current slab is
   used up, and gives its chunk index back while the second takes the
   next one and maps the new slab; neither may lose the other's chunk.
   Neither runs more than a chunk's worth of attempts ahead of the other,
   so both keep growing the pool (a scheduler that starved one, as under
   QEMU, would leave the race unrun). */
struct grower {
    dq_queue *q;
    bool no_slabs;
    _Atomic long posts, refused;
    struct grower *other;
    pthread_t thread;
};
static _Atomic bool growers_stop;

static long attempts(struct grower *g)
{
    return atomic_load_explicit(&g->posts, memory_order_relaxed) +
           atomic_load_explicit(&g->refused, memory_order_relaxed);
}

static void *post_until_stopped(void *arg)
{
    struct grower *g = arg;
    dq_msg m = msg_what(&target_a, 1);
    if (dq_post(g->q, &m, NULL) != 0)
        return (void *)1;
    slab_fails = g->no_slabs;
    while (!atomic_load_explicit(&growers_stop, memory_order_relaxed)) {
        if (attempts(g) > attempts(g->other) + 4096) {
            sched_yield();
            continue;
        }
        int err = dq_post(g->q, &m, NULL);
        if (err == 0)
            atomic_fetch_add_explicit(&g->posts, 1, memory_order_relaxed);
        else if (err == -ENOMEM && g->no_slabs)
            atomic_fetch_add_explicit(&g->refused, 1, memory_order_relaxed);
        else
            return (void *)(intptr_t)err;
    }
    return NULL;
}

Test(nomem, a_grow_without_a_slab_racing_one_with_loses_no_chunk)
{
    struct grower g[2] = { { .no_slabs = true }, { .no_slabs = false } };
    g[0].other = &g[1];
    g[1].other = &g[0];
    for (int i = 0; i < 2; i++) {
        g[i].q = dq_create(NULL);
        cr_assert_not_null(g[i].q);
    }
    atomic_store(&growers_stop, false);
    int64_t t0 = real_ns();
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&g[i].thread, NULL, post_until_stopped, &g[i]), 0);
    /* 16 slabs' worth of posts, each slab used up a chance for the race,
       and at least one grow that needed a slab: on a loaded machine or
       under QEMU that can take longer than the posts alone, so the bound
       is time, well inside the test's own timeout */
    while ((atomic_load(&g[0].posts) + atomic_load(&g[1].posts) < 16 * 16384 ||
            atomic_load(&g[0].refused) == 0) &&
           real_ns() - t0 < 30000000000)
        sched_yield();
    atomic_store(&growers_stop, true);
    for (int i = 0; i < 2; i++) {
        void *ret;
        cr_assert_eq(pthread_join(g[i].thread, &ret), 0);
        cr_assert_null(ret, "grower %d: %d", i, (int)(intptr_t)ret);
    }
    cr_assert_gt(atomic_load(&g[0].refused), 0, "no grow ever needed a slab");
    for (int i = 0; i < 2; i++)
        dq_unref(g[i].q);
    check_every_node_back();
}

/* A thread's first post that cannot register its cache fails with
   -ENOMEM and frees the registry slot it took, however often it is
   retried, while a dq_pool_stats reader counts itself in and out of
   that slot; the next post with memory registers, and the thread's exit
   gives the slot back.  A slot whose state lost a reader's count would
   make that exit wait for ever. */
static _Atomic bool reader_stop;

static void *read_stats_until_stopped(void *arg)
{
    (void)arg;
    struct dq_pool_stats s;
    while (!atomic_load_explicit(&reader_stop, memory_order_relaxed))
        if (dq_pool_stats(&s) != 0)
            return (void *)1;
    return NULL;
}

struct unregistered {
    dq_queue *q;
    int64_t ns; /* how long to retry */
    long refused;
    int last; /* the post with memory */
};

static void *post_unregistered_then_registered(void *arg)
{
    struct unregistered *u = arg;
    dq_msg m = msg_what(&target_a, 1);
    int64_t t0 = real_ns();
    key_fails = true;
    do
        for (int i = 0; i < 256; i++, u->refused++)
            if (dq_post(u->q, &m, NULL) != -ENOMEM)
                return (void *)1;
    while (real_ns() - t0 < u->ns);
    key_fails = false;
    u->last = dq_post(u->q, &m, NULL);
    return NULL;
}

Test(nomem, a_post_that_cannot_register_fails_and_frees_its_slot)
{
    enum { ROUNDS = 4 };
    struct dq_pool_stats s;
    cr_assert_eq(dq_pool_stats(&s), 0);
    uint64_t threads_before = s.threads;
    atomic_store(&reader_stop, false);
    /* one reader: with the poster, as many threads as the farm's two cores */
    pthread_t reader;
    void *ret;
    cr_assert_eq(pthread_create(&reader, NULL, read_stats_until_stopped, NULL), 0);
    for (int round = 0; round < ROUNDS; round++) {
        struct unregistered u = { .q = q, .ns = 250000000 };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, post_unregistered_then_registered, &u),
                     0);
        cr_assert_eq(pthread_join(th, &ret), 0);
        cr_assert_null(ret, "round %d: post %ld did not fail", round, u.refused);
        cr_assert_eq(u.last, 0, "round %d: the post with memory failed", round);
    }
    atomic_store(&reader_stop, true);
    cr_assert_eq(pthread_join(reader, &ret), 0);
    cr_assert_null(ret);
    cr_assert_eq(dq_pool_stats(&s), 0);
    cr_assert_eq(s.threads, threads_before, "%llu threads hold a cache, %llu before",
                 (unsigned long long)s.threads, (unsigned long long)threads_before);
    dq_msg out;
    int got = 0;
    while (dq_try_next(q, &out) == 0)
        got++;
    cr_assert_eq(got, ROUNDS, "%d messages for %d rounds", got, ROUNDS);
}
