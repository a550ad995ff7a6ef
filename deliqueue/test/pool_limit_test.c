/* SPDX-License-Identifier: Apache-2.0 */
/* The node pool at its limit.  This binary's library is built with
   DQ_INDEX_BITS=16 (//deliqueue:deliqueue_testing_small_pool), so the pool
   holds at most 65536 nodes, 16 chunks, and a test can fill it: a post
   that finds every node taken reports -ENOMEM, maps nothing more, changes
   nothing, and the posts after the nodes come back succeed.  Each test
   runs in a process of its own, on a fresh pool. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "test_util.h"

#ifndef DQ_INDEX_BITS
#error "pool_limit_test needs the small-pool build (DQ_INDEX_BITS)"
#endif
#define POOL_NODES (UINT64_C(1) << DQ_INDEX_BITS)

TestSuite(pool_limit, .init = fixture_setup, .fini = fixture_teardown, .timeout = 30);

static struct dq_pool_stats stats(void)
{
    struct dq_pool_stats s;
    cr_assert_eq(dq_pool_stats(&s), 0);
    return s;
}

static void assert_same_pool(const struct dq_pool_stats *a,
                             const struct dq_pool_stats *b)
{
    cr_assert_eq(a->reserved_bytes, b->reserved_bytes);
    cr_assert_eq(a->nodes_total, b->nodes_total);
    cr_assert_eq(a->nodes_free, b->nodes_free);
    cr_assert_eq(a->nodes_cached, b->nodes_cached);
    cr_assert_eq(a->nodes_limbo, b->nodes_limbo);
    cr_assert_eq(a->nodes_in_use, b->nodes_in_use);
}

/* Post far-future messages to q until a post fails; returns how many
   were accepted, and the failure in *err.  Each accepted post holds a
   node of its own: no index is handed out twice. */
static uint64_t fill(dq_queue *on, int *err)
{
    static bool taken[POOL_NODES];
    memset(taken, 0, sizeof(taken));
    dq_msg m = msg_what(&target_a, 1);
    uint64_t accepted = 0;
    for (;;) {
        dq_token tok;
        int e = dq_post_at(on, &m, INT64_MAX, &tok);
        if (e != 0) {
            *err = e;
            return accepted;
        }
        accepted++;
        cr_assert_leq(accepted, POOL_NODES,
                      "more posts accepted than the pool has nodes");
        uint32_t i = index_of(tok);
        cr_assert(!taken[i], "node %u handed out twice", i);
        taken[i] = true;
    }
}

/* One thread fills the pool: every node is then a pending message, the
   poster's cache is empty and the free map too (the failing post scanned
   it all, and made no chunk). */
Test(pool_limit, a_full_pool_refuses_a_post_and_changes_nothing)
{
    int err = 0;
    uint64_t accepted = fill(q, &err);
    cr_assert_eq(err, -ENOMEM);
    cr_assert_eq(accepted, POOL_NODES);
    struct dq_pool_stats full = stats();
    cr_assert_eq(full.nodes_total, POOL_NODES);
    cr_assert_eq(full.nodes_in_use, POOL_NODES);
    cr_assert_eq(full.nodes_free + full.nodes_cached + full.nodes_limbo, 0);

    for (int i = 0; i < 3; i++) {
        dq_msg m = msg_what(&target_a, 2);
        cr_assert_eq(dq_post_at(q, &m, 0, NULL), -ENOMEM);
        cr_assert_eq(dq_post_sync_barrier(q, NULL), -ENOMEM);
        struct dq_pool_stats again = stats();
        assert_same_pool(&full, &again);
    }
    cr_assert_eq(dq_pending(q), POOL_NODES);
}

/* The nodes a torn-down queue drops come back, and the next posts take
   them without a new chunk. */
Test(pool_limit, a_full_pool_serves_posts_again_once_its_nodes_return)
{
    int err = 0;
    uint64_t accepted = fill(q, &err);
    cr_assert_eq(err, -ENOMEM);
    struct dq_pool_stats full = stats();

    dq_unref(q);
    q = NULL;
    cr_assert_eq(atomic_load(&rec.discards), accepted);
    struct dq_pool_stats back = stats();
    cr_assert_eq(back.nodes_in_use, 0);
    cr_assert_eq(back.nodes_total, full.nodes_total);

    dq_options o = recording_options();
    q = dq_create(&o);
    cr_assert_not_null(q);
    uint64_t again = fill(q, &err);
    cr_assert_eq(err, -ENOMEM);
    cr_assert_eq(again, accepted);
    struct dq_pool_stats refilled = stats();
    assert_same_pool(&full, &refilled);
}

/* A thread whose first post finds the pool full: it registers its cache,
   is refused, and its exit gives back nothing it does not hold. */
static void *post_once(void *arg)
{
    dq_msg m = msg_what(&target_b, 3);
    *(int *)arg = dq_post(q, &m, NULL);
    return NULL;
}

Test(pool_limit, a_new_thread_on_a_full_pool_is_refused)
{
    int err = 0;
    uint64_t accepted = fill(q, &err);
    cr_assert_eq(err, -ENOMEM);
    struct dq_pool_stats full = stats();

    int theirs = 0;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, post_once, &theirs), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(theirs, -ENOMEM);
    struct dq_pool_stats after = stats();
    assert_same_pool(&full, &after);
    cr_assert_eq(dq_pending(q), accepted);
}
