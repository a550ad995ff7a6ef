/*
 * walker_epochs.pml: the walkers' grace periods; the looper recycles an
 * unlinked node only when no walker can stand on it.
 *
 * C functions abstracted (every step below names its own):
 *   deliqueue/src/core_walk.c, any_claim.c  dq_walk_begin, dq_walk_end, match_walk_run (the
 *                           walk over the stack's links)
 *   deliqueue/src/looper.c  looper_reclaim (check, advance, recycle),
 *                           looper_retire (retire epoch), and the
 *                           unlink of a taken or removed node
 *                           (looper_take, looper_collect)
 *
 * Threads: the looper, and two walkers (one with -DWEAK_WALKER_INC, see
 * below) that each walk the stack once.  The stack is A -> N -> X: A
 * stays, N is unlinked by the looper (A->next = X, a release store; N's
 * own next is left alone, so a walker on N goes on to X), retired with
 * the current epoch r, and recycled (handed out by the pool again) once
 * the epoch reaches r + 2.  Before the unlink the looper may advance the
 * epoch, so walkers meet it in either parity.
 *
 * Invariant: no walker ever stands on a node that the pool has handed out
 * again: asserted when the looper recycles N (no walker holds N) and when
 * a walker steps onto a node (it is not recycled).  Nodes are type-stable
 * (never freed), so a stale pointer is always a node's: holding one is
 * harmless until the node is reused, which is what the assertion forbids.
 * Liveness: ltl reclaimed, <> recycled, under weak fairness (the looper
 * retries the advance while a walker is inside; the walker must move).
 *
 * Abstracted away, and why that is sound:
 *   - one retired node and a three-node stack: a walker reaches a node
 *     only through a link it loads, and the unlink changes one link; more
 *     nodes would repeat the same pair of events;
 *   - the epoch counts from 2 and stays small (the looper ends once N is
 *     recycled); parity is epoch % 2, as e & 1 in C;
 *   - the looper's advance needs retired nodes (DQ_LIMBO_BATCH, force):
 *     here it may try at any time, which only adds behaviours.
 *
 * Memory model.  Default: sequential consistency.  -DTSO: plain stores
 * (the looper's unlink store, A->next = X, a release store) go through a
 * store buffer, a FIFO of 2 drained by a flusher process; a thread reads
 * its own buffered stores first; a seq_cst store or an RMW first drains
 * the buffer (x86 XCHG, LOCK-prefixed ops).  The Dekker pair:
 *   walker: seq_cst fetch_add of walkers[e & 1], then seq_cst re-load of
 *           the epoch (retry if it moved), then the links;
 *   looper: the unlink store, the seq_cst store of the epoch (which drains
 *           it), then (next advance) the seq_cst load of walkers[(e+1) & 1].
 * Under TSO the looper's load of the count may pass its buffered unlink
 * store: a walker that read the epoch before an advance, counts itself in
 * the parity that advance checked, and reads the old link, would then be
 * missed; its re-load sees the advance and retries.  So the re-load is
 * what makes the scheme safe beyond SC (-DMUTANT_WALKER_NO_RELOAD passes
 * under SC and fails with -DTSO).
 * Weakenings (each must make SPIN fail):
 *   -DWEAK_WALKER_INC   the walker's increment may sit in its buffer past
 *                       its re-load of the epoch (one walker: a buffered
 *                       increment is not atomic, and two walkers would
 *                       also lose updates)
 *   -DWEAK_EPOCH_STORE  the looper's epoch store may sit in its buffer past
 *                       its next load of the walker count
 * ARMv8 beyond TSO: other-multi-copy-atomic; the pair's seq_cst accesses
 * (LDAR, STLR, acquire-release RMWs) are not reordered with each other,
 * so the pair behaves as under SC.  C11 lets the looper's seq_cst load of
 * the count pass its earlier release store of the link, as TSO does; the
 * re-load covers that whatever the compiler emits.  The rest is message
 * passing: a walker's release decrement orders its node reads before the
 * looper's seq_cst (acquire) load that sees the count at zero; the
 * unlink's release store comes before the epoch's seq_cst store, so a
 * walker whose acquire load sees the new epoch sees the new link.
 *
 * Mutants:
 *   -DMUTANT_ADVANCE_UNCHECKED   the looper advances without looking at
 *                                the walker count;
 *   -DMUTANT_WALKER_NO_RELOAD    dq_walk_begin does not re-load the epoch
 *                                (caught with -DTSO, see above).
 */

#define A    0
#define N    1
#define X    2
#define NONE 3

#define NWALK_MAX 2
#ifdef WEAK_WALKER_INC
#define NWALK 1
#else
#define NWALK 2
#endif

byte epoch = 2;        /* core->epoch */
byte walkers[2];       /* core->walkers */
byte a_next = N;       /* A->next */
bool recycled;         /* ghost: N handed out again by the pool */
byte on[NWALK_MAX] = NONE;  /* ghost: the node each walker holds */

/* -- store buffers (-DTSO) -- */
#define TL 0           /* the looper; walker w is thread w + 1 */
#define L_EPOCH 1
#define L_W0    2
#define L_W1    3
#define L_ANEXT 4

inline mem_write(loc, x) {
  if
  :: loc == L_EPOCH -> epoch = x
  :: loc == L_W0 -> walkers[0] = x
  :: loc == L_W1 -> walkers[1] = x
  :: loc == L_ANEXT -> a_next = x
  fi
}
inline mem_read(loc, x) {
  if
  :: loc == L_EPOCH -> x = epoch
  :: loc == L_W0 -> x = walkers[0]
  :: loc == L_W1 -> x = walkers[1]
  :: loc == L_ANEXT -> x = a_next
  fi
}

#ifdef TSO
#define SBN 2
typedef SB { byte n; byte bv[SBN]; byte bx[SBN] };
SB sb[NWALK_MAX + 1];
#define DRAINED(t) (sb[t].n == 0)
inline st_plain(t, loc, x) {
  atomic { sb[t].n < SBN -> sb[t].bv[sb[t].n] = loc; sb[t].bx[sb[t].n] = x; sb[t].n++ }
}
/* a load: the newest own buffered store to loc, else memory */
inline ld(t, loc, x) {
  atomic {
    if
    :: sb[t].n == 2 && sb[t].bv[1] == loc -> x = sb[t].bx[1]
    :: else ->
       if
       :: sb[t].n >= 1 && sb[t].bv[0] == loc -> x = sb[t].bx[0]
       :: else -> mem_read(loc, x)
       fi
    fi
  }
}
proctype flusher(byte t) {
end_flush:
  do
  :: atomic {
       sb[t].n > 0 -> mem_write(sb[t].bv[0], sb[t].bx[0]);
       sb[t].bv[0] = sb[t].bv[1]; sb[t].bx[0] = sb[t].bx[1];
       sb[t].bv[1] = 0; sb[t].bx[1] = 0; sb[t].n--
     }
  od
}
#else
#define DRAINED(t) true
inline st_plain(t, loc, x) { atomic { mem_write(loc, x) } }
inline ld(t, loc, x) { atomic { mem_read(loc, x) } }
#endif

/* looper_reclaim: advance the epoch if the walkers of epoch e - 1 are
   gone; the epoch is the looper's own (relaxed load) */
inline reclaim() {
  ld(TL, L_EPOCH, e);
  if
#ifdef MUTANT_ADVANCE_UNCHECKED
  :: true ->                                /* mutant: no look at the walkers */
#else
  :: walkers[(e + 1) % 2] == 0 ->           /* seq_cst load */
#endif
#ifdef WEAK_EPOCH_STORE
     st_plain(TL, L_EPOCH, e + 1)
#else
     atomic { DRAINED(TL) -> epoch = e + 1 }   /* seq_cst store */
#endif
  :: else
  fi;
  e = 0
}

/* ---- the looper -------------------------------------------------------- */
active proctype looper() {
  byte e, r;
#ifdef TSO
  run flusher(TL)
#endif
  /* earlier steps: the epoch may move before N is unlinked */
  do
  :: epoch < 4 -> reclaim()
  :: break
  od;
  /* the unlink (looper_take / looper_collect): A->next = N->next,
     a release store; N->next stays */
  st_plain(TL, L_ANEXT, X);
  /* looper_retire: retire_epoch = the current epoch (relaxed) */
  ld(TL, L_EPOCH, r);
  /* looper_reclaim, every step, until N's grace period is over */
  do
  :: ld(TL, L_EPOCH, e);
     if
     :: e >= r + 2 ->
        /* recycled: the pool may hand N out again */
        atomic {
          assert(on[0] != N && on[1] != N);
          recycled = 1
        };
        break
     :: else -> reclaim()
     fi
  od
}

/* ---- a walker: dq_walk_begin, the walk, dq_walk_end --------------------------- */
proctype walker(byte w) {
  byte e, e2, p, c;
#ifdef TSO
  run flusher(w + 1)
#endif
  /* dq_walk_begin */
  do
  :: e = epoch;                             /* seq_cst load */
#ifdef WEAK_WALKER_INC
     ld(w + 1, L_W0 + e % 2, c);
     st_plain(w + 1, L_W0 + e % 2, c + 1);
     c = 0;
#else
     atomic { DRAINED(w + 1) -> walkers[e % 2]++ };   /* seq_cst fetch_add */
#endif
#ifdef MUTANT_WALKER_NO_RELOAD
     e2 = e;
#else
     e2 = epoch;                            /* seq_cst re-load */
#endif
     if
     :: e2 == e -> break
     :: else ->
        atomic { DRAINED(w + 1) -> walkers[e % 2]-- }  /* release fetch_sub */
     fi
  od;
  e2 = 0;
  /* match_walk_run's walk: top (A, which stays), then the links
     (acquire loads) */
  atomic { on[w] = A; assert(!(A == N && recycled)) };
  atomic { p = a_next; on[w] = p; assert(!(p == N && recycled)) };
  /* on N: its next is left alone, so on to X */
  atomic { on[w] = X; p = 0 };
  on[w] = NONE;
  /* dq_walk_end: release fetch_sub */
  atomic { DRAINED(w + 1) -> walkers[e % 2]-- };
  e = 0
}

init {
  atomic {
    run walker(0)
#if NWALK == 2
    ; run walker(1)
#endif
  }
}

ltl reclaimed { <> recycled }
