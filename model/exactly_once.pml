/*
 * exactly_once.pml: every accepted message is delivered or discarded
 * exactly once, and reported once, by the one claimer that wins.
 *
 * C functions abstracted (every step below names its own):
 *   deliqueue/src/looper.c  looper_next, looper_collect, looper_pick,
 *                           looper_take (delivery CAS PENDING->DELIVERED),
 *                           dq_looper_teardown (core.c) (reports what is still
 *                           PENDING, without CAS, once the users drained)
 *   deliqueue/src/any_*.c, core*.c  post_node_with, claim_token (dq_cancel: CAS
 *                           PENDING->REMOVED), match_walk_run (dq_remove:
 *                           the same CAS), dq_push_removals, dq_quit,
 *                           dq_quit_safely (dq_claim_due_after: the same
 *                           CAS on what is due after the cut),
 *                           dq_users_enter, dq_users_leave
 *
 * Threads: the consumer; a producer posting M1; a canceller holding
 * M0's token (dq_cancel); a remover matching M1 (dq_remove); a quitter
 * calling dq_quit or dq_quit_safely (its pick).  M0 is on the stack before
 * the threads start; M0 is due now, M1 due now or after the cut (its
 * pick), so the trim has something to claim.
 *
 * Invariant: a message is reported (delivered, or passed to on_discard)
 * only by the thread whose claim moved it from PENDING, so never twice
 * (asserted at every report); when the teardown ends every accepted
 * message has been reported exactly once and a refused post never
 * (asserted there); and the consumer always reaches that point (no
 * invalid end state: the quitter always quits; ltl done, <> torn).
 *
 * Abstracted away, and why that is sound:
 *   - the consumer's sleep is a perfect wake (it waits for news: a push,
 *     the tag, a removal): lost wakes are sleep_wake.pml's subject, and a
 *     late wake only delays a claim, it cannot add one;
 *   - the wait for the quit mode is a blocking guard (drain.pml has its
 *     Dekker pair), and the teardown's wait for the users is one too
 *     (user_count.pml has its event protocol);
 *   - the walk of dq_remove and its grace period are walker_epochs.pml;
 *     here the remover claims M1 if its push was visible;
 *   - a node is not reused: a stale token's CAS compares the whole state
 *     word, generation included, so once the node is retired it fails as
 *     it does against DELIVERED or REMOVED;
 *   - the consumer's collect and pick are one atomic step; a claim that
 *     lands inside the C step gives the outcome of one just before or
 *     just after it, since every claim is a CAS from PENDING.
 * Memory: every claim is an RMW on the node's state word, and C11 RMWs on
 * one location are totally ordered (modification order) whatever their
 * memory order, so exactly one of them reads PENDING: the result holds
 * under TSO and ARMv8 as under SC; no weak-memory variant is needed.  The
 * report's payload reads are ordered by the claim's acquire (remover,
 * canceller) or by the sweep's acquire load of top (consumer).
 *
 * Mutants:
 *   -DMUTANT_DELIVER_NO_CAS        the delivery stores DELIVERED instead of
 *                                  a CAS: a cancelled message is also
 *                                  delivered;
 *   -DMUTANT_TEARDOWN_SKIPS_DRAIN  the teardown reports without waiting for
 *                                  the users to leave: a remover and the
 *                                  teardown both report one message.
 */

#define FREE      0
#define PENDING   1
#define DELIVERED 2
#define REMOVED   3

#define NN   2
#define M0   0
#define M1   1
#define NONE 255

#define RUNNING 0
#define SAFELY  1
#define NOW     2
#define UQUIT   128

byte top = 1;
bool tag;
byte stk[NN];
byte st[NN];
byte due[NN];
bool acc[NN];
byte reports[NN];   /* ghost: reports made for each message */
byte removals;
byte mode = RUNNING;
byte quit_time = 255;
byte users;
bool torn;

/* a report: the caller won the claim; nobody reported before */
inline report(n) {
  assert(reports[n] == 0);
  reports[n]++
}

init {
  d_step { stk[0] = M0; st[M0] = PENDING; due[M0] = 1; acc[M0] = 1 };
  atomic { run consumer(); run producer(); run canceller(); run remover(); run quitter() }
}

/* ---- the consumer ------------------------------------------------------ */
proctype consumer() {
  byte bnd, heap, rem, n, nxt, m, qt;
step:
  /* looper_next: the tag before collecting; looper_await_quit_mode */
  if
  :: tag -> (mode != RUNNING); m = mode; qt = quit_time
  :: else
  fi;
  /* looper_collect, looper_pick */
  d_step {
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
  :: m == NOW -> goto teardown
  :: else
  fi;
  if
  :: nxt != NONE && (m != SAFELY || due[nxt] <= qt) ->
     /* looper_take (dues here are all reached once the clock allows;
        the drain delivers what is due by the cut) */
#ifdef MUTANT_DELIVER_NO_CAS
     atomic { st[nxt] = DELIVERED; report(nxt) };
#else
     atomic { if :: st[nxt] == PENDING -> st[nxt] = DELIVERED; report(nxt) :: else fi };
#endif
     heap = heap & ~(1 << nxt); nxt = 0;
     goto step
  :: else
  fi;
  if
  :: m == SAFELY -> goto teardown
  :: else
  fi;
  /* looper_sleep, with a perfect wake: until there is news */
  (top != bnd || tag || removals != 0);
  goto step;

teardown:
  /* dq_looper_teardown: the users bit, then wait for the users to leave */
  users = users | UQUIT;
#ifndef MUTANT_TEARDOWN_SKIPS_DRAIN
  (users == UQUIT);
#endif
  /* alone: report every accepted message still PENDING, without CAS */
  for (n : 0 .. NN - 1) {
    if
    :: acc[n] && st[n] == PENDING -> report(n)
    :: else
    fi
  };
  torn = 1;
  /* every accepted message reported once; a refused one never */
  (users == UQUIT);    /* (the mutant's late remover has left) */
  d_step {
    for (n : 0 .. NN - 1) {
      assert(acc[n] -> reports[n] == 1 : reports[n] == 0)
    };
    n = 0
  }
}

/* ---- the producer: M1, due now or after the cut ------------------------ */
proctype producer() {
  if
  :: d_step { due[M1] = 1; st[M1] = PENDING }
  :: d_step { due[M1] = 5; st[M1] = PENDING }
  fi;
  atomic {                                  /* post_node_with: push CAS */
    if
    :: tag -> st[M1] = FREE                 /* refused: -ESHUTDOWN */
    :: else -> stk[top] = M1; top++; acc[M1] = 1
    fi
  }
}

/* ---- dq_cancel(M0's token): claim_token -------------------------------- */
proctype canceller() {
  bool in;
  atomic { if :: !(users & UQUIT) -> users++; in = 1 :: else fi };  /* dq_users_enter */
  if
  :: in ->
     atomic {                               /* CAS PENDING -> REMOVED (acq_rel) */
       if
       :: st[M0] == PENDING -> st[M0] = REMOVED; report(M0);  /* dq_report_discard */
          removals = removals | (1 << M0)   /* dq_push_removals */
       :: else
       fi
     };
     users--                                /* dq_users_leave */
  :: else
  fi
}

/* ---- dq_remove matching M1: match_walk_run ---------------------------- */
proctype remover() {
  bool in;
  atomic { if :: !(users & UQUIT) -> users++; in = 1 :: else fi };  /* dq_users_enter */
  if
  :: in ->
     atomic {                               /* match_walk_run met M1: claim CAS */
       if
       :: acc[M1] && st[M1] == PENDING -> st[M1] = REMOVED; report(M1);
          removals = removals | (1 << M1)   /* dq_push_removals */
       :: else
       fi
     };
     users--                                /* dq_users_leave */
  :: else
  fi
}

/* ---- dq_quit or dq_quit_safely ---------------------------------------- */
proctype quitter() {
  byte n;
  bool in;
  if
  :: /* dq_quit: the mode, the tag, the users bit */
     mode = NOW; tag = 1; users = users | UQUIT
  :: /* dq_quit_safely: the tag, the cut, the trim, the mode */
     tag = 1; quit_time = 1;
     /* dq_claim_due_after: a walker inside the user count */
     atomic { if :: !(users & UQUIT) -> users++; in = 1 :: else fi };
     if
     :: in ->
        for (n : 0 .. NN - 1) {
          atomic {                          /* claim CAS PENDING -> REMOVED */
            if
            :: acc[n] && st[n] == PENDING && due[n] > quit_time ->
               st[n] = REMOVED; report(n);
               removals = removals | (1 << n)  /* dq_push_removals */
            :: else
            fi
          }
        };
        n = 0;
        users--                             /* dq_users_leave */
     :: else
     fi;
     mode = SAFELY
  fi
}

ltl done { <> torn }
