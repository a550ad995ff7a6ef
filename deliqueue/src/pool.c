/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The type-stable node pool, shared by every queue of the process.
 *
 * Nodes live in chunks that are never freed.  Which nodes are free is a
 * bitmap, the free map: one bit per node, 64 nodes (8 KiB) to a word, set
 * while the node waits in the pool.  A thread takes whole words (one
 * exchange with 0 each), every non-empty one of the cache line of words
 * it finds first and of the lines after it until it holds 64 nodes, and
 * posts their nodes in address order from a magazine of 64 node pointers
 * (pool.h, dq_pool_cache); a looper gives retired nodes back by or-ing
 * their bits in, one fetch_or per word.
 * Takers scan the map from its low end, so the pool hands out the lowest
 * free nodes first, whatever order they were retired in: the posts of a
 * busy queue stay packed into few words, and the looper's sweep over them
 * walks a few 8 KiB stretches instead of a pointer chase over the whole
 * pool (bench/RESULTS.md, "Address-ordered reuse").  A bitmap has no ABA:
 * a word's bits are the nodes free now, whoever set them.
 *
 * A thread that exits gives its cached nodes back (pthread key destructor),
 * so memory stays bounded however many threads come and go.
 *
 * Chunks are carved from 2 MiB slabs, 2 MiB aligned and advised for
 * transparent huge pages, so a 100k-deep queue's nodes are a handful of
 * TLB entries (bench/RESULTS.md, "An aged pool").  The price is that the
 * first post of a process commits a slab, 2 MiB where THP is on, rather
 * than one chunk.
 *
 * Nothing here takes a lock, so that a post never waits for a thread the
 * scheduler has preempted (a SCHED_IDLE poster under load can stay off a
 * CPU for seconds): growing carves a chunk from the current slab with a
 * CAS, or maps a new slab (mmap, not malloc, whose arena lock is held
 * across its own mmap), and publishes it by chunk index; registering a
 * thread's cache claims a slot with a CAS.  Threads that grow at the same
 * moment each add a chunk, so the pool can exceed its need by one chunk
 * per concurrent grower.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pool.h"

/* The model build (model/relacy) may make chunks and slabs small, so that
   a grow's node initialisation fits a model-checked iteration; every
   other build uses the sizes below. */
#if defined(DQ_RELACY) && defined(DQ_POOL_MODEL_CHUNK_SHIFT)
#define CHUNK_SHIFT DQ_POOL_MODEL_CHUNK_SHIFT
#else
#define CHUNK_SHIFT 12
#endif
#define CHUNK_NODES (1u << CHUNK_SHIFT)
#define CHUNK_WORDS (CHUNK_NODES / DQ_POOL_WORD_NODES)
#define MAX_CHUNKS  (1u << (DQ_INDEX_BITS - CHUNK_SHIFT))
_Static_assert(DQ_INDEX_BITS >= CHUNK_SHIFT, "a pool of one chunk or more");
#if defined(DQ_RELACY) && defined(DQ_POOL_MODEL_SLAB_BYTES)
#define SLAB_BYTES ((size_t)DQ_POOL_MODEL_SLAB_BYTES)
#else
#define SLAB_BYTES ((size_t)2 << 20) /* one x86-64/arm64 (4 KiB granule) huge page */
#endif
#define SLAB_CHUNKS (SLAB_BYTES / (CHUNK_NODES * sizeof(dq_node)))
DQ_ATOMIC_LAYOUT_ASSERT(SLAB_CHUNKS *CHUNK_NODES * sizeof(dq_node) == SLAB_BYTES,
                        "a slab is a whole number of chunks");
_Static_assert(SLAB_CHUNKS >= 1, "a slab holds a chunk or more");
_Static_assert(CHUNK_WORDS *DQ_POOL_WORD_NODES == CHUNK_NODES,
               "a chunk is a whole number of free-map words");

/* Chunk table: entry k is written once, with release, by the thread that
   reserved index k (grow), and read with acquire (dq_pool_node from any
   thread). */
static _Atomic(dq_node *) chunks[MAX_CHUNKS];
/* The free map, CHUNK_WORDS words per chunk (carved from the chunk's
   slab).  Entry k is written once, with release, after chunks[k], when
   chunk k is published; a scan loads it with acquire, so it sees the words
   initialised, and passes over a chunk whose index is taken but which is
   not yet published (its grower may be preempted there for long: the
   scan must not wait, nor the pool grow for each claim meanwhile).  A
   thread holding one of a chunk's nodes reads the entry relaxed: the node
   reached it after the entry was published. */
static _Atomic(_Atomic(uint64_t) *) chunk_free[MAX_CHUNKS];
/* Chunk indexes taken (grow's CAS): the scans' end is their words. */
static _Atomic(uint32_t) chunks_reserved;
/* Chunks published: dq_pool_count's total (relaxed: a count). */
static _Atomic(uint32_t) chunks_made;
/* Where a scan starts: below it every word was empty when a scan passed,
   unless a give-back lowered it since.  Only a hint (relaxed): a give-back
   can race with a scan that raises it past the word just refilled, and
   such bits wait for the scan from 0 that grow makes before it adds a
   chunk. */
static _Atomic(uint32_t) scan_from;

/* The slab chunks are carved from: its address, 2 MiB aligned, or'ed with
   the number of its chunks handed out (the low bits).  Moved on by CAS;
   a slab, once installed, is never unmapped. */
static _Atomic(uintptr_t) slab_cursor;
/* Bytes mapped for slabs and their free-map words (relaxed: a count). */
static _Atomic(uint64_t) reserved_bytes;

/* The registry of threads' caches, for dq_pool_count: slots, never freed,
   on a list that only grows (a push is a CAS on its head), each claimed
   by one thread from its first slow post until its exit, then reused.
   state: SLOT_TAKEN while a thread owns the slot, SLOT_LIVE while its
   cache may be read, plus SLOT_READER per dq_pool_count reading it. */
struct dq_pool_slot {
    struct dq_pool_slot *next; /* fixed before the slot is pushed */
    _Atomic(uint32_t) state;
    struct dq_pool_cache *cache; /* written by the owner before SLOT_LIVE */
};
#define SLOT_TAKEN  1u
#define SLOT_LIVE   2u
#define SLOT_READER 4u
static _Atomic(struct dq_pool_slot *) slots;

DQ_THREAD_LOCAL(struct dq_pool_cache, dq_pool_cache);
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

#ifdef DQ_TEST_HOOKS
#include <deliqueue/testing.h>
static _Atomic(void (*)(int)) pool_hook;
void dq_test_pool_hook(void (*fn)(int point))
{
    atomic_store(&pool_hook, fn);
}
static void pool_point(int point)
{
    void (*fn)(int) = atomic_load(&pool_hook);
    if (fn != NULL)
        fn(point);
}
static _Atomic(bool (*)(int)) fault_hook;
void dq_test_pool_fault(bool (*fn)(int step))
{
    atomic_store(&fault_hook, fn);
}
static bool pool_fault(int step)
{
    bool (*fn)(int) = atomic_load(&fault_hook);
    return fn != NULL && fn(step);
}
#else
#define pool_point(point) ((void)0)
#define pool_fault(step)  false
#endif

dq_node *dq_pool_node(uint32_t index)
{
    if (index >= (1u << DQ_INDEX_BITS))
        return NULL;
    /* acquire: pairs with the release store that published the chunk, so
       the node's immutable index and its atomics' initial values are seen */
    dq_node *chunk =
        atomic_load_explicit(&chunks[index >> CHUNK_SHIFT], memory_order_acquire);
    return chunk ? &chunk[index & (CHUNK_NODES - 1)] : NULL;
}

/* Word w of the map, for a thread holding one of its chunk's nodes. */
static _Atomic(uint64_t) *free_word(uint32_t w)
{
    /* relaxed: the node reached the caller after the entry (chunk_free) */
    _Atomic(uint64_t) *words =
        atomic_load_explicit(&chunk_free[w / CHUNK_WORDS], memory_order_relaxed);
    return &words[w % CHUNK_WORDS];
}

/* Word w of the map, for a scan: NULL while its chunk is unpublished. */
static _Atomic(uint64_t) *scan_word(uint32_t w)
{
    /* acquire: pairs with grow's release of the entry, so the words'
       initial bits (and through them the nodes) are seen */
    _Atomic(uint64_t) *words =
        atomic_load_explicit(&chunk_free[w / CHUNK_WORDS], memory_order_acquire);
    return words != NULL ? &words[w % CHUNK_WORDS] : NULL;
}

/* The end of the scans: the words of every chunk whose index is taken. */
static uint32_t scan_end(void)
{
    /* relaxed: each chunk's words are acquired on their own (scan_word) */
    return atomic_load_explicit(&chunks_reserved, memory_order_relaxed) * CHUNK_WORDS;
}

/* Take every free node of word *p: the word's bits, which are then 0. */
static uint64_t take_word(_Atomic(uint64_t) *p)
{
    /* acquire: pairs with give_back's release (the nodes' resets) */
    return atomic_exchange_explicit(p, 0, memory_order_acquire);
}

/* Take every free node of word w, if it looks non-empty: 0 if not, or if a
   racing taker had them first. */
static uint64_t take_if_free(uint32_t w)
{
    _Atomic(uint64_t) *p = scan_word(w);
    /* relaxed: only whether to try; the exchange decides */
    if (p == NULL || atomic_load_explicit(p, memory_order_relaxed) == 0)
        return 0;
    return take_word(p);
}

/* The free-map word of node n, and its bit there. */
static uint32_t word_of(const dq_node *n)
{
    return n->index / DQ_POOL_WORD_NODES;
}
static uint64_t bit_of(const dq_node *n)
{
    return UINT64_C(1) << (n->index % DQ_POOL_WORD_NODES);
}

/* Put the nodes of mask in word w back into the map. */
static void give_back(uint32_t w, uint64_t mask)
{
    /* release: the nodes' resets (new generation, FREE) and owners happen
       before the taker's acquire exchange; every write to a word is an
       RMW, so whichever exchange takes these bits reads from this
       release sequence */
    atomic_fetch_or_explicit(free_word(w), mask, memory_order_release);
    /* relaxed: a hint (see scan_from); lowered so the next scan finds
       these low nodes before higher ones */
    uint32_t from = atomic_load_explicit(&scan_from, memory_order_relaxed);
    while (w < from && !atomic_compare_exchange_weak_explicit(&scan_from, &from, w,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed))
        ;
}

/* Move nodes from the stash into the empty magazine, in address order,
   up to DQ_POOL_MAG_NODES (a word may be split: its remaining bits stay
   in the stash), and prefetch the first DQ_POOL_AHEAD; the posts prefetch
   the rest, each DQ_POOL_AHEAD ahead (dq_pool_take_cached).  Entries past
   the fill keep pointing at nodes: the ones just after it get the last
   node filled, so that the posts' prefetches stay on real nodes. */
static void mag_fill(void)
{
    uint32_t k = 0, i = DQ_TLS(dq_pool_cache).stash_next;
    while (k < DQ_POOL_MAG_NODES && i < DQ_TLS(dq_pool_cache).stash_count) {
        dq_node *base =
            dq_pool_node(DQ_TLS(dq_pool_cache).stash_word[i] * DQ_POOL_WORD_NODES);
        uint64_t mask = DQ_TLS(dq_pool_cache).stash_mask[i];
        for (; mask != 0 && k < DQ_POOL_MAG_NODES; mask &= mask - 1)
            DQ_TLS(dq_pool_cache).mag[k++] = base + __builtin_ctzll(mask);
        DQ_TLS(dq_pool_cache).stash_mask[i] = mask;
        if (mask == 0)
            i++;
    }
    DQ_TLS(dq_pool_cache).stash_next = i;
    assert(k > 0); /* callers fill the stash first, with non-empty words */
    for (uint32_t j = k; j < k + DQ_POOL_AHEAD && j < DQ_POOL_MAG_NODES; j++)
        DQ_TLS(dq_pool_cache).mag[j] = DQ_TLS(dq_pool_cache).mag[k - 1];
    for (uint32_t j = 0; j < k && j < DQ_POOL_AHEAD; j++)
        dq_prefetch_node_for_post(DQ_TLS(dq_pool_cache).mag[j]);
    uint32_t stashed = 0;
    for (; i < DQ_TLS(dq_pool_cache).stash_count; i++)
        stashed += (uint32_t)__builtin_popcountll(DQ_TLS(dq_pool_cache).stash_mask[i]);
    /* relaxed: this thread's own fields, read by dq_pool_count */
    atomic_store_explicit(&DQ_TLS(dq_pool_cache).stash_nodes, stashed,
                          memory_order_relaxed);
    atomic_store_explicit(&DQ_TLS(dq_pool_cache).next, 0, memory_order_relaxed);
    atomic_store_explicit(&DQ_TLS(dq_pool_cache).count, k, memory_order_relaxed);
}

/* The stash holds exactly word w's free nodes (mask). */
static void stash_one(uint32_t w, uint64_t mask)
{
    DQ_TLS(dq_pool_cache).stash_word[0] = w;
    DQ_TLS(dq_pool_cache).stash_mask[0] = mask;
    DQ_TLS(dq_pool_cache).stash_next = 0;
    DQ_TLS(dq_pool_cache).stash_count = 1;
}

/* Take the lowest non-empty word at or above scan_from and the other
   non-empty words of its cache line into the (empty) stash; then the
   non-empty words of the lines after it while the claim holds less than
   a magazine's worth of nodes and the stash has room for a line: under
   steady random delays the looper gives nodes back a few to a word, and
   a claim's misses (the hint, the map line, the first node) are paid
   once per claim. */
static bool claim(void)
{
    uint32_t total = scan_end();
    uint32_t from = atomic_load_explicit(&scan_from, memory_order_relaxed);
    uint32_t w = from;
    uint64_t mask = 0;
    for (; w < total && mask == 0; w++)
        mask = take_if_free(w);
    if (mask == 0)
        return false;
    uint32_t first = w - 1, n = 1, nodes = (uint32_t)__builtin_popcountll(mask);
    stash_one(first, mask);
    /* the rest of the line is here now: take its words too, and go on
       by whole lines while the claim is short */
    uint32_t line_end = (first | (DQ_POOL_LINE_WORDS - 1)) + 1;
    for (;;) {
        if (line_end > total)
            line_end = total;
        for (uint32_t v = w; v < line_end; v++) {
            uint64_t more = take_if_free(v);
            if (more != 0) {
                DQ_TLS(dq_pool_cache).stash_word[n] = v;
                DQ_TLS(dq_pool_cache).stash_mask[n] = more;
                n++;
                nodes += (uint32_t)__builtin_popcountll(more);
            }
        }
        w = line_end;
        if (nodes >= DQ_POOL_MAG_NODES || w == total ||
            n + DQ_POOL_LINE_WORDS > DQ_POOL_STASH_WORDS)
            break;
        line_end = w + DQ_POOL_LINE_WORDS;
    }
    DQ_TLS(dq_pool_cache).stash_count = n;
    uint32_t next = n > 1 ? w : first;
    if (next != from) /* relaxed: a hint; lost to a racing update, fine */
        atomic_compare_exchange_strong_explicit(
            &scan_from, &from, next, memory_order_relaxed, memory_order_relaxed);
    return true;
}

/* Claim a free slot of the registry, or push a page of new ones and take
   its first; NULL: out of memory. */
static struct dq_pool_slot *slot_claim(void)
{
    /* acquire: pairs with the push's release, so the slots' links and
       initial states are seen */
    struct dq_pool_slot *s = atomic_load_explicit(&slots, memory_order_acquire);
    for (; s != NULL; s = s->next) {
        /* Unowned: neither TAKEN nor LIVE, whatever readers pass (one that
           counts itself into a slot that is not LIVE never reads it).
           acquire: pairs with the last owner's release of SLOT_TAKEN, so
           its writes to the slot come first */
        uint32_t st = atomic_load_explicit(&s->state, memory_order_relaxed);
        while ((st & (SLOT_TAKEN | SLOT_LIVE)) == 0)
            if (atomic_compare_exchange_weak_explicit(&s->state, &st, st | SLOT_TAKEN,
                                                      memory_order_acquire,
                                                      memory_order_relaxed))
                return s;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    struct dq_pool_slot *fresh = (struct dq_pool_slot *)mmap(
        NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fresh == MAP_FAILED)
        return NULL;
    size_t n = page / sizeof(*fresh);
    for (size_t i = 0; i + 1 < n; i++)
        fresh[i].next = &fresh[i + 1];
    atomic_init(&fresh[0].state, SLOT_TAKEN);
    struct dq_pool_slot *head = atomic_load_explicit(&slots, memory_order_relaxed);
    pool_point(DQ_TEST_POOL_SLOT_PAGE);
    do
        fresh[n - 1].next = head;
    /* release: publishes the page's links and states to slot_claim's and
       dq_pool_count's acquire loads of the head */
    while (!atomic_compare_exchange_weak_explicit(
        &slots, &head, fresh, memory_order_release, memory_order_relaxed));
    return &fresh[0];
}

static void cache_release(void *unused)
{
    (void)unused;
    /* the magazine's nodes, one give-back per run of a word (a batch) */
    dq_pool_batch batch;
    dq_pool_batch_init(&batch);
    /* relaxed, loads and stores: this thread's own fields (dq_pool_cache) */
    uint32_t next =
        atomic_load_explicit(&DQ_TLS(dq_pool_cache).next, memory_order_relaxed);
    uint32_t count =
        atomic_load_explicit(&DQ_TLS(dq_pool_cache).count, memory_order_relaxed);
    for (uint32_t i = next; i < count; i++)
        dq_pool_batch_add(&batch, DQ_TLS(dq_pool_cache).mag[i]);
    dq_pool_batch_flush(&batch);
    for (uint32_t i = DQ_TLS(dq_pool_cache).stash_next;
         i < DQ_TLS(dq_pool_cache).stash_count; i++)
        if (DQ_TLS(dq_pool_cache).stash_mask[i] != 0)
            give_back(DQ_TLS(dq_pool_cache).stash_word[i],
                      DQ_TLS(dq_pool_cache).stash_mask[i]);
    atomic_store_explicit(&DQ_TLS(dq_pool_cache).next, 0, memory_order_relaxed);
    atomic_store_explicit(&DQ_TLS(dq_pool_cache).count, 0, memory_order_relaxed);
    atomic_store_explicit(&DQ_TLS(dq_pool_cache).stash_nodes, 0, memory_order_relaxed);
    DQ_TLS(dq_pool_cache).stash_next = DQ_TLS(dq_pool_cache).stash_count = 0;
    struct dq_pool_slot *slot = DQ_TLS(dq_pool_cache).slot;
    if (slot == NULL)
        return;
    DQ_TLS(dq_pool_cache).slot = NULL;
    /* The cache is this thread's storage, gone when the thread is: a
       reader either added itself before SLOT_LIVE went (then this waits
       for it to leave) or sees SLOT_LIVE clear and does not read it.  The
       wait is a reader's few loads, so an exiting thread, never a post,
       can wait for a preempted dq_pool_stats. */
    atomic_fetch_and_explicit(&slot->state, ~SLOT_LIVE, memory_order_relaxed);
    /* acquire: pairs with each reader's release as it leaves, so its
       reads of the cache happen before the storage is freed */
    while (atomic_load_explicit(&slot->state, memory_order_acquire) >= SLOT_READER)
        sched_yield();
    /* release: pairs with the next owner's acquire claim */
    atomic_fetch_and_explicit(&slot->state, ~SLOT_TAKEN, memory_order_release);
}

/* In the child of a fork only the forking thread lives on: the other
   threads' slots are unowned again (the nodes their caches held are lost
   to the child's pool), and readers counted in at the fork never leave,
   so nothing may wait for them. */
static void pool_atfork_child(void)
{
    /* relaxed: the child has one thread */
    struct dq_pool_slot *s = atomic_load_explicit(&slots, memory_order_relaxed);
    for (; s != NULL; s = s->next)
        atomic_store_explicit(
            &s->state, s == DQ_TLS(dq_pool_cache).slot ? SLOT_TAKEN | SLOT_LIVE : 0,
            memory_order_relaxed);
}

static void cache_key_create(void)
{
    (void)pthread_key_create(&cache_key, cache_release);
    (void)pthread_atfork(NULL, NULL, pool_atfork_child);
}

/* Put the calling thread's cache on the registry; -1: out of memory. */
static int cache_register(void)
{
    (void)pthread_once(&cache_key_once, cache_key_create);
    struct dq_pool_slot *slot = slot_claim();
    if (slot == NULL)
        return -1;
    /* any non-NULL value makes the destructor run at thread exit; without
       it the slot would outlive the thread's cache (ENOMEM: glibc
       allocates for keys past its first 32) */
    if (pool_fault(DQ_TEST_POOL_SET_KEY) ||
        pthread_setspecific(cache_key, &DQ_TLS(dq_pool_cache)) != 0) {
        /* release: as cache_release's */
        atomic_fetch_and_explicit(&slot->state, ~SLOT_TAKEN, memory_order_release);
        return -1;
    }
    slot->cache = &DQ_TLS(dq_pool_cache);
    DQ_TLS(dq_pool_cache).slot = slot;
    pool_point(DQ_TEST_POOL_REGISTER);
    /* release: pairs with a reader's acquire, so it sees slot->cache */
    atomic_fetch_or_explicit(&slot->state, SLOT_LIVE, memory_order_release);
    return 0;
}

/* The bytes of a slab's free-map words: a page mapped just past it. */
#define SLAB_WORDS_BYTES (SLAB_CHUNKS * CHUNK_WORDS * sizeof(uint64_t))
_Static_assert(SLAB_WORDS_BYTES <= 4096, "a slab's free-map words fit in a page");
#define SLAB_USED ((uintptr_t)SLAB_BYTES - 1) /* slab_cursor's count bits */

/* A slab's mapping: the slab and the page of free-map words past it. */
static size_t slab_mapped_bytes(void)
{
    return SLAB_BYTES + (size_t)sysconf(_SC_PAGESIZE);
}

/* Map a slab, SLAB_BYTES aligned, with a page for its free-map words just
   past it; 0: out of memory. */
static uintptr_t slab_map(void)
{
    if (pool_fault(DQ_TEST_POOL_MAP_SLAB))
        return 0;
    size_t keep = slab_mapped_bytes(), len = SLAB_BYTES + keep;
    char *p = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    uintptr_t base = ((uintptr_t)p + SLAB_USED) & ~SLAB_USED;
    size_t head = base - (uintptr_t)p;
    if (head != 0)
        (void)munmap(p, head);
    (void)munmap((char *)base + keep, len - head - keep);
#ifdef MADV_HUGEPAGE
    /* a hint: EINVAL where the kernel has no THP, and a no-op when it is
       set to never; then the slab is 4 KiB pages */
    (void)madvise((void *)base, SLAB_BYTES, MADV_HUGEPAGE);
#endif
    return base;
}

/* Chunk i of the slab at base, and its free-map words in *words. */
static dq_node *slab_chunk(uintptr_t base, uintptr_t i, _Atomic(uint64_t) **words)
{
    *words = (_Atomic(uint64_t) *)(base + SLAB_BYTES) + i * CHUNK_WORDS;
    return (dq_node *)(base + i * CHUNK_NODES * sizeof(dq_node));
}

/* Memory for a new chunk and its free-map words, from the current slab or
   a new one; NULL: out of memory.  A thread that loses the race to install
   a new slab unmaps its own and carves from the winner's. */
static dq_node *carve_chunk(_Atomic(uint64_t) **words)
{
    /* relaxed, here and in each CAS: the cursor hands out addresses and
       nothing else.  An installer writes nothing into its slab (a fresh,
       zero-filled mapping, in place once mmap returned), and a carver
       writes only its own chunk, which reaches others through the chunk
       table's release (grow). */
    uintptr_t cur = atomic_load_explicit(&slab_cursor, memory_order_relaxed);
    for (;;) {
        if (cur != 0 && (cur & SLAB_USED) < SLAB_CHUNKS) {
            if (atomic_compare_exchange_weak_explicit(&slab_cursor, &cur, cur + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
                return slab_chunk(cur & ~SLAB_USED, cur & SLAB_USED, words);
            continue;
        }
        uintptr_t fresh = slab_map();
        if (fresh == 0)
            return NULL;
        if (atomic_compare_exchange_strong_explicit(&slab_cursor, &cur, fresh | 1,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed)) {
            /* relaxed: a count */
            atomic_fetch_add_explicit(&reserved_bytes, slab_mapped_bytes(),
                                      memory_order_relaxed);
            return slab_chunk(fresh, 0, words);
        }
        (void)munmap((void *)fresh, slab_mapped_bytes());
    }
}

/* No word was found free from scan_from up: scan the whole map (bits a
   racing hint update stranded below scan_from, see there), and only if it
   is empty make a chunk, keeping its first word for this thread.  Fills
   the stash; -1: out of memory. */
static int grow(void)
{
    /* relaxed: scan_from is a hint where takers start (see its store) */
    uint32_t from = atomic_load_explicit(&scan_from, memory_order_relaxed);
    uint32_t total = scan_end();
    for (uint32_t w = 0; w < total; w++) {
        uint64_t mask = take_if_free(w);
        if (mask != 0) {
            stash_one(w, mask);
            return 0;
        }
    }
    /* relaxed: the index is the claim; the chunk is published below.
       Taken before the memory, so that a pool at MAX_CHUNKS maps no more */
    uint32_t k = atomic_load_explicit(&chunks_reserved, memory_order_relaxed);
    do
        if (k == MAX_CHUNKS)
            return -1;
    while (!atomic_compare_exchange_weak_explicit(
        &chunks_reserved, &k, k + 1, memory_order_relaxed, memory_order_relaxed));
    _Atomic(uint64_t) *words;
    dq_node *chunk = carve_chunk(&words);
    if (chunk == NULL) {
        /* give the index back if no later one was taken; else it stays a
           hole, which scans pass over as an unpublished chunk */
        uint32_t taken = k + 1;
        (void)atomic_compare_exchange_strong_explicit(
            &chunks_reserved, &taken, k, memory_order_relaxed, memory_order_relaxed);
        return -1;
    }
    pool_point(DQ_TEST_POOL_GROW);
    /* the slab is a fresh mapping: zero-filled */
    uint32_t base = k << CHUNK_SHIFT;
    for (uint32_t i = 0; i < CHUNK_NODES; i++) {
        dq_node *n = &chunk[i];
        n->index = base + i;
        n->heap.index = DQ_HEAP_NONE;
        atomic_init(&n->state, dq_state_make(1, 0, DQ_FREE));
        atomic_init(&n->next, NULL);
        atomic_init(&n->owner, NULL);
    }
    /* word 0 is this thread's (the cache below); the others are free */
    atomic_init(&words[0], 0);
    for (uint32_t w = 1; w < CHUNK_WORDS; w++)
        atomic_init(&words[w], ~UINT64_C(0));
    /* The chunk first, then its words: a scan that takes a word of the
       chunk maps its nodes through chunks[k] at once (mag_fill).  A token
       lookup may reach a node before the words are published; it finds
       it FREE, generation 1, which no token names.
       release: pairs with dq_pool_node's acquire, so a token's lookup
       sees the nodes' initial state */
    atomic_store_explicit(&chunks[k], chunk, memory_order_release);
    pool_point(DQ_TEST_POOL_PUBLISH);
    /* release: pairs with scan_word's acquire (the words' initial bits
       and, through them and chunks[k] before them, the nodes) */
    atomic_store_explicit(&chunk_free[k], words, memory_order_release);
    /* relaxed: a count */
    atomic_fetch_add_explicit(&chunks_made, 1, memory_order_relaxed);
    /* relaxed, both: a hint.  Raised past the words the scan above saw
       empty, unless a give-back lowered it meanwhile; and lowered to this
       chunk's free words if a concurrent grower raised it past them. */
    uint32_t first_free = k * CHUNK_WORDS + 1;
    if (from < first_free)
        atomic_compare_exchange_strong_explicit(
            &scan_from, &from, first_free, memory_order_relaxed, memory_order_relaxed);
    uint32_t now = atomic_load_explicit(&scan_from, memory_order_relaxed);
    while (now > first_free && !atomic_compare_exchange_weak_explicit(
                                   &scan_from, &now, first_free, memory_order_relaxed,
                                   memory_order_relaxed))
        ;
    stash_one(k * CHUNK_WORDS, ~UINT64_C(0));
    return 0;
}

dq_node *dq_pool_get_slow(void)
{
    if (DQ_TLS(dq_pool_cache).slot == NULL && cache_register() != 0)
        return NULL;
    if (dq_pool_cache_empty()) {
        if (DQ_TLS(dq_pool_cache).stash_next == DQ_TLS(dq_pool_cache).stash_count &&
            !claim() && grow() != 0)
            return NULL;
        mag_fill();
    }
    return dq_pool_take_cached();
}

void dq_pool_unget(dq_node *n)
{
    /* the last node this thread took: back to the front of its magazine
       (relaxed: this thread's own field) */
    uint32_t i =
        atomic_load_explicit(&DQ_TLS(dq_pool_cache).next, memory_order_relaxed);
    if (i > 0 && DQ_TLS(dq_pool_cache).mag[i - 1] == n) {
        atomic_store_explicit(&DQ_TLS(dq_pool_cache).next, i - 1, memory_order_relaxed);
        return;
    }
    give_back(word_of(n), bit_of(n));
}

/* The batch's mask: relaxed, as its one owner writes it (dq_pool_batch). */
static uint64_t batch_mask(const dq_pool_batch *b)
{
    return atomic_load_explicit(&b->mask, memory_order_relaxed);
}

void dq_pool_batch_add(dq_pool_batch *b, dq_node *n)
{
    uint32_t w = word_of(n);
    uint64_t mask = batch_mask(b);
    if (mask != 0 && b->word != w) {
        give_back(b->word, mask);
        mask = 0;
    }
    b->word = w;
    mask |= bit_of(n);
    /* relaxed: the batch's one owner writes it; dq_pool_stats only reads
       it (the nodes reach the map through give_back's release) */
    atomic_store_explicit(&b->mask, mask, memory_order_relaxed);
    if (mask == ~UINT64_C(0))
        dq_pool_batch_flush(b);
}

void dq_pool_batch_flush(dq_pool_batch *b)
{
    uint64_t mask = batch_mask(b);
    if (mask != 0)
        give_back(b->word, mask);
    dq_pool_batch_init(b);
}

void dq_pool_count(uint64_t *reserved, uint64_t *total, uint64_t *free_nodes,
                   uint64_t *cached, uint64_t *threads)
{
    /* relaxed: counts, exact once every grower has returned */
    *reserved = atomic_load_explicit(&reserved_bytes, memory_order_relaxed);
    *total = (uint64_t)atomic_load_explicit(&chunks_made, memory_order_relaxed) *
             CHUNK_NODES;
    uint32_t words = scan_end();
    uint64_t nfree = 0;
    for (uint32_t w = 0; w < words; w++) {
        _Atomic(uint64_t) *p = scan_word(w);
        /* relaxed: a count, not a claim */
        if (p != NULL)
            nfree += (uint64_t)__builtin_popcountll(
                atomic_load_explicit(p, memory_order_relaxed));
    }
    *free_nodes = nfree;
    uint64_t held = 0, live = 0;
    /* acquire: pairs with slot_claim's push */
    struct dq_pool_slot *s = atomic_load_explicit(&slots, memory_order_acquire);
    for (; s != NULL; s = s->next) {
        /* acquire: pairs with cache_register's release of SLOT_LIVE (the
           cache pointer); while counted here, the owner's exit waits */
        uint32_t st =
            atomic_fetch_add_explicit(&s->state, SLOT_READER, memory_order_acquire);
        if (st & SLOT_LIVE) {
            pool_point(DQ_TEST_POOL_STATS);
            const struct dq_pool_cache *c = s->cache;
            /* relaxed: each owner stores its own counts (dq_pool_cache) */
            uint32_t next = atomic_load_explicit(&c->next, memory_order_relaxed);
            uint32_t count = atomic_load_explicit(&c->count, memory_order_relaxed);
            held += (count > next ? count - next : 0) +
                    atomic_load_explicit(&c->stash_nodes, memory_order_relaxed);
            live++;
        }
        /* release: pairs with the exiting owner's acquire wait */
        atomic_fetch_sub_explicit(&s->state, SLOT_READER, memory_order_release);
    }
    *threads = live;
    *cached = held;
}
