/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The consumer's own match walk (looper_walk.c): called by dq_remove and
 * dq_has (any_claim.c) only when the caller is q's consumer, between
 * looper steps.  It calls down into core_walk.c, never back.
 */
#ifndef DELIQUEUE_SRC_LOOPER_WALK_H
#define DELIQUEUE_SRC_LOOPER_WALK_H

#include "walk.h"

/* The unswept posts and the heaps' members, on the consumer's thread. */
void dq_looper_match_walk(dq_match_walk *w, dq_core *core);

#endif /* DELIQUEUE_SRC_LOOPER_WALK_H */
