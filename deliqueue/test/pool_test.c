/* SPDX-License-Identifier: Apache-2.0 */
/* The node pool as posts see it, through the pool index in each token
   (token = generation << 28 | index): free nodes are handed out lowest
   first whatever order they were retired in, a thread that exits gives
   its cached nodes back, and no post waits for a thread stalled in the
   pool's slow paths. */
#include <pthread.h>
#include <signal.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

TestSuite(pool, .init = fixture_setup, .fini = fixture_teardown);

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

struct poster_run {
    dq_queue *q;
    int count;
    uint32_t *indices;
};

static void *post_and_record(void *arg)
{
    struct poster_run *r = arg;
    dq_msg m = msg_what(&target_b, 7);
    for (int i = 0; i < r->count; i++) {
        dq_token t;
        if (dq_post(r->q, &m, &t) != 0)
            return (void *)1;
        r->indices[i] = index_of(t);
    }
    return NULL;
}

static void run_poster(struct poster_run *r)
{
    pthread_t t;
    void *rc;
    cr_assert_eq(pthread_create(&t, NULL, post_and_record, r), 0);
    cr_assert_eq(pthread_join(t, &rc), 0);
    cr_assert_null(rc, "a post failed");
}

/* Cancels in random order retire a few thousand nodes; a new thread's
   posts then take the lowest of them, in ascending address order (the
   free map's scan from its low end), not the order they were retired in. */
Test(pool, reuses_lowest_free_nodes_first_in_address_order)
{
    enum { N = 3 * 4096, M = 1000 };
    static dq_token tok[N];
    static uint32_t retired[N], taken[M];
    dq_msg m = msg_what(&target_a, 1), out;
    for (int i = 0; i < N; i++)
        cr_assert_eq(dq_post_delayed(q, &m, 1000000000, &tok[i]), 0);
    srand(12345);
    for (int i = N - 1; i > 0; i--) { /* Fisher-Yates */
        int j = rand() % (i + 1);
        dq_token t = tok[i];
        tok[i] = tok[j];
        tok[j] = t;
    }
    for (int i = 0; i < N; i++) {
        retired[i] = index_of(tok[i]);
        cr_assert_eq(dq_cancel(q, tok[i]), 0);
    }
    for (int i = 0; i < 4; i++) /* idle steps end the grace periods */
        cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    cr_assert_eq(atomic_load(&rec.discards), N);
    /* the teardown gives back what the looper still holds */
    dq_unref(q);
    q = dq_create(NULL);
    cr_assert_not_null(q);

    struct poster_run r = { q, M, taken };
    run_poster(&r);
    qsort(retired, N, sizeof(retired[0]), cmp_u32);
    for (int i = 1; i < M; i++)
        cr_assert_gt(taken[i], taken[i - 1], "post %d took node %u after node %u", i,
                     taken[i], taken[i - 1]);
    /* the map may hold other free nodes below these, never above: the
       last node taken is at most the M-th lowest of the retired ones */
    cr_assert_leq(taken[M - 1], retired[M - 1],
                  "took node %u though %d retired nodes lie at or below %u",
                  taken[M - 1], M, retired[M - 1]);
}

/* With two of every three nodes of a stretch of the map free, each word
   holds ~42 free nodes, so a thread's 64-node magazine fills split words:
   the rest of a split word must stay for the next fill, and a node must
   never be handed out twice.  Checked at every post, while all of them
   are still pending: a node posted twice would link the queue's stack
   into a cycle, so on failure the queue is left alone (not torn down). */
Test(pool, magazine_fills_hand_out_each_node_once)
{
    enum { N = 3 * 4096, MORE = 6000 };
    static dq_token tok[N];
    static unsigned char pending[1u << 16];
    /* on the fixture's clock, which stands: the delayed posts stay pending */
    dq_options o = { .clock = test_clock };
    dq_queue *sq = dq_create(&o);
    cr_assert_not_null(sq);
    dq_msg m = msg_what(&target_a, 1), out;
    for (int i = 0; i < N; i++)
        cr_assert_eq(dq_post_delayed(sq, &m, 1000000000, &tok[i]), 0);
    for (int i = 0; i < N; i++) {
        uint32_t idx = index_of(tok[i]);
        cr_assert_lt(idx, sizeof(pending));
        if (i % 3 == 0)
            pending[idx] = 1;
        else
            cr_assert_eq(dq_cancel(sq, tok[i]), 0);
    }
    for (int i = 0; i < 4; i++) /* idle steps end the grace periods */
        cr_assert_eq(dq_try_next(sq, &out), -EAGAIN);
    for (int i = 0; i < MORE; i++) {
        dq_token t;
        cr_assert_eq(dq_post_delayed(sq, &m, 1000000000, &t), 0);
        uint32_t idx = index_of(t);
        cr_assert_lt(idx, sizeof(pending));
        if (pending[idx])
            cr_assert_fail("post %d took node %u, which is still pending", i, idx);
        pending[idx] = 1;
    }
    dq_unref(sq);
}

/* Threads that post a few messages and exit give their cached nodes back
   at exit, and the next threads take them again: the pool does not grow
   by a word per thread. */
Test(pool, exited_threads_give_their_cached_nodes_back)
{
    enum { THREADS = 400, EACH = 3 };
    uint32_t lo = UINT32_MAX, hi = 0;
    dq_msg out;
    for (int t = 0; t < THREADS; t++) {
        uint32_t idx[EACH];
        struct poster_run r = { q, EACH, idx };
        run_poster(&r);
        for (int i = 0; i < EACH; i++) {
            lo = idx[i] < lo ? idx[i] : lo;
            hi = idx[i] > hi ? idx[i] : hi;
        }
    }
    for (int i = 0; i < THREADS * EACH; i++)
        cr_assert_eq(dq_try_next(q, &out), 0);
    /* Each thread took a word of 64 nodes; without the give-back each
       would have taken a fresh word, 400 words = 25,600 nodes apart. */
    cr_assert_lt(hi - lo, 64u * 64u, "%d threads' posts spread over nodes %u..%u",
                 THREADS, lo, hi);
}

/* Threads post to their own queues and cancel and retire at once, so that
   words of the free map are taken and given back by every thread all the
   time: no node is ever handed to two threads (each cancel reports the
   payload its own thread posted, exactly once). */
struct churner {
    pthread_t thread;
    int id;
    _Atomic long *mixed;
};

static void check_own(const dq_msg *m, void *ctx)
{
    struct churner *c = ctx;
    if (m->what != c->id || m->target != &target_b)
        atomic_fetch_add(c->mixed, 1);
}

static void *churn(void *arg)
{
    struct churner *c = arg;
    dq_options o = { .on_discard = check_own, .ctx = c };
    dq_queue *own = dq_create(&o);
    if (own == NULL)
        return (void *)1;
    dq_msg m = msg_what(&target_b, c->id), out;
    enum { BURST = 200 };
    dq_token tok[BURST];
    int64_t end = dq_now() + 1500000000; /* 1.5 s of the real clock */
    while (dq_now() < end) {
        for (int i = 0; i < BURST; i++)
            if (dq_post_delayed(own, &m, 1000000000, &tok[i]) != 0)
                return (void *)2;
        for (int i = 0; i < BURST; i++)
            if (dq_cancel(own, tok[(i * 7) % BURST]) != 0) /* 7 and BURST coprime */
                return (void *)3;
        (void)dq_try_next(own, &out); /* retires them: nodes go back */
        (void)dq_try_next(own, &out);
    }
    dq_unref(own);
    return NULL;
}

Test(pool, concurrent_takers_never_share_a_node, .timeout = 30)
{
    enum { THREADS = 4 };
    _Atomic long mixed = 0;
    struct churner c[THREADS];
    for (int i = 0; i < THREADS; i++) {
        c[i].id = i;
        c[i].mixed = &mixed;
        cr_assert_eq(pthread_create(&c[i].thread, NULL, churn, &c[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        void *rc;
        cr_assert_eq(pthread_join(c[i].thread, &rc), 0);
        cr_assert_null(rc, "thread %d failed at step %ld", i, (long)(intptr_t)rc);
    }
    cr_assert_eq(atomic_load(&mixed), 0,
                 "%ld cancels reported another thread's message", atomic_load(&mixed));
}

/* The pool's counts (dq_pool_stats) follow nodes through a queue's life:
   exact here, where one thread does everything. */
static void check_adds_up(const struct dq_pool_stats *s)
{
    cr_assert_eq(s->nodes_free + s->nodes_cached + s->nodes_limbo + s->nodes_in_use,
                 s->nodes_total,
                 "free %llu + cached %llu + limbo %llu + in use %llu != "
                 "total %llu",
                 (unsigned long long)s->nodes_free, (unsigned long long)s->nodes_cached,
                 (unsigned long long)s->nodes_limbo,
                 (unsigned long long)s->nodes_in_use,
                 (unsigned long long)s->nodes_total);
    cr_assert_geq(s->reserved_bytes, s->nodes_total * 128);
}

Test(pool, stats_follow_nodes_through_a_queue)
{
    struct dq_pool_stats s;
    cr_assert_eq(dq_pool_stats(NULL), -EINVAL);
    cr_assert_eq(dq_pool_stats(&s), 0);
    cr_assert_eq(s.queues, 1, "the fixture's queue");
    cr_assert_eq(s.nodes_in_use, 0);
    int64_t t = test_now();
    dq_token tok[300];
    for (int i = 0; i < 300; i++) {
        dq_msg m = msg_what(&target_a, i);
        cr_assert_eq(dq_post_at(q, &m, i < 200 ? t : t + 1000, &tok[i]), 0);
    }
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    cr_assert_eq(s.nodes_in_use, 300);
    cr_assert_eq(s.threads, 1);
    cr_assert_geq(s.nodes_total, 300);
    for (int i = 0; i < 150; i++)
        cr_assert_eq(next_what(), i);
    for (int i = 200; i < 250; i++)
        cr_assert_eq(dq_cancel(q, tok[i]), 0);
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    /* 100 pending, 50 cancelled but not yet retired by the looper */
    cr_assert_eq(s.nodes_in_use, 150, "cancelled nodes wait for the looper");
    cr_assert_eq(next_what(), 150);
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    cr_assert_eq(s.nodes_in_use, 99, "the looper retired the cancelled ones");
    uint64_t reserved = s.reserved_bytes;
    dq_quit(q);
    cr_assert_eq(next_what(), -1000000 - ESHUTDOWN);
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    cr_assert_eq(s.queues, 0);
    cr_assert_eq(s.nodes_in_use, 0, "every node back");
    cr_assert_eq(s.nodes_limbo, 0, "the teardown gives limbo back");
    cr_assert_eq(s.reserved_bytes, reserved, "nothing is returned to the system");
}

static void *post_once_and_exit(void *arg)
{
    dq_msg m = msg_what(&target_a, 1);
    return (void *)(intptr_t)dq_post(arg, &m, NULL);
}

/* A new thread posts one message to q and exits; its post must succeed. */
static void run_post_once_and_exit(void)
{
    pthread_t th;
    void *ret;
    cr_assert_eq(pthread_create(&th, NULL, post_once_and_exit, q), 0);
    cr_assert_eq(pthread_join(th, &ret), 0);
    cr_assert_eq((intptr_t)ret, 0);
}

Test(pool, stats_count_threads_and_their_caches)
{
    struct dq_pool_stats before, during, after;
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    cr_assert_eq(dq_pool_stats(&before), 0);
    cr_assert_eq(before.threads, 1);
    run_post_once_and_exit();
    cr_assert_eq(dq_pool_stats(&during), 0);
    check_adds_up(&during);
    cr_assert_eq(during.threads, 1, "the exited thread's cache is gone");
    cr_assert_eq(during.nodes_in_use, 2);
    cr_assert_eq(during.nodes_cached, before.nodes_cached,
                 "the exited thread gave back what it had cached");
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(dq_pool_stats(&after), 0);
    check_adds_up(&after);
    cr_assert_eq(after.nodes_in_use, 0);
}

/* A thread the scheduler keeps off the CPU (a SCHED_IDLE poster under
   load can wait seconds) while it is inside one of the pool's slow paths
   must not hold up another thread's post.  The test hook parks the one
   thread marked park_me at park_point until park_end. */
static sem_t parked, unpark;
static int park_point;
static _Thread_local bool park_me;

static void park_hook(int point)
{
    if (park_me && point == park_point) {
        sem_post(&parked);
        while (sem_wait(&unpark) != 0)
            ;
    }
}

static void *post_parked(void *arg)
{
    park_me = true;
    dq_msg m = msg_what(&target_a, 2);
    return (void *)(intptr_t)dq_post(arg, &m, NULL);
}

static void *stats_parked(void *arg)
{
    (void)arg;
    park_me = true;
    struct dq_pool_stats s;
    return (void *)(intptr_t)dq_pool_stats(&s);
}

static void park_start(pthread_t *th, int point, void *(*fn)(void *), void *arg)
{
    park_point = point;
    cr_assert_eq(sem_init(&parked, 0, 0), 0);
    cr_assert_eq(sem_init(&unpark, 0, 0), 0);
    dq_test_pool_hook(park_hook);
    cr_assert_eq(pthread_create(th, NULL, fn, arg), 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    cr_assert_eq(sem_timedwait(&parked, &until), 0,
                 "the thread never reached the point");
}

static intptr_t park_end(pthread_t th)
{
    void *rc;
    sem_post(&unpark);
    cr_assert_eq(pthread_join(th, &rc), 0);
    dq_test_pool_hook(NULL);
    return (intptr_t)rc;
}

static int drain(void)
{
    int n = 0;
    while (next_what() >= 0)
        n++;
    return n;
}

/* Post until the pool's free map is empty (a test binary may run its
   tests in one process, so the pool need not be fresh); the next claim
   of any thread then grows the pool. */
static void empty_the_free_map(void)
{
    dq_msg m = msg_what(&target_a, 0);
    struct dq_pool_stats s;
    for (;;) {
        cr_assert_eq(dq_pool_stats(&s), 0);
        if (s.nodes_free == 0)
            return;
        for (uint64_t i = 0; i < s.nodes_free; i++)
            cr_assert_eq(dq_post(q, &m, NULL), 0);
    }
}

/* A claim takes the free map's first non-empty word and the rest of its
   cache line (8 words of 64 nodes), then whole lines while it holds less
   than a magazine (64 nodes) and its stash (32 words, four lines) has
   room for one more line.  The tests below give back the lowest nodes of
   line-aligned words that sq holds whole, and nothing else, so that a
   new thread's first claim starts at the first of them. */
enum { WORD = 64, LINE = 8 };

struct sparse_map {
    dq_queue *sq;
    uint32_t first;  /* the first word given back */
    uint64_t cached; /* nodes_cached then */
};

/* Give back the lowest per_word nodes of each of `words` consecutive
   words from a line's start; the free map then holds them alone. */
static struct sparse_map give_back_sparse(int words, int per_word)
{
    enum { N = 2 * 4096, MAP_WORDS = 1 << 16 };
    static dq_token tok[N];
    static uint8_t ours[MAP_WORDS];
    memset(ours, 0, sizeof(ours));
    /* on the fixture's clock, which stands: the delayed posts stay pending */
    dq_options o = { .clock = test_clock };
    struct sparse_map sm = { .sq = dq_create(&o) };
    cr_assert_not_null(sm.sq);
    dq_msg m = msg_what(&target_a, 1), out;
    empty_the_free_map();
    for (int i = 0; i < N; i++) {
        cr_assert_eq(dq_post_delayed(sm.sq, &m, 1000000000, &tok[i]), 0);
        cr_assert_lt(index_of(tok[i]) / WORD, MAP_WORDS);
        ours[index_of(tok[i]) / WORD]++;
    }
    empty_the_free_map();
    int run = 0;
    for (uint32_t w = 0; w < MAP_WORDS && run < words; w++) {
        run = ours[w] == WORD && (run > 0 || w % LINE == 0) ? run + 1 : 0;
        sm.first = run == 1 ? w : sm.first;
    }
    cr_assert_eq(run, words, "%d posts hold no %d whole line-aligned words", N, words);
    int outside = -1;
    for (int i = 0; i < N; i++) {
        uint32_t idx = index_of(tok[i]);
        if (idx / WORD < sm.first || idx / WORD >= sm.first + (uint32_t)words)
            outside = i;
        else if (idx % WORD < (uint32_t)per_word)
            cr_assert_eq(dq_cancel(sm.sq, tok[i]), 0);
    }
    for (int i = 0; i < 4; i++) /* idle steps end the grace periods */
        cr_assert_eq(dq_try_next(sm.sq, &out), -EAGAIN);
    /* the looper keeps its last give-back's word batched: a node of
       another word, retired after them, moves it on */
    cr_assert_geq(outside, 0);
    cr_assert_eq(dq_cancel(sm.sq, tok[outside]), 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(dq_try_next(sm.sq, &out), -EAGAIN);
    struct dq_pool_stats s;
    cr_assert_eq(dq_pool_stats(&s), 0);
    cr_assert_eq(s.nodes_free, (uint64_t)words * per_word, "%llu nodes given back",
                 (unsigned long long)s.nodes_free);
    sm.cached = s.nodes_cached;
    return sm;
}

/* A thread that posts `count` messages to q, pausing after the first
   until told to go on, so that its cache can be counted. */
struct paused_poster {
    dq_queue *q;
    int count;
    uint32_t indices[32];
    sem_t first_posted, go_on;
    pthread_t thread;
};

static void *post_pausing_after_one(void *arg)
{
    struct paused_poster *p = arg;
    dq_msg m = msg_what(&target_b, 7);
    for (int i = 0; i < p->count; i++) {
        dq_token t;
        if (dq_post_delayed(p->q, &m, 1000000000, &t) != 0)
            return (void *)1;
        p->indices[i] = index_of(t);
        if (i == 0) {
            sem_post(&p->first_posted);
            while (sem_wait(&p->go_on) != 0)
                ;
        }
    }
    return NULL;
}

/* Start p's thread and return the stats once its first post is made. */
static struct dq_pool_stats paused_poster_start(struct paused_poster *p)
{
    cr_assert_eq(sem_init(&p->first_posted, 0, 0), 0);
    cr_assert_eq(sem_init(&p->go_on, 0, 0), 0);
    cr_assert_eq(pthread_create(&p->thread, NULL, post_pausing_after_one, p), 0);
    while (sem_wait(&p->first_posted) != 0)
        ;
    struct dq_pool_stats s;
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    return s;
}

static void paused_poster_finish(struct paused_poster *p)
{
    sem_post(&p->go_on);
    void *ret;
    cr_assert_eq(pthread_join(p->thread, &ret), 0);
    cr_assert_null(ret, "a post failed");
    sem_destroy(&p->first_posted);
    sem_destroy(&p->go_on);
}

/* One free node in each of 40 words: the claim takes four lines, 32
   words, as many as its stash holds; the first post leaves 31 nodes in
   the thread's cache and 8 in the map, and 32 posts take the 32 nodes in
   address order. */
Test(pool, a_sparse_claim_takes_four_lines_into_its_stash, .timeout = 30)
{
    enum { WORDS = 40 };
    struct sparse_map sm = give_back_sparse(WORDS, 1);
    struct paused_poster p = { .q = sm.sq, .count = 32 };
    struct dq_pool_stats s = paused_poster_start(&p);
    cr_assert_eq(s.nodes_free, WORDS - 32, "the claim left %llu of %d words",
                 (unsigned long long)s.nodes_free, WORDS);
    cr_assert_eq(s.nodes_cached, sm.cached + 31, "cached %llu, was %llu",
                 (unsigned long long)s.nodes_cached, (unsigned long long)sm.cached);
    paused_poster_finish(&p);
    for (int i = 0; i < 32; i++)
        cr_assert_eq(p.indices[i], (sm.first + (uint32_t)i) * WORD,
                     "post %d took node %u, not the first node of word %u", i,
                     p.indices[i], sm.first + (uint32_t)i);
    dq_unref(sm.sq);
}

/* Eight free nodes in each of 16 words: the first line holds a magazine's
   worth, so the claim takes that line alone and the next stays in the
   map. */
Test(pool, a_claim_stops_at_a_magazine_of_nodes, .timeout = 30)
{
    enum { WORDS = 16, EACH = 8 };
    struct sparse_map sm = give_back_sparse(WORDS, EACH);
    struct paused_poster p = { .q = sm.sq, .count = 1 };
    struct dq_pool_stats s = paused_poster_start(&p);
    cr_assert_eq(s.nodes_free, (WORDS - LINE) * EACH, "the claim left %llu of %d nodes",
                 (unsigned long long)s.nodes_free, WORDS * EACH);
    cr_assert_eq(s.nodes_cached, sm.cached + LINE * EACH - 1, "cached %llu, was %llu",
                 (unsigned long long)s.nodes_cached, (unsigned long long)sm.cached);
    paused_poster_finish(&p);
    cr_assert_eq(p.indices[0], sm.first * WORD);
    dq_unref(sm.sq);
}

/* A post that must grow the pool is parked there (point); this thread's
   posts then grow past the parked chunk, a chunk per 4096 nodes as
   always (not one per claim), and never take a word of it before it is
   whole. */
static void grow_beside_a_parked_grower(int point)
{
    enum { N = 3 * 4096 };
    empty_the_free_map();
    struct dq_pool_stats before, s;
    cr_assert_eq(dq_pool_stats(&before), 0);
    pthread_t th;
    park_start(&th, point, post_parked, q);
    dq_msg m = msg_what(&target_a, 1);
    for (int i = 0; i < N; i++)
        cr_assert_eq(dq_post(q, &m, NULL), 0);
    cr_assert_eq(dq_pool_stats(&s), 0);
    uint64_t made = s.nodes_total - before.nodes_total;
    cr_assert_leq(made, N + 4096, "%d posts beside a parked grower made %llu nodes", N,
                  (unsigned long long)made);
    cr_assert_eq(park_end(th), 0, "the parked post failed");
    uint64_t pending = dq_pending(q);
    cr_assert_eq(drain(), pending);
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    cr_assert_eq(s.nodes_in_use, 0);
}

/* Parked with its chunk index taken, nothing of the chunk published. */
Test(pool, no_post_waits_for_a_parked_grower, .timeout = 30)
{
    grow_beside_a_parked_grower(DQ_TEST_POOL_GROW);
}

/* Parked with the chunk's nodes published and its free-map words not. */
Test(pool, no_post_waits_for_a_grower_parked_mid_publication, .timeout = 30)
{
    grow_beside_a_parked_grower(DQ_TEST_POOL_PUBLISH);
}

/* A thread parked in its first post, its registry slot taken: another
   thread's first post, and the stats, go on without it. */
Test(pool, no_post_waits_for_a_parked_registration, .timeout = 30)
{
    struct dq_pool_stats before, s;
    cr_assert_eq(dq_pool_stats(&before), 0);
    pthread_t th;
    park_start(&th, DQ_TEST_POOL_REGISTER, post_parked, q);
    run_post_once_and_exit();
    cr_assert_eq(dq_pool_stats(&s), 0);
    cr_assert_eq(s.threads, before.threads,
                 "the parked thread's cache is not yet readable");
    cr_assert_eq(park_end(th), 0, "the parked post failed");
    cr_assert_eq(drain(), 2);
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    cr_assert_eq(s.threads, before.threads, "both threads exited");
}

/* dq_pool_stats parked while it reads a live thread's cache: a new
   thread's first post, and its exit, go on without it. */
Test(pool, no_post_waits_for_a_parked_stats_reader, .timeout = 30)
{
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    struct dq_pool_stats before, s;
    cr_assert_eq(dq_pool_stats(&before), 0);
    pthread_t reader;
    park_start(&reader, DQ_TEST_POOL_STATS, stats_parked, NULL);
    run_post_once_and_exit();
    cr_assert_eq(park_end(reader), 0);
    cr_assert_eq(drain(), 2);
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    cr_assert_eq(s.threads, before.threads);
}

/* Two dq_pool_stats readers count themselves in and out of every
   registry slot without pause while threads come and go through two
   slots: each owner's registration and exit change the same state word
   as the readers' counts.  Every change must be one atomic step: a
   reader's count that an owner's write wipes out, or brings back after
   the reader left, leaves a slot whose next owner waits at its exit for
   readers that never leave, or a slot counted live with no thread behind
   it. */
static _Atomic bool racers_stop;

static void *read_stats_until_stopped(void *arg)
{
    (void)arg;
    struct dq_pool_stats s;
    long reads = 0;
    while (!atomic_load_explicit(&racers_stop, memory_order_relaxed)) {
        if (dq_pool_stats(&s) != 0)
            return (void *)-1;
        reads++;
    }
    return (void *)reads;
}

/* Threads, one after another, each posting once to q and exiting, until
   stopped: how many, or -1 if one failed. */
static void *come_and_go_until_stopped(void *arg)
{
    long threads = 0;
    while (!atomic_load_explicit(&racers_stop, memory_order_relaxed)) {
        pthread_t th;
        void *ret;
        if (pthread_create(&th, NULL, post_once_and_exit, arg) != 0 ||
            pthread_join(th, &ret) != 0 || ret != NULL)
            return (void *)-1;
        threads++;
    }
    return (void *)threads;
}

Test(pool, stats_readers_racing_thread_exits_leave_every_slot_whole, .timeout = 30)
{
    enum { READERS = 2, COMERS = 2 };
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    struct dq_pool_stats before, s;
    cr_assert_eq(dq_pool_stats(&before), 0);
    pthread_t th[READERS + COMERS];
    for (int i = 0; i < READERS + COMERS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL,
                                    i < READERS ? read_stats_until_stopped
                                                : come_and_go_until_stopped,
                                    q),
                     0);
    struct timespec pause = { 1, 500000000 };
    nanosleep(&pause, NULL);
    atomic_store(&racers_stop, true);
    long threads = 0;
    for (int i = 0; i < READERS + COMERS; i++) {
        void *n;
        cr_assert_eq(pthread_join(th[i], &n), 0);
        cr_assert_gt((intptr_t)n, 0, "racer %d failed or never ran", i);
        if (i >= READERS)
            threads += (intptr_t)n;
    }
    cr_assert_eq(drain(), 1 + threads);
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    cr_assert_eq(s.threads, before.threads, "%ld threads came and went", threads);
}

/* Threads that grow the pool at the same moment each make a chunk: the
   pool may exceed its need by one chunk per concurrent grower, no more,
   and every node is accounted for. */
#define GROWERS 8
static pthread_barrier_t growers_ready;

static void *post_many(void *arg)
{
    dq_msg m = msg_what(&target_b, 3);
    pthread_barrier_wait(&growers_ready);
    for (int i = 0; i < 5000; i++)
        if (dq_post(arg, &m, NULL) != 0)
            return (void *)1;
    return NULL;
}

Test(pool, concurrent_growers_add_at_most_a_chunk_each, .timeout = 30)
{
    empty_the_free_map();
    struct dq_pool_stats before, s;
    cr_assert_eq(dq_pool_stats(&before), 0);
    pthread_t th[GROWERS];
    cr_assert_eq(pthread_barrier_init(&growers_ready, NULL, GROWERS), 0);
    for (int i = 0; i < GROWERS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, post_many, q), 0);
    for (int i = 0; i < GROWERS; i++) {
        void *rc;
        cr_assert_eq(pthread_join(th[i], &rc), 0);
        cr_assert_null(rc, "a post failed");
    }
    uint64_t pending = dq_pending(q);
    cr_assert_eq(drain(), pending);
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    cr_assert_eq(s.nodes_in_use, 0);
    uint64_t need = (GROWERS * 5000 + 4095) / 4096 * 4096;
    uint64_t made = s.nodes_total - before.nodes_total;
    cr_assert_leq(made, need + GROWERS * 4096, "%llu nodes made for %d posts",
                  (unsigned long long)made, GROWERS * 5000);
    /* Chunks are carved four to a 2 MiB slab (mapped with a page of
       free-map words), and a new slab is installed only when the current
       one is full: a grower that loses the race to install one unmaps its
       own, so no slab is left behind partly carved. */
    uint64_t slab = (UINT64_C(2) << 20) + (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t slabs = (made / 4096 + 3) / 4;
    cr_assert_leq(s.reserved_bytes - before.reserved_bytes, slabs * slab,
                  "%llu chunks made took %llu bytes, more than %llu slabs",
                  (unsigned long long)(made / 4096),
                  (unsigned long long)(s.reserved_bytes - before.reserved_bytes),
                  (unsigned long long)slabs);
}

/* A fork while dq_pool_stats is counted into this thread's registry slot:
   in the child that reader never leaves, and the forking thread's exit
   (its cache's give-back waits for the slot's readers) must not wait for
   it. */
Test(pool, a_fork_during_stats_leaves_the_child_free_to_exit, .timeout = 30)
{
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    pthread_t reader;
    park_start(&reader, DQ_TEST_POOL_STATS, stats_parked, NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct dq_pool_stats s;
        if (dq_pool_stats(&s) != 0 || s.threads != 1)
            _exit(3);
        pthread_exit(NULL); /* the last thread: the process exits 0 */
    }
    int status = 0;
    pid_t done = 0;
    for (int i = 0; i < 1000 && done == 0; i++) {
        done = waitpid(pid, &status, WNOHANG);
        if (done == 0)
            usleep(10000);
    }
    if (done == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    cr_assert_eq(park_end(reader), 0);
    cr_assert_neq(done, 0, "the child's exit waited for a reader of the parent");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x",
              status);
    cr_assert_eq(drain(), 1);
}

/* A forged token (any 64-bit value is a token to dq_cancel) may name a
   node of a chunk that another thread is publishing at that moment: the
   lookup must see the chunk's nodes initialised, never half-made, and
   answer -ENOENT for a node that is not pending. */
static _Atomic int forging, forger_started;

static void *cancel_forged(void *arg)
{
    uint64_t x = 88172645463325252u;
    atomic_store(&forger_started, 1);
    while (atomic_load(&forging)) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* generation 1 (a fresh node's), an index among the next chunks */
        dq_token tok = UINT64_C(1) << 28 | (x % (64 * 4096));
        int err = dq_cancel(arg, tok);
        if (err != -ENOENT && err != 0)
            return (void *)1;
    }
    return NULL;
}

Test(pool, forged_tokens_race_the_pool_growing, .timeout = 30)
{
    empty_the_free_map();
    pthread_t th;
    atomic_store(&forging, 1);
    cr_assert_eq(pthread_create(&th, NULL, cancel_forged, q), 0);
    while (!atomic_load(&forger_started))
        ;
    dq_msg m = msg_what(&target_a, 1);
    for (int i = 0; i < 16 * 4096; i++)
        cr_assert_eq(dq_post_delayed(q, &m, 1000000000, NULL), 0);
    atomic_store(&forging, 0);
    void *rc;
    cr_assert_eq(pthread_join(th, &rc), 0);
    cr_assert_null(rc, "a forged token got an answer other than -ENOENT or 0");
}

/* More threads hold caches at once than a page of registry slots has
   (a page holds some 170): a new page is pushed while dq_pool_stats walks
   the list, and the walk must see the page's links and states whole. */
#define CROWD 200
static pthread_barrier_t crowd_posted, crowd_leave;
static _Atomic int polling, poller_started;

static void *post_and_stay(void *arg)
{
    dq_msg m = msg_what(&target_b, 4);
    intptr_t err = dq_post(arg, &m, NULL);
    pthread_barrier_wait(&crowd_posted);
    pthread_barrier_wait(&crowd_leave);
    return (void *)err;
}

static void *poll_stats(void *arg)
{
    (void)arg;
    do {
        struct dq_pool_stats s;
        if (dq_pool_stats(&s) != 0)
            return (void *)1;
        atomic_store(&poller_started, 1);
    } while (atomic_load(&polling));
    return NULL;
}

Test(pool, stats_walk_the_registry_while_it_grows, .timeout = 60)
{
    struct dq_pool_stats before, s;
    cr_assert_eq(dq_pool_stats(&before), 0);
    static pthread_t th[CROWD];
    pthread_t poller;
    cr_assert_eq(pthread_barrier_init(&crowd_posted, NULL, CROWD + 1), 0);
    cr_assert_eq(pthread_barrier_init(&crowd_leave, NULL, CROWD + 1), 0);
    atomic_store(&polling, 1);
    cr_assert_eq(pthread_create(&poller, NULL, poll_stats, NULL), 0);
    while (!atomic_load(&poller_started))
        ;
    for (int i = 0; i < CROWD; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, post_and_stay, q), 0);
    pthread_barrier_wait(&crowd_posted);
    atomic_store(&polling, 0);
    void *rc;
    cr_assert_eq(pthread_join(poller, &rc), 0);
    cr_assert_null(rc, "dq_pool_stats failed");
    cr_assert_eq(dq_pool_stats(&s), 0);
    cr_assert_eq(s.threads, before.threads + CROWD);
    pthread_barrier_wait(&crowd_leave);
    for (int i = 0; i < CROWD; i++) {
        cr_assert_eq(pthread_join(th[i], &rc), 0);
        cr_assert_null(rc, "a post failed");
    }
    cr_assert_eq(drain(), CROWD);
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    cr_assert_eq(s.threads, before.threads);
}

/* The first thread that must push a new page of registry slots (every
   slot taken) is parked there, the list's head read; another thread's
   first post pushes a page of its own meanwhile.  Once unparked, the
   first pushes its page on top of that one, so its cache is counted while
   it lives.  Fillers take the free slots first: where the tests share a
   process, earlier ones left pages of them. */
#define FILLERS_MAX 1024
static sem_t filler_posted, fillers_leave;
static _Atomic bool page_maker_parked;

static void park_first_page_maker(int point)
{
    if (point == DQ_TEST_POOL_SLOT_PAGE && !atomic_exchange(&page_maker_parked, true)) {
        sem_post(&parked);
        while (sem_wait(&unpark) != 0)
            ;
    }
}

static void *fill_and_stay(void *arg)
{
    dq_msg m = msg_what(&target_b, 5);
    intptr_t err = dq_post(arg, &m, NULL);
    sem_post(&filler_posted);
    while (sem_wait(&fillers_leave) != 0)
        ;
    return (void *)err;
}

/* Wait for a filler's post, or for the hook to park one: true if parked. */
static bool next_filler_parked(void)
{
    int64_t until = real_ns() + 10 * INT64_C(1000000000);
    for (;;) {
        if (sem_trywait(&filler_posted) == 0)
            return false;
        if (sem_trywait(&parked) == 0)
            return true;
        cr_assert_lt(real_ns(), until, "a filler neither posted nor parked");
        sched_yield();
    }
}

Test(pool, a_registry_page_pushed_beside_a_parked_one_keeps_both, .timeout = 30)
{
    struct dq_pool_stats before, s;
    cr_assert_eq(dq_pool_stats(&before), 0);
    cr_assert_eq(sem_init(&parked, 0, 0), 0);
    cr_assert_eq(sem_init(&unpark, 0, 0), 0);
    cr_assert_eq(sem_init(&filler_posted, 0, 0), 0);
    cr_assert_eq(sem_init(&fillers_leave, 0, 0), 0);
    atomic_store(&page_maker_parked, false);
    dq_test_pool_hook(park_first_page_maker);
    pthread_attr_t attr;
    cr_assert_eq(pthread_attr_init(&attr), 0);
    cr_assert_eq(pthread_attr_setstacksize(&attr, 256 << 10), 0);
    static pthread_t th[FILLERS_MAX];
    int n = 0;
    do {
        cr_assert_lt(n, FILLERS_MAX, "no filler needed a new registry page");
        cr_assert_eq(pthread_create(&th[n++], &attr, fill_and_stay, q), 0);
    } while (!next_filler_parked());
    pthread_attr_destroy(&attr);

    run_post_once_and_exit();
    sem_post(&unpark);
    cr_assert(!next_filler_parked(), "the parked filler's post never finished");
    cr_assert_eq(dq_pool_stats(&s), 0);
    check_adds_up(&s);
    cr_assert_eq(s.threads, before.threads + (uint64_t)n,
                 "the unparked filler's cache is not on the registry");

    for (int i = 0; i < n; i++)
        sem_post(&fillers_leave);
    for (int i = 0; i < n; i++) {
        void *rc;
        cr_assert_eq(pthread_join(th[i], &rc), 0);
        cr_assert_null(rc, "a post failed");
    }
    dq_test_pool_hook(NULL);
    cr_assert_eq(drain(), n + 1);
}
