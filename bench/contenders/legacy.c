/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Contender 2: the legacy queue (mutex + sorted singly linked list with a
 * tail fast path), through its public API only.
 */
#include "bench/baselines/legacy.h"

#include "bench/contender.h"

static void *create(void)
{
    return dq_legacy_create(NULL);
}

static void destroy(void *q)
{
    dq_legacy_destroy(q);
}

static int post_at(void *q, const dq_msg *m, int64_t when, dq_token *tok)
{
    return dq_legacy_post_at(q, m, when, tok);
}

static int try_next(void *q, dq_msg *out)
{
    return dq_legacy_try_next(q, out);
}

static int next_until(void *q, dq_msg *out, int64_t deadline)
{
    return dq_legacy_next_until(q, out, deadline);
}

static int cancel(void *q, dq_token tok)
{
    return dq_legacy_cancel(q, tok);
}

static size_t remove_matching(void *q, const dq_match *m)
{
    return dq_legacy_remove(q, m);
}

const bench_contender bench_legacy = {
    .name = "legacy",
    .design =
        "mutex + sorted singly linked list, tail fast path, blocking wait (Android's)",
    .caps = BENCH_CONSUMES | BENCH_REMOVE_ANY,
    .create = create,
    .destroy = destroy,
    .post_at = post_at,
    .try_next = try_next,
    .next_until = next_until,
    .cancel = cancel,
    .remove = remove_matching,
};
