/*
 * manual_clock.pml: the consumer's sleep on a queue whose clock is a
 * manual clock, and the wakes of dq_clock_advance.
 *
 * A model of its own rather than a fourth thread in sleep_wake.pml: an
 * advancer added to sleep_wake's threads (every post kind, the barrier's
 * removal, dq_quit) takes it past 5e7 states, minutes a run.  Here only
 * what the clock's protocol touches is kept; what is left out is checked
 * by sleep_wake.pml, as the list below says.
 *
 * C functions abstracted (every step below names its own):
 *   deliqueue/src/any_clock.c  dq_clock_advance
 *   deliqueue/src/looper.c  looper_next, looper_collect, looper_pick,
 *                           looper_take, looper_sleep (looper_publish_sleep),
 *                           looper_has_news
 *   deliqueue/src/any_*.c, core*.c  post_node_with, post_pushed, wake_for_post,
 *                           dq_wake_sleeper
 *   deliqueue/src/wait.c    dq_event_read, dq_event_wait, dq_event_signal
 *
 * Threads: the consumer; P1 posts one delayed message, sync or async, due
 * at the clock's next tick (dq_post_delayed: its due is manual time); P2
 * posts a sync barrier (dq_post_sync_barrier: due = the manual now) or
 * does nothing; the advancer calls dq_clock_advance(c, 1) up to twice (a
 * test may stop advancing at any point).
 *
 * Invariant (no lost wake): the consumer never sleeps for good while a
 * message is deliverable (accepted, PENDING, due by the clock, and async
 * or not sorted after a pending barrier: key (due, push order)): an
 * advance that makes a message due either finds the consumer's sleep word
 * and wakes it, or the consumer's re-read of the clock after publishing
 * the word sees the advance.  Checked two ways:
 *   - safety: the consumer's wait may end the run (end_idle) only when
 *     nothing is left to do (QUIET; `timeout` holds only when no thread
 *     can move); a consumer parked with work left is an invalid end
 *     state;
 *   - liveness: ltl live, <>[] QUIET (acceptance cycles, pan -a): every
 *     run settles with nothing deliverable.  No fairness is needed: every
 *     cycle of the model is a consumer wake-up caused by a finite number
 *     of other threads' steps.
 *
 * Abstracted away, and why that is sound:
 *   - nodes, heaps and the stack are arrays, a bitmask and a push log;
 *     the key is (due, push order), the C key (due, seq);
 *   - one looper step, from the collect to the pick, is atomic: what it
 *     reads (top, node states, the clock) is re-read after the sleep
 *     word is stored (looper_has_news and the clock's re-read), so a push
 *     or an advance that lands inside the C step is seen then;
 *   - time: the clock moves only by dq_clock_advance, so the consumer's
 *     wait has no timeout at all; a wake that a post skips because
 *     due >= deadline is covered by the advance that reaches the deadline
 *     (its own wake, or the consumer's re-read of the clock);
 *   - the consumer's deadline is its next message's due; a call's own
 *     deadline (dq_next_until) only lowers it, and the advancer and the
 *     re-read test the published deadline whatever it came from;
 *   - one queue on the clock: dq_clock_advance tests each queue's sleep
 *     word after its RMW of now, and each queue's pair involves only its
 *     own word; several advancing threads: each tests the sleep word
 *     against the now its own RMW returned, so the advance whose RMW
 *     first reaches a deadline forms the pair with the consumer by
 *     itself, as the advancer's here does;
 *   - advances of 1: a larger one only reaches a deadline sooner, and
 *     the test (deadline <= now) is the same whatever the step;
 *   - the barrier's removal and dq_quit: sleep_wake.pml.  Their wakes
 *     (dq_wake_consumer) wake a sleeper whatever its deadline and pair
 *     with the same store of the sleep word; sleep_wake checks them with
 *     untimed waits, all that a manual clock's waits are;
 *   - posts due now, at the front or at an earlier when: their wake rule
 *     is sleep_wake.pml's, the same whatever the clock;
 *   - the idle spin of looper_sleep only returns early, as a spurious
 *     wake-up does;
 *   - payloads, tokens and exactly-once reporting: exactly_once.pml.
 *
 * Memory model.  Default: sequential consistency.  -DTSO: every plain
 * (relaxed or release) store of the protocol goes through its thread's
 * store buffer (a FIFO of 2, drained by a flusher process at any time);
 * a seq_cst store or any RMW first waits for the buffer to drain, then
 * writes memory (x86: XCHG and LOCK-prefixed ops are full fences); loads
 * read memory (the advancer, the clock's only writer, knows the value it
 * last stored).  The Dekker pairs:
 *   advancer: seq_cst RMW of now, then seq_cst load of sleep;
 *   consumer: seq_cst exchange of sleep, then seq_cst loads of top and of
 *     now;
 *   producer: push CAS on top, then seq_cst load of sleep.
 * Weakenings (each a store that may sit in the buffer past the same
 * thread's next load; each must make SPIN fail):
 *   -DWEAK_CLOCK_STORE   the advance's store of now (its RMW split)
 *   -DWEAK_SLEEP_STORE   the consumer's store of the sleep word
 * ARMv8 beyond TSO: as sleep_wake.pml (seq_cst accesses are LDAR/STLR or
 * acquire-release RMWs, not reordered with one another; the architecture
 * is other-multi-copy-atomic), so the pairs behave as under SC.  The rest
 * is message passing, as in sleep_wake.pml: held_due before the release
 * of the sleep word; the node's payload by the push; the relaxed store of
 * AWAKE after a wait only lets a waker wake a consumer already awake; a
 * step's own read of the clock may be stale, which only makes it sleep
 * with a deadline the re-read then finds reached.
 *
 * Mutants:
 *   -DMUTANT_NO_CLOCK_RECHECK      the consumer does not re-read the clock
 *                                  after publishing its sleep word (an
 *                                  advance whose load of the word came
 *                                  first is lost)
 *   -DMUTANT_ADVANCE_BEFORE_STORE  dq_clock_advance loads the sleep word
 *                                  before its RMW of now (a consumer that
 *                                  publishes between them and re-reads the
 *                                  old now waits for good)
 */

#define FREE      0
#define PENDING   1
#define DELIVERED 2

#define NN   2     /* nodes */
#define M    0     /* P1's message */
#define B    1     /* P2's barrier */
#define NONE 255

#define INF   7    /* deadline: forever (past any now reached here) */
#define AWAKE 0    /* sleep word: DQ_AWAKE; asleep: deadline * 2 + held */

/* -- shared state (queue.h: struct dq_queue, struct dq_core, dq_node) -- */
byte top;          /* q->top: number of pushes */
byte stk[NN];      /* push log: stk[k] is the k-th node pushed */
byte pos[NN];      /* ghost: a node's place in the push log */
bool acc[NN];      /* ghost: pushed */
byte st[NN];       /* node life (n->state) */
byte due[NN];      /* n->due */
bool async[NN];    /* DQ_ASYNC */
bool isbar[NN];    /* DQ_STATE_BARRIER */
byte sleepw = AWAKE; /* q->sleep */
byte held_due;     /* q->held_due */
byte event;        /* q->wake: the futex word */
byte clock = 2;    /* the manual clock's now (any_clock.c) */

/* a message sorts after pending barrier b: a barrier holds it */
#define HOLDS(b, m) (st[b] == PENDING && acc[b] && \
                     (due[b] < due[m] || (due[b] == due[m] && pos[b] < pos[m])))
#define DLV(m) (st[m] == PENDING && acc[m] && due[m] <= clock && \
                (async[m] || !HOLDS(B, m)))
#define DELIVERABLE DLV(M)
/* nothing for the consumer to do */
#define QUIET (!DELIVERABLE)

/* -- store buffers (-DTSO) -------------------------------------------- */
#define TC  0      /* thread ids: consumer, P1, P2, the advancer */
#define TP1 1
#define TP2 2
#define TA  3
#define V_SLEEP 1  /* buffered locations */
#define V_HELD  2
#define V_CLOCK 3  /* a store of now: value = the new now */

inline push(n) {   /* the push CAS's effect */
  stk[top] = n; pos[n] = top; acc[n] = 1; top++
}

inline mem_write(loc, x) {
  if
  :: loc == V_SLEEP -> sleepw = x
  :: loc == V_HELD -> held_due = x
  :: loc == V_CLOCK -> clock = x
  fi
}

#ifdef TSO
#define SBN 2
typedef SB { byte n; byte bv[SBN]; byte bx[SBN] };
SB sb[4];
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

/* post_pushed + wake_for_post, for node n of this thread */
inline post_wake(t, n) {
  s = sleepw;                               /* post_pushed: seq_cst load */
  if
  :: s != AWAKE ->
     dl = s / 2; held = s % 2;              /* wake_for_post */
     if
     :: due[n] >= dl -> skip                /* the advance to dl wakes it */
     :: else ->
        if
        :: held && !async[n] ->
           hd = held_due;                   /* relaxed, after the load of s */
           if :: due[n] < hd -> dq_wake_sleeper(t, s) :: else fi
        :: else -> dq_wake_sleeper(t, s)
        fi
     fi
  :: else
  fi
}

/* ---- the consumer (looper.c: looper_next) ---------------------------- */
active proctype consumer() {
  byte bnd;        /* core->boundary: pushes swept so far */
  byte heap;       /* sync_heap + async_heap members, a bitmask */
  byte n, nxt, smin, amin, dl, w, seen, now, hd;
  bool held;
#ifdef TSO
  run flusher(TC)
#endif
step:
  /* One looper step up to the pick, as one atomic step: what it reads
     (top, node states, the clock) is re-read after the sleep word is
     stored, so a push or an advance that lands during the step is seen
     then, and making the step atomic hides no lost wake.  Its first
     access is the removal list's exchange, an RMW (DRAINED); the list
     itself is sleep_wake.pml's. */
  skip;
  d_step {
    DRAINED(TC) ->
    now = clock;                            /* dq_now(), once a step */
    /* looper_collect: the sweep from top down to the boundary */
    n = bnd;
    do
    :: n < top -> if :: st[stk[n]] == PENDING -> heap = heap | (1 << stk[n]) :: else fi; n++
    :: else -> break
    od;
    bnd = top;
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
    fi;
    n = 0; smin = 0; amin = 0
  };
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
  atomic { DRAINED(TC) -> sleepw = w };     /* looper_publish_sleep: seq_cst exchange */
#endif
  /* looper_has_news, seq_cst: top */
  if
  :: top != bnd -> goto awake
  :: else
  fi;
#ifndef MUTANT_NO_CLOCK_RECHECK
  /* the clock, seq_cst: an advance to dl or past it whose load of the
     sleep word came before our store is seen here; nothing else would
     end the wait below */
  if
  :: clock >= dl -> goto awake
  :: else
  fi;
#endif
  /* dq_event_wait(seen, no deadline): a manual clock never passes by
     itself, so only a wake ends the wait */
  if
  :: event != seen -> skip
  :: timeout && QUIET ->
     /* no thread can move and nothing is left to do: idle for good */
end_idle:
     (event != seen)
  fi;
awake:
  st_plain(TC, V_SLEEP, AWAKE);             /* relaxed */
  dl = 0; w = 0; seen = 0; hd = 0; held = 0; now = 0;
  goto step
}

/* ---- P1: one delayed post (any_post.c: dq_post_delayed -> post_node_with) */
active proctype producer() {
  byte s, dl, hd;
  bool held, won;
#ifdef TSO
  run flusher(TP1)
#endif
  /* post_node_with: due = the manual now + 1; the node is ours until
     the push */
  atomic {
    if
    :: skip
    :: async[M] = 1                         /* DQ_ASYNC */
    fi;
    due[M] = clock + 1; st[M] = PENDING
  };
  atomic { DRAINED(TP1) -> push(M) };       /* seq_cst CAS of top */
  post_wake(TP1, M)
}

/* ---- P2: a sync barrier, or nothing --------------------------------- */
active proctype barrier() {
  byte s, dl, hd;
  bool held, won;
#ifdef TSO
  run flusher(TP2)
#endif
  if
  :: skip ->
     /* dq_post_sync_barrier: due = dq_now(), the manual now */
     d_step { due[B] = clock; isbar[B] = 1; st[B] = PENDING };
     atomic { DRAINED(TP2) -> push(B) };    /* post_node_with: seq_cst CAS */
     post_wake(TP2, B)
  :: skip
  fi
}

/* ---- the advancer: dq_clock_advance(c, 1), up to twice (any_clock.c) - */
active proctype advancer() {
  byte nw, s, k;
  bool won;
#ifdef TSO
  run flusher(TA)
#endif
  nw = clock;      /* the advancer is the clock's only writer */
  do
  :: k < 2 ->
#ifdef MUTANT_ADVANCE_BEFORE_STORE
     s = sleepw;                            /* seq_cst load, before the RMW */
#endif
#ifdef WEAK_CLOCK_STORE
     nw = nw + 1;
     st_plain(TA, V_CLOCK, nw);
#else
     atomic { DRAINED(TA) -> clock = clock + 1; nw = clock };   /* seq_cst fetch_add */
#endif
#ifndef MUTANT_ADVANCE_BEFORE_STORE
     s = sleepw;                            /* seq_cst load of q->sleep */
#endif
     /* asleep (a deadline, held bit masked) and due by the new now: the
        wake a post that finds the consumer asleep gives */
     if
     :: s != AWAKE && s / 2 <= nw -> dq_wake_sleeper(TA, s)
     :: else
     fi;
     s = 0; won = 0; k++
  :: break
  od
}

ltl live { <>[] QUIET }
