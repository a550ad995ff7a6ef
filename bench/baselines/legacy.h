/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/baselines/legacy: Android's old, lock-protected MessageQueue in C.
 *
 * The baseline that DeliQueue replaced, kept for two jobs: the benchmark's
 * contender and the reference model of the differential fuzzer.  It is
 * deliberately simple: one pthread mutex around a singly linked list sorted
 * by (when, insertion order), with a tail pointer so that posting at or after
 * the last message is O(1); any other post walks the list (O(N)).
 *
 * Who may call what concurrently
 * ------------------------------
 * Every function takes the one mutex, so everything may race with
 * everything, exactly as deliqueue.h's table says, with the same roles:
 *   producer   dq_legacy_post*, dq_legacy_post_sync_barrier
 *   remover    dq_legacy_cancel, dq_legacy_remove, dq_legacy_has,
 *              dq_legacy_remove_sync_barrier
 *   any        dq_legacy_quit, dq_legacy_quit_safely, dq_legacy_pending,
 *              dq_legacy_is_idle, dq_legacy_*_idle_handler
 *   consumer   dq_legacy_next, dq_legacy_next_until, dq_legacy_try_next
 *              (the first thread to call one is the consumer; another
 *              gets -EPERM)
 *   owner      dq_legacy_destroy: no other call may be in progress or follow
 *              (the legacy queue is not reference counted).
 *
 * Semantics and error codes are those of deliqueue.h, function for function
 * (dq_legacy_X behaves as dq_X):
 *   - order (when, insertion); when == 0 is the front (LIFO among fronts);
 *   - sync barriers are items without a target, inserted at now like
 *     Android's postSyncBarrier; while one is at the head only DQ_ASYNC
 *     messages are delivered;
 *   - on_discard is called, on the discarding thread and with the mutex
 *     released, exactly once for every accepted message not delivered;
 *   - idle handlers run once per consumer call (dq_legacy_try_next
 *     included) when nothing is due, before it reports -EAGAIN/-ETIMEDOUT
 *     or blocks; one returning false is removed;
 *   - dq_legacy_quit_safely drops what is due later than now inside the
 *     call; until the consumer's drain ends (nothing deliverable is left),
 *     cancel, remove, has, remove_sync_barrier, pending and is_idle act on
 *     what remains; dq_legacy_quit (after dq_legacy_quit_safely too) drops
 *     what is left.  After dq_legacy_quit or the drain's end, pending is
 *     0, has is false, remove is 0, is_idle is true, and cancel and
 *     remove_sync_barrier return -ENOENT (everything is gone);
 *   - one difference of timing, not of outcome: this queue reports what
 *     dq_legacy_quit drops inside the call, deliqueue on the consumer's
 *     next call (or at the last dq_unref); the set of discards is the same;
 *   - time is the clock in dq_legacy_create's options (opts->clock,
 *     read with dq_clock_now: CLOCK_MONOTONIC for NULL), so a manual
 *     clock (dq_clock_create_manual) drives this queue as it drives the
 *     deliqueue queues on it.  On a manual clock a blocked
 *     dq_legacy_next* re-reads the clock every millisecond of real time:
 *     dq_clock_advance wakes only deliqueue's consumers.  The queue takes
 *     no hold on the clock: the clock must outlive it.  This library does
 *     not define dq_clock_now(): link it with //deliqueue:deliqueue or
 *     //deliqueue:deliqueue_testing.
 *
 * Matching and validation are msg.h's, shared with deliqueue.
 */
#ifndef DELIQUEUE_LEGACY_H
#define DELIQUEUE_LEGACY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <deliqueue/deliqueue.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dq_legacy dq_legacy;

/* NULL opts: defaults (CLOCK_MONOTONIC).  NULL with errno = ENOMEM on
   failure. */
dq_legacy *dq_legacy_create(const dq_options *opts);
/* Quit (if not yet) reporting every pending message to on_discard, and free.
   NULL: no-op.  Thread: owner, with no call in progress. */
void dq_legacy_destroy(dq_legacy *q);

int dq_legacy_post(dq_legacy *q, const dq_msg *m, dq_token *tok);
int dq_legacy_post_at(dq_legacy *q, const dq_msg *m, int64_t when, dq_token *tok);
int dq_legacy_post_delayed(dq_legacy *q, const dq_msg *m, int64_t delay, dq_token *tok);
int dq_legacy_post_at_front(dq_legacy *q, const dq_msg *m, dq_token *tok);

int dq_legacy_cancel(dq_legacy *q, dq_token tok);
size_t dq_legacy_remove(dq_legacy *q, const dq_match *m);
bool dq_legacy_has(dq_legacy *q, const dq_match *m);

int dq_legacy_post_sync_barrier(dq_legacy *q, dq_token *tok);
int dq_legacy_remove_sync_barrier(dq_legacy *q, dq_token tok);

int dq_legacy_add_idle_handler(dq_legacy *q, bool (*fn)(void *ctx), void *ctx);
int dq_legacy_remove_idle_handler(dq_legacy *q, bool (*fn)(void *ctx), void *ctx);

int dq_legacy_next(dq_legacy *q, dq_msg *out);
int dq_legacy_next_until(dq_legacy *q, dq_msg *out, int64_t deadline);
int dq_legacy_try_next(dq_legacy *q, dq_msg *out);

void dq_legacy_quit(dq_legacy *q);
void dq_legacy_quit_safely(dq_legacy *q);
bool dq_legacy_is_idle(dq_legacy *q);
size_t dq_legacy_pending(dq_legacy *q);

#ifdef __cplusplus
}
#endif
#endif /* DELIQUEUE_LEGACY_H */
