/* SPDX-License-Identifier: Apache-2.0 */
/*
 * (g) The real node pool (pool.c, not the stub) under two posting threads
 * that race to register their caches and grow it, one of which exits and
 * gives its nodes back while the other delivers: the registry's slot claim
 * and page push (slot_claim, cache_register; cache_release at thread
 * exit), the growth of the pool (grow: the chunk index CAS, carve_chunk's
 * slab cursor CAS and the race to map the slab, the release of chunks[k]
 * then chunk_free[k]), the scans (claim, take_if_free, scan_word's
 * acquire, take_word's exchange against give_back's release fetch_or),
 * the magazine and stash (mag_fill, dq_pool_take_cached), and the
 * looper's batch (dq_pool_batch_add, its flush at teardown).
 *
 * Sizes, for the model build only (BUILD.bazel): chunks of 64 nodes (one
 * free-map word), slabs of two chunks, magazines of 8 nodes, a page of 256
 * bytes (8 registry slots); so a grower keeps 8 nodes in its magazine and
 * 56 in its stash, and two growers share one slab (the loser of a race to
 * map it unmaps its own and carves from the winner's).
 *
 * Threads: 0 posts message 2, then is the consumer: one dq_next; 1 posts
 * message 1 and exits, giving back what its magazine and stash hold
 * (cache_release, the pool's thread-key destructor, at the end of its run).
 * Each first post registers a cache and finds no free word unless the
 * other thread's exit gave one back first: it grows the pool (both may
 * grow at once) or takes that word.  The message not delivered is
 * discarded by the teardown, whose batch flush gives the looper's retired
 * nodes back.  Invariants: each message reported exactly once, intact (a
 * node handed out twice while live carries the later post's payload, or
 * its push cycles the stack); the two tokens differ; after the teardown
 * every node made is back in the free map, none cached, in limbo or in
 * use, and no thread holds a cache (dq_pool_stats).  The consumer never
 * polls before it sleeps: a wake-up lost is a DEADLOCK.
 *
 * Runs: the first 200000 iterations of the context-bounded search with
 * bound 1, then 100000 random schedules.  The complete bound-1 search
 * (several million iterations, tens of microseconds each: a grow
 * initialises 64 nodes) is by hand: pool --sched=bound --bound=1.
 */
#include "harness.h"

struct pool : harness::test<pool, 2> {
    dq_token tok[3];

    void setup()
    {
        tok[1] = tok[2] = 0;
    }
    void run(unsigned index)
    {
        int what = index == 0 ? 2 : 1;
        dq_msg m = message(what);
        RL_ASSERT(dq_post(q, &m, &tok[what]) == 0);
        if (index == 0) {
            RL_ASSERT(dq_next(q, &m) == 0);
            got(m);
            /* counts the caches while thread 1 may be giving its back
               (dq_pool_count against cache_release) */
            struct dq_pool_stats st;
            RL_ASSERT(dq_pool_stats(&st) == 0);
            RL_ASSERT(st.threads <= 2 && st.nodes_total > 0);
        }
    }
    void check()
    {
        once(1);
        once(2);
        RL_ASSERT(delivered[1] + delivered[2] == 1);
        RL_ASSERT(tok[1] != 0 && tok[2] != 0 && tok[1] != tok[2]);
        struct dq_pool_stats st;
        RL_ASSERT(dq_pool_stats(&st) == 0);
        RL_ASSERT(st.nodes_total > 0 && st.nodes_total % 64 == 0);
        RL_ASSERT(st.nodes_free == st.nodes_total);
        RL_ASSERT(st.nodes_cached == 0 && st.nodes_limbo == 0 && st.nodes_in_use == 0);
        RL_ASSERT(st.threads == 0);
    }
};

int main(int argc, char **argv)
{
    return harness::main<pool>(
        "pool", argc, argv,
        { { rl::sched_bound, 1, 200000 }, { rl::sched_random, 0, 100000 } });
}
