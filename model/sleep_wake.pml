/*
 * sleep_wake.pml: the consumer's sleep, and the wakes of a post, of a
 * barrier's removal and of dq_quit.
 *
 * C functions abstracted (every step below names its own):
 *   deliqueue/src/looper.c  looper_next, looper_collect, looper_pick,
 *                           looper_take, looper_sleep, looper_has_news,
 *                           dq_looper_teardown (core.c)
 *   deliqueue/src/any_*.c, core*.c  post_node_with, post_pushed, wake_for_post,
 *                           dq_wake_sleeper, dq_wake_consumer, claim_token,
 *                           dq_push_removals, dq_quit (raise_quit_mode,
 *                           tag_top)
 *   deliqueue/src/wait.c    dq_event_read, dq_event_wait, dq_event_signal
 *
 * Threads: the consumer; P1 posts one message of a kind it picks (front;
 * at an earlier when; due now, sync or async; due now with the clock
 * ticking right after its read, so its due is earlier than a barrier's
 * posted after it; delayed); P2 posts a sync barrier, then removes it
 * (dq_remove_sync_barrier), calls dq_quit, or does nothing.
 *
 * Invariant (no lost wake): the consumer never sleeps for good while a
 * message is deliverable (accepted, PENDING, due by the clock, and async
 * or not sorted after a pending barrier: key (due, push order)) or while
 * a quit it has not acted on is set.  Checked two ways:
 *   - safety: the consumer's untimed wait may end the run (end_idle) only
 *     when nothing is left to do (QUIET; `timeout` holds only when no
 *     thread can move); a consumer parked with work left is an invalid
 *     end state;
 *   - liveness: ltl live, <>[] QUIET (acceptance cycles, pan -a): every
 *     run settles with nothing deliverable and any quit acted on.  No
 *     fairness is needed: every cycle of the model is a consumer wake-up
 *     caused by a finite number of other threads' steps.
 *
 * Abstracted away, and why that is sound:
 *   - nodes, heaps and the stack are arrays, a bitmask and a push log;
 *     the key is (due, push order), the C key (due, seq), since seq is
 *     handed out in push order (front posts are LIFO: at most one here);
 *   - one looper step, from the tag check to the pick, is atomic: what it
 *     reads (top, the removal list, node states) is re-read after the
 *     sleep word is stored (looper_has_news), so a push or a removal that
 *     lands inside the C step is seen then, and no lost wake hides in
 *     the step; a claim it misses is caught by the delivery CAS;
 *   - time: a small clock; a timed wait may always time out (then the
 *     clock jumps to the deadline); an untimed one ends only on an event
 *     change.  A wake that a producer skips because due >= deadline is
 *     covered by that time-out.  On a manual clock no wait times out and
 *     dq_clock_advance wakes instead: manual_clock.pml;
 *   - the idle spin of looper_sleep only returns early, as a spurious
 *     wake-up does: it adds no behaviour and is left out;
 *   - the teardown claims each pending node by CAS: the user count that
 *     lets the C teardown report without CAS is user_count.pml's;
 *   - payloads, tokens and exactly-once reporting: exactly_once.pml.
 *
 * Memory model.  Default: sequential consistency.  -DTSO: every plain
 * (relaxed or release) store of the protocol goes through its thread's
 * store buffer (a FIFO of 2, drained by a flusher process at any time);
 * a seq_cst store or any RMW first waits for the buffer to drain, then
 * writes memory (x86: XCHG and LOCK-prefixed ops are full fences); loads
 * read memory (no thread here reads back a location it has buffered).
 * The Dekker pairs:
 *   producer: push CAS on top, then seq_cst load of sleep;
 *   consumer: seq_cst store of sleep, then seq_cst loads of top, removals;
 *   barrier removal: push CAS onto the removal list, then seq_cst load of
 *     sleep (dq_wake_consumer);
 *   dq_quit: seq_cst fetch_or of the tag, then seq_cst load of sleep.
 * Weakenings (each a store that may sit in the buffer past the same
 * thread's next load; each must make SPIN fail):
 *   -DWEAK_PUSH          the push of top
 *   -DWEAK_SLEEP_STORE   the consumer's store of the sleep word
 *   -DWEAK_REMOVAL_PUSH  the barrier removal's push onto the removal list
 *   -DWEAK_QUIT_TAG      dq_quit's tag
 * ARMv8 beyond TSO: ARMv8 is other-multi-copy-atomic, and seq_cst
 * accesses compile to LDAR/STLR (or acquire-release RMWs), which are not
 * reordered with each other; so each seq_cst Dekker pair above behaves as
 * under SC, as the TSO run with the code's orders shows.  The rest is
 * message passing: held_due (relaxed) is stored before the seq_cst
 * (release) store of sleep and read by a producer after a seq_cst
 * (acquire) load that returned that word, so it reads that value or a
 * later sleep's (whose re-read of top sees the producer's push); the
 * node's payload is published by the push (release) to the collect's
 * acquire load of top; the relaxed store of AWAKE after a wait only lets
 * a producer wake a consumer that is already awake.
 *
 * Mutant: -DMUTANT_HELD_SKIPS_WAKE restores the wake rule that never woke
 * a held consumer for a sync post (`!(held && !async) && due < deadline`):
 * a front post, a post at an earlier when, or a due-now post whose clock
 * read came before the barrier's then waits for good.
 */

#define FREE      0
#define PENDING   1
#define DELIVERED 2
#define REMOVED   3

#define NN   2     /* nodes */
#define M    0     /* P1's message */
#define B    1     /* P2's barrier */
#define NONE 255

#define INF   7    /* deadline: forever */
#define AWAKE 0    /* sleep word: DQ_AWAKE; asleep: deadline * 2 + held */

/* -- shared state (queue.h: struct dq_queue, struct dq_core, dq_node) -- */
byte top;          /* q->top: number of accepted pushes ... */
bool tag;          /* ... and its DQ_TOP_QUIT bit (same word) */
byte stk[NN];      /* push log: stk[k] is the k-th node pushed */
byte pos[NN];      /* ghost: a node's place in the push log */
bool acc[NN];      /* ghost: accepted (its push CAS won before the tag) */
byte st[NN];       /* node life (n->state) */
byte due[NN];      /* n->due (0: DQ_KEY_FRONT) */
bool async[NN];    /* DQ_ASYNC */
bool isbar[NN];    /* DQ_STATE_BARRIER */
byte removals;     /* core->removals, as a bitmask of nodes */
byte sleepw = AWAKE; /* q->sleep */
byte held_due;     /* q->held_due */
byte event;        /* q->wake: the futex word */
byte clock = 2;    /* dq_now() */
bool quitnow;      /* q->quit_mode == DQ_QUIT_NOW */
bool torn;         /* ghost: the teardown ran */

/* a message sorts after pending barrier b: a barrier holds it */
#define HOLDS(b, m) (st[b] == PENDING && acc[b] && \
                     (due[b] < due[m] || (due[b] == due[m] && pos[b] < pos[m])))
#define DLV(m) (st[m] == PENDING && acc[m] && due[m] <= clock && \
                (async[m] || !HOLDS(B, m)))
#define DELIVERABLE DLV(M)
/* nothing for the consumer to do: nothing deliverable, and no quit it
   has not acted on */
#define QUIET (!DELIVERABLE && (!tag || torn))

/* -- store buffers (-DTSO) -------------------------------------------- */
#define TC  0      /* thread ids: consumer, P1, P2 */
#define TP1 1
#define TP2 2
#define V_SLEEP 1  /* buffered locations */
#define V_HELD  2
#define V_PUSH  3  /* a push of top: value = node */
#define V_REM   4  /* a push onto the removal list: value = node bit */
#define V_TAG   5

inline push(n) {   /* the push CAS's effect: refused once the tag is set */
  if
  :: tag -> st[n] = FREE                 /* refused: -ESHUTDOWN */
  :: else -> stk[top] = n; pos[n] = top; acc[n] = 1; top++
  fi
}

inline mem_write(loc, x) {
  if
  :: loc == V_SLEEP -> sleepw = x
  :: loc == V_HELD -> held_due = x
  :: loc == V_PUSH -> push(x)
  :: loc == V_REM -> removals = removals | x
  :: loc == V_TAG -> tag = 1
  fi
}

#ifdef TSO
#define SBN 2
typedef SB { byte n; byte bv[SBN]; byte bx[SBN] };
SB sb[3];
#define DRAINED(t) (sb[t].n == 0)
/* a plain store: into the buffer */
inline st_plain(t, loc, x) {
  atomic { sb[t].n < SBN -> sb[t].bv[sb[t].n] = loc; sb[t].bx[sb[t].n] = x; sb[t].n++ }
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
#endif

/* dq_wake_sleeper: CAS sleep from the word seen to AWAKE; the winner bumps
   the event (dq_event_signal: fetch_add, then FUTEX_WAKE) */
inline dq_wake_sleeper(t, s) {
  won = 0;
  atomic { DRAINED(t) -> if :: sleepw == s -> sleepw = AWAKE; won = 1 :: else fi };
  if :: won -> atomic { DRAINED(t) -> event++ } :: else fi
}

/* dq_wake_consumer: seq_cst load of sleep; if asleep, dq_wake_sleeper */
inline wake_consumer(t) {
  s = sleepw;
  if :: s != AWAKE -> dq_wake_sleeper(t, s) :: else fi
}

/* post_pushed + wake_for_post, for node n of this thread */
inline post_wake(t, n) {
  s = sleepw;                               /* post_pushed: seq_cst load */
  if
  :: s != AWAKE ->
     dl = s / 2; held = s % 2;              /* wake_for_post */
#ifdef MUTANT_HELD_SKIPS_WAKE
     if
     :: due[n] < dl && !(held && !async[n]) -> dq_wake_sleeper(t, s)
     :: else
     fi
#else
     if
     :: due[n] >= dl -> skip                /* it wakes by itself in time */
     :: else ->
        if
        :: held && !async[n] ->
           hd = held_due;                   /* relaxed, after the load of s */
           if :: due[n] < hd -> dq_wake_sleeper(t, s) :: else fi
        :: else -> dq_wake_sleeper(t, s)
        fi
     fi
#endif
  :: else
  fi
}

/* ---- the consumer (looper.c: looper_next) ---------------------------- */
active proctype consumer() {
  byte bnd;        /* core->boundary: pushes swept so far */
  byte heap;       /* sync_heap + async_heap members, a bitmask */
  byte rem, n, nxt, smin, amin, dl, w, seen, now, hd;
  bool tg, held;
#ifdef TSO
  run flusher(TC)
#endif
step:
  /* One looper step up to the pick, as one atomic step: what it reads
     (top, the removal list, node states) is re-read after the sleep word
     is stored (looper_has_news), so a push or removal that lands during
     the step is seen then, and making the step atomic hides no lost wake.
     Its first access is the removal list's exchange, an RMW (DRAINED). */
  skip;
  d_step {
    DRAINED(TC) ->
    /* looper_next: acquire load of top; the tag before collecting; the
       mode (set before the tag by dq_quit) */
    tg = tag && quitnow;
    if
    :: tg ->
       /* dq_looper_teardown: drops (and reports) every accepted node
          still pending */
       for (n : 0 .. NN - 1) {
         if :: st[n] == PENDING && acc[n] -> st[n] = REMOVED :: else fi
       };
       torn = 1
    :: else ->
       now = clock;                         /* dq_now(), once a step */
       /* looper_collect: exchange the removal list (acquire RMW), then
          the sweep from top down to the boundary, then the removals
          (unswept ones never enter a heap) */
       rem = removals; removals = 0;
       n = bnd;
       do
       :: n < top -> if :: st[stk[n]] == PENDING -> heap = heap | (1 << stk[n]) :: else fi; n++
       :: else -> break
       od;
       bnd = top;
       heap = heap & ~rem;
       /* looper_pick: the sync heap's minimum a barrier: only async
          messages are eligible (held), held_due = the barrier's due */
       smin = NONE; amin = NONE;
       for (n : 0 .. NN - 1) {
         if
         :: heap & (1 << n) ->
            if
            :: async[n] ->
               if :: amin == NONE || due[n] < due[amin] || (due[n] == due[amin] && pos[n] < pos[amin]) -> amin = n :: else fi
            :: else ->
               if :: smin == NONE || due[n] < due[smin] || (due[n] == due[smin] && pos[n] < pos[smin]) -> smin = n :: else fi
            fi
         :: else
         fi
       };
       held = (smin != NONE && isbar[smin]);
       hd = (held -> due[smin] : 0);
       if
       :: held || smin == NONE -> nxt = amin
       :: else ->
          if
          :: amin == NONE -> nxt = smin
          :: else -> nxt = ((due[amin] < due[smin] || (due[amin] == due[smin] && pos[amin] < pos[smin])) -> amin : smin)
          fi
       fi
    fi;
    n = 0; rem = 0; smin = 0; amin = 0
  };
  if :: tg -> goto done :: else fi;
  if
  :: nxt != NONE && due[nxt] <= now ->
     /* looper_take: CAS PENDING -> DELIVERED; out of heap either way */
     atomic { DRAINED(TC) -> if :: st[nxt] == PENDING -> st[nxt] = DELIVERED :: else fi };
     heap = heap & ~(1 << nxt); nxt = 0;
     goto step
  :: else ->
     dl = (nxt == NONE -> INF : due[nxt]); nxt = 0
  fi;

  /* looper_sleep */
  seen = event;                             /* dq_event_read (acquire) */
  if :: held -> st_plain(TC, V_HELD, hd) :: else fi;   /* relaxed */
  w = dl * 2 + held;
#ifdef WEAK_SLEEP_STORE
  st_plain(TC, V_SLEEP, w);
#else
  atomic { DRAINED(TC) -> sleepw = w };     /* seq_cst store */
#endif
  /* looper_has_news, seq_cst: top (with the tag), then the removal list */
  if
  :: top != bnd || tag -> goto awake
  :: else
  fi;
  if
  :: removals != 0 -> goto awake
  :: else
  fi;
  /* dq_event_wait(seen, deadline) */
  if
  :: event != seen -> skip
  :: dl != INF -> atomic { if :: clock < dl -> clock = dl :: else fi }   /* timed out */
  :: timeout && QUIET ->
     /* no thread can move and nothing is left to do: idle for good */
end_idle:
     (event != seen)
  fi;
awake:
  st_plain(TC, V_SLEEP, AWAKE);             /* relaxed */
  dl = 0; w = 0; seen = 0; hd = 0; held = 0; now = 0;
  goto step;
done:
  skip
}

/* ---- P1: one post of a kind it picks (any_post.c: dq_post_* -> post_node_with) */
active proctype producer() {
  byte d, s, dl, hd;
  bool as, held, won;
#ifdef TSO
  run flusher(TP1)
#endif
  atomic {
  if
  :: d = 0                       /* dq_post_at_front */
  :: d = clock - 1               /* dq_post_at, a when in the past */
  :: d = clock                   /* dq_post: due now */
  :: atomic { clock == 2 -> d = 2; clock = 3 }  /* dq_post: due now; the clock
                                    then ticks before the barrier reads it */
  :: d = clock; as = 1           /* dq_post, DQ_ASYNC */
  :: d = clock + 2               /* dq_post_delayed */
  fi;
  /* post_node_with: the node is ours until the push */
  due[M] = d; async[M] = as; st[M] = PENDING; d = 0
  };
#ifdef WEAK_PUSH
  st_plain(TP1, V_PUSH, M);
#else
  atomic { DRAINED(TP1) -> push(M) };       /* seq_cst CAS of top */
#endif
  if :: st[M] == FREE -> goto done :: else fi;  /* refused */
  post_wake(TP1, M);
done:
  skip
}

/* ---- P2: a sync barrier, then its removal, dq_quit, or nothing ------ */
active proctype barrier() {
  byte s, dl, hd;
  bool held, won, ok;
#ifdef TSO
  run flusher(TP2)
#endif
  /* dq_post_sync_barrier: due = dq_now() */
  d_step { due[B] = clock; isbar[B] = 1; st[B] = PENDING };
  atomic { DRAINED(TP2) -> push(B) };       /* post_node_with: seq_cst CAS */
  post_wake(TP2, B);
  if
  :: skip                                   /* the barrier stays */
  :: /* dq_remove_sync_barrier -> claim_token: CAS PENDING -> REMOVED */
     atomic { DRAINED(TP2) -> if :: st[B] == PENDING -> st[B] = REMOVED; ok = 1 :: else fi };
     if
     :: ok ->
#ifdef WEAK_REMOVAL_PUSH
        st_plain(TP2, V_REM, 1 << B);
#else
        atomic { DRAINED(TP2) -> removals = removals | (1 << B) };  /* dq_push_removals: seq_cst CAS */
#endif
        wake_consumer(TP2)                  /* dq_wake_consumer */
     :: else
     fi
  :: /* dq_quit (any_lifecycle.c) */
     atomic { DRAINED(TP2) -> quitnow = 1 };  /* quit: mode NOW (seq_cst), before the tag */
#ifdef WEAK_QUIT_TAG
     st_plain(TP2, V_TAG, 1);
#else
     atomic { DRAINED(TP2) -> tag = 1 };    /* quit: seq_cst fetch_or of the tag */
#endif
     wake_consumer(TP2)                     /* dq_wake_consumer */
  fi
}

ltl live { <>[] QUIET }
