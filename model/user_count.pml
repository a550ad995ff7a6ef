/*
 * user_count.pml: the tagged user count that keeps the core alive while
 * removers and walkers are inside, and wakes the teardown when the last
 * one leaves.
 *
 * C functions abstracted (every step below names its own):
 *   deliqueue/src/core.c    dq_users_enter (CAS count + 1 while the QUIT
 *                           bit is clear, else -ESHUTDOWN),
 *                           dq_users_leave (fetch_sub; the one that takes
 *                           the word from QUIT|1 signals the event), dq_quit
 *                           (users |= QUIT)
 *   deliqueue/src/core.c    dq_looper_teardown (users |= QUIT; loop { seen
 *                           = event; users == QUIT: break; wait(seen) };
 *                           then free the core)
 *   deliqueue/src/wait.c    dq_event_read, dq_event_wait, dq_event_signal
 *
 * Threads: two users (a remover, a walker: any caller of dq_users_enter),
 * the first of which calls twice; a quitter (dq_quit's users bit, racing
 * with the teardown's); the consumer's teardown.
 *
 * Invariants: the core is never freed while a user is inside (asserted
 * at the free, and at every use of the core); the last user out always
 * wakes the teardown (no invalid end state: the teardown's wait is not an
 * end state, so a teardown parked for good is an error).  Liveness: ltl
 * freed_eventually, <> freed, under weak fairness (the enter's CAS loop
 * may retry while others move).
 *
 * Abstracted away, and why that is sound:
 *   - what a user does inside is one ghost counter (inside): the property
 *     is about the core's lifetime, not its contents;
 *   - the futex: dq_event_wait(seen) returns once the event differs from
 *     seen (the kernel compares atomically); spurious returns only loop;
 *   - the word is count | QUIT as one byte (QUIT = 128; the count stays
 *     small).
 * Memory: every write to the users word and to the event is an RMW, so
 * there is no store to buffer: the TSO run would be the SC run.  Orders
 * that matter on ARMv8: the teardown reads the event (acquire) before the
 * users word (acquire), and a leaver decrements (release) before it bumps
 * the event (release): if the teardown's read of the event saw the bump,
 * its load of users sees the decrement (message passing), so it parks
 * only on a count that is older than the bump, and the futex returns.
 * The enter's acquire and the leave's release order the user's accesses
 * to the core inside the count, before the teardown's acquire load of
 * QUIT with no user.
 *
 * Mutants:
 *   -DMUTANT_NO_LAST_SIGNAL  the last one out does not signal: the teardown
 *                            sleeps for good (invalid end state);
 *   -DMUTANT_EARLY_DEC       a user leaves the count before its use of the
 *                            core ends: the core is freed under it.
 */

#define UQUIT 128

byte users;        /* q->users */
byte event;        /* q->wake */
byte inside;       /* ghost: users using the core now */
bool freed;        /* ghost: the core was freed */

inline enter() {   /* dq_users_enter */
  in = 0;
  do
  :: u = users;                             /* relaxed load */
     if
     :: u & UQUIT -> break                  /* -ESHUTDOWN */
     :: else ->
        atomic { if :: users == u -> users = u + 1; in = 1 :: else fi };  /* CAS, acquire */
        if :: in -> break :: else fi
     fi
  od;
  u = 0
}

inline leave() {   /* dq_users_leave */
  atomic { u = users; users-- };            /* fetch_sub, release */
#ifndef MUTANT_NO_LAST_SIGNAL
  if :: u == (UQUIT | 1) -> event++ :: else fi;   /* last one out while quitting */
#endif
  u = 0
}

inline use() {     /* the call's work on the core */
  atomic { assert(!freed); inside++ };
#ifdef MUTANT_EARLY_DEC
  leave();                                  /* mutant: counted out too soon */
#endif
  atomic { assert(!freed); inside-- }
#ifndef MUTANT_EARLY_DEC
  ; leave()
#endif
}

proctype user(byte calls) {
  byte u;
  bool in;
  do
  :: calls > 0 ->
     calls--;
     enter();
     if :: in -> use() :: else fi
  :: else -> break
  od
}

proctype quitter() {
  users = users | UQUIT                     /* dq_quit: fetch_or, acq_rel */
}

proctype teardown() {
  byte seen;
  users = users | UQUIT;                    /* dq_looper_teardown: fetch_or */
  do
  :: seen = event;                          /* dq_event_read (acquire) */
     if
     :: users == UQUIT -> break             /* acquire */
     :: else -> (event != seen)             /* dq_event_wait(seen, forever) */
     fi
  od;
  atomic { assert(inside == 0); freed = 1 } /* free(core) */
}

init {
  atomic { run user(2); run user(1); run quitter(); run teardown() }
}

ltl freed_eventually { <> freed }
