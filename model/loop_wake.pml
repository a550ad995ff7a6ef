/*
 * loop_wake.pml: dq_wake against a consumer in wakeable waits
 * (dq_loop_once, dq_next_until).
 *
 * C functions abstracted (every step below names its own):
 *   deliqueue/src/any_looper.c  dq_wake
 *   deliqueue/src/core.c        dq_wake_consumer, dq_wake_sleeper
 *   deliqueue/src/looper.c      looper_steps (its wake check before a
 *                               wait), looper_take_wake, looper_sleep,
 *                               looper_has_news_or_wake, looper_publish_sleep
 *   deliqueue/src/wait.c        dq_event_read, dq_event_wait, dq_event_signal
 *
 * Threads: the consumer, which goes round wakeable waits for ever (each
 * one a dq_loop_once with no deadline: a wake taken is DQ_ONCE_WOKEN and
 * the next call begins); W1 and W2, which call dq_wake once each.
 *
 * Invariant (no lost wake, coalesced but never lost): every dq_wake is
 * covered by a wake the consumer took: its exchange of the flag came
 * before the consumer's taking exchange (ghosts: `sent` counts dq_wake's
 * exchanges, `covered` is `sent` as the consumer's taking exchange saw
 * it).  The consumer may sleep for good only when every wake is covered
 * (QUIET); a consumer parked with a wake uncovered is an invalid end
 * state; and ltl live, <>[] QUIET, says every run settles so.
 *
 * Abstracted away, and why that is sound:
 *   - messages, removals, fds and quits: the re-check of the other news
 *     after the sleep word is sleep_wake.pml's and fd_wake.pml's; here it
 *     finds none, which only removes ways to wake;
 *   - the deadline: an untimed wait; a timed one only returns more often;
 *   - the idle spin of looper_sleep: only returns early, as a spurious
 *     wake-up does;
 *   - the waker's choice of futex or eventfd (dq_fd_signal): fd_wake.pml;
 *     either is a bump the sleeper's wait does not miss (the futex
 *     compares the count; an eventfd write before epoll_pwait2 stays
 *     queued), modelled as the event count.
 *
 * Memory model.  Default: sequential consistency.  -DTSO: plain (relaxed
 * or release) stores go through the thread's store buffer (a FIFO of 2,
 * drained by a flusher at any time); a seq_cst store or any RMW first
 * drains it.  The Dekker pair:
 *   dq_wake: seq_cst exchange of q->woken, then seq_cst load of sleep;
 *   consumer: seq_cst exchange of sleep (looper_publish_sleep), then
 *     seq_cst load of q->woken (looper_has_news_or_wake).
 * Weakenings (each a store that may sit in the buffer past the thread's
 * next load; each must make SPIN fail):
 *   -DWEAK_WAKE_FLAG     dq_wake's store of the flag (its exchange split)
 *   -DWEAK_SLEEP_STORE   the consumer's store of its sleep word
 * ARMv8 beyond TSO: as sleep_wake.pml (seq_cst accesses are LDAR/STLR or
 * acquire-release RMWs, not reordered with one another; the architecture
 * is other-multi-copy-atomic).  The taking exchange's acquire pairs with
 * dq_wake's release: message passing, not modelled.
 *
 * Mutants:
 *   -DMUTANT_NO_FLAG_RECHECK  the consumer does not re-read the flag
 *                             after publishing its sleep word (a wake
 *                             whose load of the word came first is lost)
 *   -DMUTANT_TAKE_NOT_ATOMIC  the consumer takes the flag with a load and
 *                             a store of 0: a wake coalesced into the
 *                             flag between them is lost
 */

#define AWAKE  0   /* q->sleep: DQ_AWAKE */
#define ASLEEP 1   /* q->sleep: a deadline (untimed here) */

byte woken;        /* q->woken */
byte sleepw = AWAKE; /* q->sleep */
byte event;        /* q->wake: the futex word */
byte sent;         /* ghost: dq_wake exchanges so far */
byte covered;      /* ghost: sent, as the consumer's last take saw it */
byte taken;        /* ghost: wakes the consumer reported (DQ_ONCE_WOKEN) */

#define QUIET (covered == sent)

/* -- store buffers (-DTSO) -------------------------------------------- */
#define TC  0      /* thread ids: consumer, W1, W2 */
#define V_SLEEP 1  /* buffered locations */
#define V_WOKEN 2

inline mem_write(loc, x) {
  if
  :: loc == V_SLEEP -> sleepw = x
  :: loc == V_WOKEN -> woken = x
  fi
}

#ifdef TSO
#define SBN 2
typedef SB { byte n; byte bv[SBN]; byte bx[SBN] };
SB sb[3];
#define DRAINED(t) (sb[t].n == 0)
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

/* ---- the consumer (looper.c: looper_steps, looper_sleep) -------------- */
active proctype consumer() {
  byte seen, old;
#ifdef TSO
  run flusher(TC)
#endif
wait:
  /* looper_steps, about to wait: looper_take_wake, a relaxed test, then
     an acquire exchange of the flag with 0 */
  if
  :: woken != 0 ->
#ifdef MUTANT_TAKE_NOT_ATOMIC
     atomic { old = woken; if :: old -> covered = sent :: else fi };
     atomic { DRAINED(TC) -> woken = 0 };
#else
     atomic { DRAINED(TC) -> old = woken; woken = 0; if :: old -> covered = sent :: else fi };
#endif
     if
     :: old -> taken++; old = 0; goto wait    /* DQ_ONCE_WOKEN; the next call */
     :: else
     fi
  :: else
  fi;
  /* looper_sleep: dq_event_read, then the sleep word */
  seen = event;
#ifdef WEAK_SLEEP_STORE
  st_plain(TC, V_SLEEP, ASLEEP);
#else
  atomic { DRAINED(TC) -> sleepw = ASLEEP };  /* looper_publish_sleep: seq_cst exchange */
#endif
#ifndef MUTANT_NO_FLAG_RECHECK
  /* looper_has_news_or_wake, seq_cst: the flag (nothing else is news here) */
  if
  :: woken != 0 -> goto awake
  :: else
  fi;
#endif
  /* dq_event_wait(seen, no deadline) */
  if
  :: event != seen -> skip
  :: timeout && QUIET ->
     /* no thread can move and every wake is covered: idle for good */
end_idle:
     (event != seen)
  fi;
awake:
  st_plain(TC, V_SLEEP, AWAKE);             /* relaxed store of DQ_AWAKE */
  seen = 0;
  goto wait
}

/* ---- a waker (any_looper.c: dq_wake) -------------------------------- */
proctype waker(byte t) {
  byte old, s;
  bool won;
#ifdef TSO
  run flusher(t)
#endif
  /* the flag: seq_cst exchange (ghost: this wake is sent) */
#ifdef WEAK_WAKE_FLAG
  atomic { old = woken; sent++ };
  st_plain(t, V_WOKEN, 1);
#else
  atomic { DRAINED(t) -> old = woken; woken = 1; sent++ };
#endif
  if
  :: old == 0 ->
     /* dq_wake_consumer: seq_cst load of the sleep word */
     s = sleepw;
     if
     :: s != AWAKE ->
        /* dq_wake_sleeper: CAS the word to AWAKE; the winner bumps the
           event (dq_event_signal, or the eventfd write) */
        atomic { DRAINED(t) -> if :: sleepw == s -> sleepw = AWAKE; won = 1 :: else fi };
        if :: won -> atomic { DRAINED(t) -> event++ } :: else fi
     :: else
     fi
  :: else                                   /* coalesced: that wake checks */
  fi
}

init {
  atomic { run waker(1); run waker(2) }
}

ltl live { <>[] QUIET }
