/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for deliqueue/src/pool.c, for the harnesses that check the
 * queue rather than the pool: pool.h's functions, with every node made
 * fresh and none ever handed out twice.  The real pool keeps process-wide
 * state (slabs, the free map, a thread key) that a model run would have
 * to reset per iteration, and its own protocols are model/pool.pml's.
 *
 * What it keeps of the real pool: nodes are type-stable (never freed in
 * an iteration), indexed for tokens (dq_pool_node), generation 1 on their
 * first post.  What it adds: a node given back (a looper's recycle, an
 * unget, the teardown) has its `next` and `owner` poisoned, so a walker
 * that still follows a recycled node (the epochs failed to protect it)
 * fails the iteration as "ACCESS TO FREED MEMORY".  Its state word stays
 * readable: a stale token legitimately reads it to find the generation
 * moved on.  The real pool would hand such a node to the next post
 * instead; under a never-recycling pool a bug of that kind is caught at
 * the first stale access rather than by what the re-post overwrites.
 */
#include <vector>

#include "dq_relacy.h"

#include "deliqueue/src/pool.h"

/* Every post finds the magazine empty and asks dq_pool_get_slow. */
DQ_THREAD_LOCAL(struct dq_pool_cache, dq_pool_cache);

namespace
{

/* This iteration's nodes by index. */
std::vector<dq_node *, dq_rl::raw_allocator<dq_node *>> &nodes()
{
    static std::vector<dq_node *, dq_rl::raw_allocator<dq_node *>> table;
    static uint32_t stamp;
    if (stamp != dq_rl::iteration) {
        table.clear(); /* the last iteration's nodes went with it (keep) */
        stamp = dq_rl::iteration;
    }
    return table;
}

void poison(dq_node *n)
{
    n->next.stamp_ = dq_rl::RECYCLED;
    n->owner.stamp_ = dq_rl::RECYCLED;
}

} // namespace

dq_node *dq_pool_get_slow(void)
{
    dq_node *n = dq_rl::make_object<dq_node>();
    dq_rl::keep(n, dq_rl::drop_object<dq_node>);
    n->index = (uint32_t)nodes().size();
    n->heap.index = DQ_HEAP_NONE;
    atomic_init(&n->state, dq_state_make(1, false, DQ_FREE));
    atomic_init(&n->next, (dq_node *)NULL);
    atomic_init(&n->owner, (void *)NULL);
    nodes().push_back(n);
    return n;
}

void dq_pool_unget(dq_node *n)
{
    poison(n);
}

dq_node *dq_pool_node(uint32_t index)
{
    return index < nodes().size() ? nodes()[index] : NULL;
}

void dq_pool_batch_add(dq_pool_batch *b, dq_node *n)
{
    (void)b;
    poison(n);
}

void dq_pool_batch_flush(dq_pool_batch *b)
{
    (void)b;
}

void dq_pool_count(uint64_t *reserved_bytes, uint64_t *total, uint64_t *free_nodes,
                   uint64_t *cached, uint64_t *threads)
{
    *reserved_bytes = *total = *free_nodes = *cached = *threads = 0;
}
