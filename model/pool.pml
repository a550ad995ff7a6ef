/*
 * pool.pml: the node pool's two lock-free slow paths: a chunk's
 * publication to the scans, and the registry of threads' caches that
 * dq_pool_stats reads while threads come and go.
 *
 * C functions abstracted (deliqueue/src/pool.c):
 *   grow          take a chunk index (CAS on chunks_reserved), initialise
 *                 the nodes, store chunks[k], then chunk_free[k] (release)
 *   claim         scan every index taken: skip a chunk whose chunk_free
 *                 entry is NULL (scan_word, acquire), else exchange a
 *                 word with 0 and map its nodes through chunks[k]
 *                 (mag_fill, dq_pool_node)
 *   slot_claim    CAS a slot's state from one without TAKEN|LIVE to
 *                 that | TAKEN (readers may be counted in)
 *   cache_register  slot->cache = the thread's cache; state |= LIVE
 *   cache_release   state &= ~LIVE; wait while readers are counted;
 *                 (the thread's storage goes); state &= ~TAKEN
 *   dq_pool_count   skip a slot not LIVE; state += READER; if LIVE in
 *                 what the add read, read the cache; state -= READER
 *
 * Threads: a grower and a scanner (chunk publication); two owners of one
 * slot in turn (the second claims it after the first exits) and two
 * dq_pool_count readers (the registry).
 *
 * Invariants: a scan never maps a word of a chunk the chunk table does
 * not yet hold (asserted where mag_fill would use it); a reader never
 * reads a cache whose thread's storage is gone (asserted at the read);
 * the second owner always gets the slot (no invalid end state: an owner
 * stuck in its claim loop or its exit wait is an error).
 *
 * Abstracted away, and why that is sound:
 *   - one chunk of one word, one slot: each property is about one chunk
 *     or one slot, and chunks and slots do not interact;
 *   - the cache's contents are one ghost flag (alive), the property being
 *     about its lifetime;
 *   - the state word as three fields updated together in atomic blocks,
 *     as the C does with one RMW on one word.
 * Memory: the publication is message passing (release stores of
 * chunks[k] then chunk_free[k], the scan's acquire load of the entry), so
 * SC is the model; ARMv8 keeps the order of the two release stores as
 * seen by an acquire load.  Every write to a slot's state is an RMW.
 *
 * Mutants:
 *   -DMUTANT_WORDS_BEFORE_CHUNK  chunk_free[k] published before chunks[k]:
 *                                a scan maps a word of a missing chunk;
 *   -DMUTANT_EXIT_NO_WAIT        the exiting owner does not wait for the
 *                                slot's readers: one reads freed storage;
 *   -DMUTANT_READER_UNCOUNTED    a reader reads the cache on a load of
 *                                LIVE without counting itself in first.
 */

#define TAKEN  1
#define LIVE   2
#define READER 4

bool chunk_reserved, chunk_set, words_set;  /* chunks_reserved; chunks[k]; chunk_free[k] */
bool word_free;                             /* the chunk's free word */
byte state;                                 /* the slot's state */
bool alive;                                 /* ghost: the slot's cache storage exists */
byte owners_done;                           /* owners through their whole life */

proctype grower() {
  chunk_reserved = 1;                       /* CAS on chunks_reserved */
  word_free = 1;                            /* initialise nodes and words */
#ifdef MUTANT_WORDS_BEFORE_CHUNK
  words_set = 1;
  chunk_set = 1
#else
  chunk_set = 1;                            /* chunks[k], release */
  words_set = 1                             /* chunk_free[k], release */
#endif
}

proctype scanner() {
  bool took;
  do
  :: chunk_reserved && words_set ->         /* scan_word: acquire, non-NULL */
     atomic { took = word_free; word_free = 0 };   /* exchange */
     if
     :: took -> assert(chunk_set)           /* mag_fill: dq_pool_node(k) */
     :: else -> skip
     fi;
     break
  :: chunk_reserved && !words_set -> skip   /* unpublished: passed over, the
                                               scan goes round again */
  od
}

proctype owner() {
  byte st;
  /* slot_claim */
  do
  :: atomic {
       st = state;
       if
       :: (st & (TAKEN | LIVE)) == 0 -> state = st | TAKEN; break
       :: else -> skip                      /* the previous owner still has it */
       fi
     }
  od;
  /* cache_register */
  alive = 1;                                /* slot->cache = &this thread's cache */
  state = state | LIVE;                     /* fetch_or, release */
  /* ... the thread posts, then exits: cache_release */
  state = state & ~LIVE;                    /* fetch_and */
#ifndef MUTANT_EXIT_NO_WAIT
  (state < READER);                         /* acquire: no reader counted */
#endif
  alive = 0;                                /* the thread's storage goes */
  state = state & ~TAKEN;                   /* fetch_and, release */
  owners_done++
}

proctype reader() {
  byte st;
  byte rounds = 2;
  do
  :: rounds > 0 ->
     rounds--;
     if
     :: (state & LIVE) ->                   /* relaxed: only whether to look */
#ifdef MUTANT_READER_UNCOUNTED
        assert(alive)                       /* reads the cache uncounted */
#else
        atomic { st = state; state = state + READER };   /* fetch_add, acquire */
        if
        :: (st & LIVE) -> assert(alive)     /* reads c->next, count, ... */
        :: else -> skip
        fi;
        state = state - READER              /* fetch_sub, release */
#endif
     :: else -> skip
     fi
  :: else -> break
  od
}

init {
  atomic {
    run grower(); run scanner();
    run owner(); run reader(); run reader()
  };
  /* the second owner claims the slot after the first (or alongside it,
     waiting in its claim loop until the first has left) */
  run owner();
  (owners_done == 2)
}
