/*
 * drain.pml: dq_quit_safely and the drain that follows it.
 *
 * C functions abstracted (every step below names its own):
 *   deliqueue/src/any_*.c, core*.c  dq_quit_safely (tag_top, quit_time,
 *                           dq_claim_due_after, raise_quit_mode),
 *                           dq_wake_consumer,
 *                           dq_wake_sleeper, post_node_with, post_pushed,
 *                           match_walk_run (dq_remove), claim_token,
 *                           dq_push_removals, dq_users_enter, dq_users_leave
 *   deliqueue/src/looper.c  looper_next, looper_await_quit_mode,
 *                           looper_collect, looper_pick, looper_take, looper_sleep,
 *                           dq_looper_teardown (core.c)
 *
 * Threads: the consumer; a producer posting one due-now message (M1,
 * racing with the quit; the clock may tick just before its read); a
 * quitter calling dq_quit_safely; a remover calling dq_remove on M0
 * (through the drain).  Before the threads start, M0 (due now) and M2
 * (delayed, due after any cut) are on the stack.
 *
 * Invariants (assertions):
 *   - a message already due when its push landed is never trimmed: the
 *     cut (quit_time) is read after the tag, every accepted push came
 *     before the tag, and its due was read from the clock before it;
 *   - the trim runs in dq_quit_safely, after the tag and the cut and
 *     before the mode, and a consumer that sees the tag waits for the
 *     mode: so once the consumer acts on SAFELY nothing due after the cut
 *     is left to deliver, and the drain's end drops nothing due by the
 *     cut (all such are delivered);
 *   - removal keeps working through the drain: a message whose dq_remove
 *     was refused (-ESHUTDOWN) is never delivered afterwards (refusal
 *     comes only from the teardown's users bit, after the last delivery);
 *   - exactly once: at the end of the teardown every accepted message
 *     was delivered or discarded exactly once, and a refused post never;
 *   - no invalid end state: the consumer always reaches the end of the
 *     teardown (it never sleeps through the quit, never waits for a mode
 *     that is already set, never misses the last user's signal);
 *   - liveness: ltl done, <> torn (acceptance cycles; every cycle needs
 *     another thread's step, so no fairness is assumed).
 *
 * Abstracted away, and why that is sound:
 *   - no barriers, one heap: barriers and held messages are model
 *     sleep_wake.pml; the drain treats every message alike;
 *   - the sweep and pick are one atomic step each (they read immutable
 *     push data and node states that claims only move away from
 *     PENDING; a claim they miss is caught by the CAS of the delivery or
 *     by the removal list, as in C);
 *   - the trim's walk: one claim CAS per message, each with its push
 *     onto the removal list (as dq_remove's below), inside the quitter's
 *     user count;
 *   - dq_remove's walk and its grace period: walker_epochs.pml; here the
 *     walk is the claim CAS on the node it targets;
 *   - time: a clock that ticks at most once before the cut, once more
 *     (to M2's due) while dq_quit_safely runs after reading it, and a
 *     timed wait that may time out (the clock jumps to the deadline) when
 *     the deadline is within HORIZON; M2's is not, so a wait for it ends
 *     on a wake or once that later tick has come;
 *   - a remover's claim and its push onto the removal list are one step,
 *     and so are a wake's CAS of the sleep word and its signal: between
 *     them the node is claimed (every other claim fails either way), and
 *     a sleeper re-reads top after storing its word.
 * The teardown's drop of still-pending messages is unreachable here (the
 * drain delivers or trims everything; barriers are sleep_wake.pml's):
 * exactly_once.pml reaches it through dq_quit.
 *
 * Memory model.  Default: sequential consistency.  -DTSO: plain stores
 * (the consumer's relaxed store of AWAKE) go through a store buffer (a
 * FIFO of 2 drained by a flusher process); a seq_cst store or RMW first
 * drains its thread's buffer (x86 XCHG and LOCK-prefixed ops are full
 * fences).  The Dekker pair of this protocol:
 *   quitter: seq_cst CAS of quit_mode, then seq_cst load of sleep
 *            (dq_wake_consumer);
 *   consumer in looper_await_quit_mode: seq_cst store of sleep, then
 *            seq_cst load of quit_mode.
 * Weakenings (each must make SPIN fail):
 *   -DWEAK_MODE_CAS      the mode's store may sit in the buffer past the
 *                        quitter's load of sleep
 *   -DWEAK_AWAIT_STORE   the consumer's sleep store may sit past its
 *                        re-read of the mode
 * ARMv8 beyond TSO: other-multi-copy-atomic, and the seq_cst accesses of
 * the pair are LDAR/STLR or acquire-release RMWs, not reordered with each
 * other, so the pair behaves as under SC.  The rest is message passing:
 * the trim's claims reach the consumer through the removal list (release
 * push CAS, acquire exchange); the users word's release decrement pairs
 * with the teardown's acquire load, so the removers' and the trim's
 * claims and removal-list pushes are visible to the teardown.
 *
 * Mutants:
 *   -DMUTANT_QUIT_TIME_BEFORE_TAG        the cut is read before the tag: a
 *       due-now post accepted between that read and the tag is trimmed;
 *   -DMUTANT_REMOVAL_REFUSED_WHILE_DRAINING  dq_quit_safely sets the users
 *       bit at once: dq_remove during the drain is refused and the message
 *       it meant to remove is then delivered;
 *   -DMUTANT_MODE_BEFORE_TRIM            the mode is raised before the trim:
 *       a consumer whose clock passed the cut delivers a message the trim
 *       was about to drop.
 */

#define FREE      0
#define PENDING   1
#define DELIVERED 2
#define REMOVED   3

#define NN   3
#define M0   0     /* on the stack before the threads start, due now */
#define M1   1     /* the producer's post, racing with the quit */
#define M2   2     /* on the stack before, due after any cut */
#define NONE 255

#define INF   7
#define HORIZON 2  /* the run ends before M2's due: a wait for it does not time out */
#define AWAKE 0    /* sleep word: AWAKE or deadline (no barriers: no held bit) */

#define RUNNING 0
#define SAFELY  1

#define UQUIT 128  /* DQ_USERS_QUIT */

byte top = 2;      /* q->top: number of accepted pushes ... */
bool tag;          /* ... and the quit tag in the same word */
byte stk[NN] = 255;
byte st[NN];
byte due[NN];
bool acc[NN];      /* ghost: accepted */
bool ripe[NN];     /* ghost: due by the clock when its push landed */
bool refused[NN];  /* ghost: a dq_remove of it was refused */
byte reports[NN];  /* ghost: deliveries + discards reported */
byte removals;     /* core->removals (bitmask) */
byte sleepw = AWAKE;
byte event;
byte clock = 1;
byte mode = RUNNING;   /* q->quit_mode */
byte quit_time = 255;  /* q->quit_time (255: -1, unset) */
byte users;            /* q->users: count | UQUIT */
bool torn;             /* ghost: the teardown finished */

/* -- store buffers (-DTSO) -- */
#define TC 0
#define TQ 1
#define V_SLEEP 1
#define V_MODE  2

inline mem_write(loc, x) {
  if
  :: loc == V_SLEEP -> sleepw = x
  :: loc == V_MODE -> mode = x
  fi
}

#ifdef TSO
#define SBN 2
typedef SB { byte n; byte bv[SBN]; byte bx[SBN] };
SB sb[2];
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

init {
  d_step {
    /* M0 and M2 posted and accepted before the threads start */
    stk[0] = M0; st[M0] = PENDING; due[M0] = 1; acc[M0] = 1; ripe[M0] = 1;
    stk[1] = M2; st[M2] = PENDING; due[M2] = 3; acc[M2] = 1
  };
  atomic {
    run consumer(); run producer(); run quitter(); run remover()
#ifdef TSO
    ; run flusher(TC)
#endif
#ifdef WEAK_MODE_CAS
    ; run flusher(TQ)
#endif
  }
}

/* ---- the consumer ------------------------------------------------------ */
proctype consumer() {
  byte bnd, heap, rem, n, nxt, dl, seen, now, m, qt;
  bool tg;
step:
  /* looper_next: acquire load of top; the tag before collecting */
  tg = tag;
  if
  :: tg && m == RUNNING ->
     /* looper_await_quit_mode */
     do
     :: m = mode;                           /* acquire */
        if
        :: m != RUNNING -> break
        :: else
        fi;
        seen = event;                       /* dq_event_read */
#ifdef WEAK_AWAIT_STORE
        st_plain(TC, V_SLEEP, INF);
#else
        atomic { DRAINED(TC) -> sleepw = INF };   /* seq_cst store */
#endif
        if
        :: mode == RUNNING -> (event != seen)      /* seq_cst load; dq_event_wait */
        :: else
        fi;
        st_plain(TC, V_SLEEP, AWAKE);       /* relaxed */
        seen = 0
     od;
     qt = quit_time                         /* published by the mode CAS */
  :: else
  fi;
  /* One step from the clock read to the pick, atomic: looper_collect
     (exchange of the removal list, an RMW: DRAINED; the sweep; the
     removals), looper_pick.  Its claims are CASes and what it
     reads of other threads only moves away from PENDING, so a remover or
     a push landing inside the C step gives the outcome of one landing
     just before or just after it. */
  d_step {
    DRAINED(TC) ->
    now = clock;                            /* dq_now() */
    rem = removals; removals = 0;
    n = bnd;
    do
    :: n < top -> if :: st[stk[n]] == PENDING -> heap = heap | (1 << stk[n]) :: else fi; n++
    :: else -> break
    od;
    bnd = top;
    heap = heap & ~rem;
    nxt = NONE;
    for (n : 0 .. NN - 1) {
      if
      :: heap & (1 << n) && (nxt == NONE || due[n] < due[nxt]) -> nxt = n
      :: else
      fi
    };
    n = 0; rem = 0
  };
  if
  :: nxt != NONE && due[nxt] <= now ->
     /* looper_take: CAS PENDING -> DELIVERED */
     atomic {
       DRAINED(TC) ->
       if
       :: st[nxt] == PENDING ->
          st[nxt] = DELIVERED; reports[nxt]++;
          assert(!refused[nxt]);            /* its removal was not refused */
          assert(m != SAFELY || due[nxt] <= qt)  /* nothing past the cut */
       :: else
       fi
     };
     heap = heap & ~(1 << nxt); nxt = 0;
     goto step
  :: else ->
     dl = (nxt == NONE -> INF : due[nxt]); nxt = 0
  fi;
  if
  :: m == SAFELY -> goto teardown           /* the drain ends */
  :: else
  fi;
  /* looper_sleep */
  seen = event;
  atomic { DRAINED(TC) -> sleepw = dl };    /* seq_cst store */
  if
  :: top != bnd || tag -> goto awake        /* looper_has_news, seq_cst */
  :: else
  fi;
  if
  :: removals != 0 -> goto awake
  :: else
  fi;
  if                                        /* dq_event_wait(seen, dl) */
  :: event != seen -> skip
  :: dl <= HORIZON -> atomic { if :: clock < dl -> clock = dl :: else fi }
  fi;
awake:
  st_plain(TC, V_SLEEP, AWAKE);
  dl = 0; seen = 0; now = 0; tg = 0;
  goto step;

teardown:
  /* dq_looper_teardown: the users bit (acq_rel fetch_or) ends the drain */
  atomic { DRAINED(TC) -> users = users | UQUIT };
  do
  :: seen = event;                          /* dq_event_read */
     if
     :: users == UQUIT -> break             /* acquire */
     :: else -> (event != seen)             /* dq_event_wait */
     fi
  od;
  /* alone: report every accepted message still pending, and check */
  atomic {
    for (n : 0 .. NN - 1) {
      if
      :: acc[n] && st[n] == PENDING ->
         assert(due[n] > qt);               /* the drain left nothing due */
         st[n] = REMOVED; reports[n]++
      :: else
      fi;
      assert(acc[n] -> reports[n] == 1 : reports[n] == 0)
    };
    n = 0;
    torn = 1
  }
}

/* ---- the producer: one due-now post (post_node_with, post_pushed) ------ */
proctype producer() {
  byte s;
  /* dq_post: the clock read (the clock may tick just before it) */
  if
  :: d_step { due[M1] = clock; st[M1] = PENDING }
  :: d_step { clock == 1 -> clock = 2; due[M1] = 2; st[M1] = PENDING }
  fi;
  atomic {                                  /* the push CAS (seq_cst) */
    if
    :: tag -> st[M1] = FREE                 /* refused: -ESHUTDOWN */
    :: else -> stk[top] = M1; top++; acc[M1] = 1; ripe[M1] = (due[M1] <= clock)
    fi
  };
  if
  :: acc[M1] ->
     s = sleepw;                            /* post_pushed: seq_cst load */
     if
     :: s != AWAKE && due[M1] < s ->        /* wake_for_post */
        /* dq_wake_sleeper: the CAS and the winner's signal as one step (a
           sleeper re-reads top after its store anyway) */
        atomic { if :: sleepw == s -> sleepw = AWAKE; event++ :: else fi }
     :: else
     fi
  :: else
  fi
}

/* ---- dq_quit_safely ---------------------------------------------------- */
proctype quitter() {
  byte t, s, n, u;
  bool won, inside;
#ifdef MUTANT_QUIT_TIME_BEFORE_TAG
  t = clock;                                /* mutant: the cut before the tag */
#endif
  atomic { DRAINED(TQ) -> tag = 1 };        /* quit: seq_cst fetch_or of the tag */
#ifndef MUTANT_QUIT_TIME_BEFORE_TAG
  t = clock;                                /* dq_now(), after the tag */
#endif
  atomic { DRAINED(TQ) -> if :: quit_time == 255 -> quit_time = t :: else fi };  /* CAS -1 -> t */
  t = quit_time;
  /* time may pass during the call: past the cut, M2 falls due */
  if
  :: atomic { clock < 3 -> clock = 3 }
  :: skip
  fi;
#ifdef MUTANT_MODE_BEFORE_TRIM
  atomic { DRAINED(TQ) -> if :: mode == RUNNING -> mode = SAFELY :: else fi };
#endif
  /* dq_claim_due_after: dq_users_enter, a walk claiming what is due after
     the cut, dq_push_removals, dq_users_leave */
  atomic {
    DRAINED(TQ) ->
    if
    :: users & UQUIT -> skip                /* dq_quit came first */
    :: else -> users++; inside = 1
    fi
  };
  if
  :: inside ->
     for (n : 0 .. NN - 1) {
       atomic {
         DRAINED(TQ) ->
         if
         :: acc[n] && st[n] == PENDING && due[n] > t ->
            st[n] = REMOVED; reports[n]++;  /* claim CAS, dq_report_discard */
            assert(!ripe[n]);               /* never trim a due-now post */
            removals = removals | (1 << n)  /* dq_push_removals (seq_cst) */
         :: else
         fi
       }
     };
     n = 0;
     atomic { DRAINED(TQ) -> u = users; users-- };  /* dq_users_leave (release) */
     if :: u == (UQUIT | 1) -> event++ :: else fi
  :: else
  fi;
#ifndef MUTANT_MODE_BEFORE_TRIM
#ifdef WEAK_MODE_CAS
  st_plain(TQ, V_MODE, SAFELY);
#else
  atomic { DRAINED(TQ) -> if :: mode == RUNNING -> mode = SAFELY :: else fi };  /* raise_quit_mode (seq_cst) */
#endif
#endif
#ifdef MUTANT_REMOVAL_REFUSED_WHILE_DRAINING
  atomic { DRAINED(TQ) -> users = users | UQUIT };  /* mutant: removers out at once */
#endif
  s = sleepw;                               /* dq_wake_consumer: seq_cst load */
  if
  :: s != AWAKE ->
     atomic { DRAINED(TQ) -> if :: sleepw == s -> sleepw = AWAKE; won = 1 :: else fi };
     if :: won -> atomic { DRAINED(TQ) -> event++ } :: else fi
  :: else
  fi
}

/* ---- dq_remove of M0, through the drain (match_walk_run) -------------- */
proctype remover() {
  bool ok;
  byte u;
  /* dq_users_enter: CAS count + 1 while the bit is clear */
  atomic {
    if
    :: users & UQUIT -> refused[M0] = 1     /* -ESHUTDOWN */
    :: else -> users++; ok = 1
    fi
  };
  if
  :: ok ->
     /* match_walk_run: claim CAS PENDING -> REMOVED (acq_rel), report, then
        dq_push_removals (one step: between them the node is claimed, and
        every other thread's CAS on it fails either way) */
     atomic {
       if
       :: st[M0] == PENDING ->
          st[M0] = REMOVED; reports[M0]++;
          removals = removals | (1 << M0)   /* dq_push_removals: seq_cst CAS */
       :: else
       fi
     };
     /* dq_users_leave: fetch_sub (release); last one out while quitting
        signals the teardown */
     atomic { u = users; users-- };
     if :: u == (UQUIT | 1) -> event++ :: else fi
  :: else
  fi
}

ltl done { <> torn }
