/*
 * fd_wake.pml: the consumer's sleep once fds are watched: the futex wait
 * or the epoll wait, which one a waker signals, and a listener added from
 * another thread while the consumer sleeps.
 *
 * C functions abstracted (every step below names its own):
 *   deliqueue/src/looper.c     looper_next, looper_sleep, looper_has_news
 *   deliqueue/src/looper_fd.c  dq_looper_fd_step (looper_fd_refresh, the
 *                              listener run), dq_looper_fd_wait
 *   deliqueue/src/fd.h         dq_looper_fd_mark_sleep
 *   deliqueue/src/any_post.c, core.c  post_pushed, dq_wake_sleeper, dq_wake_consumer
 *   deliqueue/src/any_fd.c, core_fd.c  dq_add_fd_listener (fd_add_locked,
 *                              fd_changed), dq_fd_signal
 *   deliqueue/src/wait.c       dq_event_read, dq_event_wait, dq_event_signal
 *
 * Threads: the consumer; P posts one message (due now); A adds a
 * listener for an fd that is already readable (its epoll_ctl ADD reaches
 * a wait in progress), or adds it and later removes it, or does nothing.
 * The consumer starts on the futex (no fd watched) or, if A was quick,
 * finds the table changed on its first step.
 *
 * Invariant (no lost wake): the consumer never sleeps for good while the
 * message is unseen, the fd is watched and readable with its listener not
 * yet run, or a change of the table is unseen.  Checked as in
 * sleep_wake.pml: the untimed wait may end the run (end_idle) only when
 * QUIET, and ltl live, <>[] QUIET.
 *
 * Abstracted away, and why that is sound:
 *   - deadlines: every wait here is untimed (nothing is delayed), the
 *     harder case for a lost wake; sleep_wake.pml has the timed waits and
 *     the barrier rules, which this path does not change;
 *   - the eventfd is edge-triggered: a write queues one event, the epoll
 *     wait takes the queued ones (efd); the watched fd is level-triggered
 *     and readable until its listener runs;
 *   - the table's mutex: the add's table change and epoll_ctl are one
 *     atomic step (they are under the lock; the consumer reads the table
 *     under the same lock in one refresh);
 *   - the listener run is one step; the fairness polls only add polls.
 *
 * Memory model.  Default: SC.  -DTSO: plain stores (the mark, the AWAKE
 * store) go through a store buffer of 2, as in sleep_wake.pml; seq_cst
 * stores and RMWs drain it first.  The pairs:
 *   consumer: mark (relaxed), seq_cst store of the sleep word, then
 *     seq_cst loads of top and fd_changed;
 *   producer: push CAS, seq_cst load of the word, CAS, then the mark;
 *   adder: seq_cst store of fd_changed, seq_cst load of the word.
 * Weakening (must make SPIN fail):
 *   -DWEAK_FD_CHANGED   the adder's store of fd_changed may wait in its
 *                       buffer past its load of the sleep word
 * Mutants (must make SPIN fail):
 *   -DMUTANT_NO_FD_RECHECK   looper_has_news does not read fd_changed: an
 *                            add that finds the consumer awake but about
 *                            to sleep on the futex is never seen
 *   -DMUTANT_MARK_AFTER_WORD the mark is stored after the sleep word
 *                            (and its re-checks): a waker may take the
 *                            word of an epoll sleep and still read the
 *                            futex mark
 *   -DMUTANT_NO_EVENTFD_WRITE a waker that reads the epoll mark writes no
 *                            eventfd: the epoll wait misses the wake
 */

#define AWAKE  0
#define ASLEEP 1

#define NONE_ADD 0
#define ADD      1
#define ADD_DEL  2

/* -- shared state -- */
byte top;            /* q->top: pushes accepted */
byte sleepw = AWAKE; /* q->sleep */
bool mark;           /* fs->epoll_sleep */
byte event;          /* q->wake: the futex word */
byte efd;            /* eventfd edges queued in the epoll set */
bool fdch;           /* q->fd_changed */
bool watched;        /* the listener is in the table and the epoll set */
bool readable = 1;   /* the fd has data */
bool ran;            /* ghost: the listener ran */
byte adder_state;    /* ghost: what A chose */
bool seen_change;    /* ghost: the consumer refreshed after A's last change */
bool epoll_on;       /* consumer only: fs->active, its wait is epoll */
byte bnd;            /* consumer only: pushes swept */

#define PENDING_FD (watched && readable && !ran)
#define QUIET (top == bnd && !PENDING_FD && (!fdch))

/* -- store buffers (-DTSO) -- */
#define TC 0
#define TP 1
#define TA 2
#define V_SLEEP 1
#define V_MARK  2
#define V_FDCH  3

inline mem_write(loc, x) {
  if
  :: loc == V_SLEEP -> sleepw = x
  :: loc == V_MARK -> mark = x
  :: loc == V_FDCH -> fdch = x
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

/* dq_wake_sleeper: CAS the word seen to AWAKE; the winner signals the wait
   the mark names (dq_fd_signal, else dq_event_signal) */
inline dq_wake_sleeper(t) {
  won = 0;
  atomic { DRAINED(t) -> if :: sleepw == ASLEEP -> sleepw = AWAKE; won = 1 :: else fi };
  if
  :: won ->
     m = mark;                              /* relaxed, after the CAS */
     if
#ifdef MUTANT_NO_EVENTFD_WRITE
     :: m -> skip
#else
     :: m -> atomic { efd++ }               /* write(eventfd) */
#endif
     :: else -> atomic { DRAINED(t) -> event++ }  /* futex: bump, wake */
     fi
  :: else
  fi
}

/* post_pushed / dq_wake_consumer: seq_cst load of the word */
inline wake_consumer(t) {
  s = sleepw;
  if :: s == ASLEEP -> dq_wake_sleeper(t) :: else fi
}

/* ---- the consumer ------------------------------------------------------ */
active proctype consumer() {
  byte seen;
  bool in_epoll;
#ifdef TSO
  run flusher(TC)
#endif
step:
  /* dq_looper_fd_step -> looper_fd_refresh: exchange fd_changed (seq_cst
     RMW), then the table under the lock */
  if
  :: atomic { DRAINED(TC) && fdch -> fdch = 0 };
     atomic { epoll_on = watched; seen_change = 1 }
  :: else
  fi;
  /* looper_collect: sweep what was pushed (the message is delivered) */
  atomic { DRAINED(TC) -> bnd = top };
  /* a poll: run the listener if its fd is ready (epoll_wait, timeout 0) */
  if
  :: atomic { epoll_on && watched && readable && !ran -> ran = 1 };  /* it reads the fd */
     atomic { readable = 0 };
     goto step
  :: else
  fi;

  /* looper_sleep */
  in_epoll = epoll_on;
  seen = event;                             /* dq_event_read */
#ifndef MUTANT_MARK_AFTER_WORD
  st_plain(TC, V_MARK, in_epoll);           /* dq_looper_fd_mark_sleep: relaxed */
#endif
  atomic { DRAINED(TC) -> sleepw = ASLEEP }; /* seq_cst store */
  /* looper_has_news, seq_cst: top, then fd_changed */
  if :: top != bnd -> goto awake :: else fi;
#ifndef MUTANT_NO_FD_RECHECK
  if :: fdch -> goto awake :: else fi;
#endif
#ifdef MUTANT_MARK_AFTER_WORD
  st_plain(TC, V_MARK, in_epoll);
#endif
  if
  :: in_epoll ->
     /* dq_looper_fd_wait: epoll over the watched fd and the eventfd */
     if
     :: atomic { efd > 0 -> efd = 0 }
     :: (watched && readable) -> skip
     :: timeout && QUIET ->
end_idle_epoll:
        (efd > 0 || (watched && readable))
     fi;
     st_plain(TC, V_MARK, 0)                /* after the wait */
  :: else ->
     /* dq_event_wait(seen, INT64_MAX) */
     if
     :: event != seen -> skip
     :: timeout && QUIET ->
end_idle_futex:
        (event != seen)
     fi
  fi;
awake:
  st_plain(TC, V_SLEEP, AWAKE);             /* relaxed */
  goto step
}

/* ---- P: one post, due now ------------------------------------------- */
active proctype producer() {
  byte s;
  bool won, m;
#ifdef TSO
  run flusher(TP)
#endif
  atomic { DRAINED(TP) -> top++ };          /* the push: seq_cst CAS */
  wake_consumer(TP)                         /* post_pushed, wake_for_post */
}

/* ---- A: add a listener for a readable fd; maybe remove it ---------- */
active proctype adder() {
  byte s;
  bool won, m;
#ifdef TSO
  run flusher(TA)
#endif
  if
  :: adder_state = NONE_ADD
  :: adder_state = ADD
  :: adder_state = ADD_DEL
  fi;
  if
  :: adder_state != NONE_ADD ->
     /* dq_add_fd_listener: the table and epoll_ctl ADD, under the lock */
     atomic { watched = 1; seen_change = 0 };
     /* fd_changed: seq_cst store, then dq_wake_consumer */
#ifdef WEAK_FD_CHANGED
     st_plain(TA, V_FDCH, 1);
#else
     atomic { DRAINED(TA) -> fdch = 1 };
#endif
     wake_consumer(TA);
     if
     :: adder_state == ADD_DEL ->
        /* dq_remove_fd_listener: the table and epoll_ctl DEL */
        atomic { watched = 0; seen_change = 0 };
        atomic { DRAINED(TA) -> fdch = 1 };
        wake_consumer(TA)
     :: else
     fi
  :: else
  fi
}

ltl live { <>[] QUIET }
