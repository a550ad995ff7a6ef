/* SPDX-License-Identifier: Apache-2.0 */
/* The looper out of heap memory: realloc fails (this binary links with
   --wrap=realloc), the step reports -ENOMEM, and nothing is lost, torn or
   recycled while still reachable. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "test_util.h"

/* While set, every realloc of the library (the heaps' growth) fails. */
static _Atomic int realloc_fails;

void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n)
{
    if (atomic_load(&realloc_fails)) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_realloc(p, n);
}

TestSuite(nomem, .init = fixture_setup, .fini = fixture_teardown, .timeout = 10);

/* Deliver everything due; returns how many, failing on a repeat. */
static size_t drain(bool *seen, size_t nseen)
{
    size_t got = 0;
    dq_msg out;
    for (int guard = 0; guard < 100000; guard++) {
        int err = dq_try_next(q, &out);
        if (err == -EAGAIN)
            return got;
        cr_assert_eq(err, 0, "dq_try_next: %d", err);
        cr_assert(out.what >= 0 && (size_t)out.what < nseen, "what %d", out.what);
        cr_assert(!seen[out.what], "message %d delivered twice", out.what);
        seen[out.what] = true;
        got++;
    }
    cr_assert_fail("the queue never ran dry: its stack has a cycle");
    return got;
}

/* The node a removal unlinks is the topmost one the looper has swept, with
   unswept posts above it; finding its newer neighbour normally takes a
   sweep, which needs heap room.  Without room the unlink must still
   happen (or the node wait): a node recycled while still linked under the
   unswept posts would reappear in the stack as a new post (a cycle, or
   lost messages). */
static dq_token victim;

static void *cancel_victim(void *unused)
{
    (void)unused;
    return (void *)(intptr_t)dq_cancel(q, victim);
}

enum { LATER = 200 };

/* The posts after the removal, from a thread of their own: its empty
   magazine claims the lowest free nodes, among them the cancelled one,
   however many free nodes the test thread's magazine still holds. */
static void *post_later(void *unused)
{
    (void)unused;
    for (int i = 0; i < LATER; i++) {
        dq_msg m = msg_what(&target_b, i);
        if (dq_post_at_front(q, &m, NULL) != 0)
            return (void *)1;
    }
    return NULL;
}

static void unlink_under_unswept_posts(bool from_another_thread)
{
    enum { FILL = 64 }; /* FILL: the heaps' first capacity */
    int64_t t = 2000000;
    dq_token tok[FILL];
    for (int i = 0; i < FILL; i++) {
        dq_msg m = msg_what(&target_a, 1000 + i);
        cr_assert_eq(dq_post_at(q, &m, t + i, &tok[i]), 0);
    }
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN); /* swept: the heap is full */
    /* two unswept posts above them: with the removed node out of the heap
       there is still no room for both */
    for (int i = 0; i < 2; i++) {
        dq_msg m = msg_what(&target_a, LATER + i);
        cr_assert_eq(dq_post_at(q, &m, t + FILL + i, NULL), 0);
    }
    /* the last post of the fill is the topmost swept node; a cancel on
       the consumer's thread takes it out at once, one on another thread
       through the removal list at the consumer's next step */
    atomic_store(&realloc_fails, 1);
    victim = tok[FILL - 1];
    if (from_another_thread) {
        pthread_t t;
        void *rc;
        cr_assert_eq(pthread_create(&t, NULL, cancel_victim, NULL), 0);
        cr_assert_eq(pthread_join(t, &rc), 0);
        cr_assert_eq((intptr_t)rc, 0);
    } else {
        cr_assert_eq(dq_cancel(q, victim), 0);
    }
    cr_assert_eq(dq_try_next(q, &out), -ENOMEM);
    cr_assert_eq(dq_try_next(q, &out), -ENOMEM, "still no room for the sweep");
    atomic_store(&realloc_fails, 0);

    /* retire the rest of the fill, so the cancelled node's pool batch fills
       up and is handed back, and the posts below take it again */
    for (int i = 0; i < FILL - 1; i++)
        cr_assert_eq(dq_cancel(q, tok[i]), 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    pthread_t poster;
    void *rc;
    cr_assert_eq(pthread_create(&poster, NULL, post_later, NULL), 0);
    cr_assert_eq(pthread_join(poster, &rc), 0);
    cr_assert_null(rc, "a later post failed");
    dq_test_clock_set(t + FILL + 2);
    bool seen[LATER + 2] = { false };
    cr_assert_eq(drain(seen, LATER + 2), LATER + 2,
                 "every post delivered once, the one above the removal too");
    cr_assert_eq(atomic_load(&rec.discards), FILL, "every cancel reported once");
}

Test(nomem, unlink_under_unswept_posts_without_heap_room)
{
    unlink_under_unswept_posts(false);
}

Test(nomem, unlink_under_unswept_posts_without_heap_room_cancelled_elsewhere)
{
    unlink_under_unswept_posts(true);
}

/* A step whose sweep finds no heap room reports it and delivers nothing;
   once memory is back, everything is delivered once. */
Test(nomem, step_without_heap_room_reports_enomem_and_loses_nothing)
{
    enum { FILL = 64 };
    int64_t t = 2000000;
    for (int i = 0; i < FILL; i++) {
        dq_msg m = msg_what(&target_a, i);
        /* the last one is due first */
        cr_assert_eq(dq_post_at(q, &m, i == FILL - 1 ? t : t + 10 + i, NULL), 0);
    }
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    dq_msg above = msg_what(&target_a, FILL);
    cr_assert_eq(dq_post_at(q, &above, t + 10 + FILL, NULL), 0);

    dq_test_clock_set(t);
    atomic_store(&realloc_fails, 1);
    /* the sweep fails first, and the step reports it, delivering nothing */
    cr_assert_eq(dq_try_next(q, &out), -ENOMEM);
    atomic_store(&realloc_fails, 0);

    bool seen[FILL + 1 + LATER] = { false };
    size_t got = drain(seen, FILL + 1);
    cr_assert_eq(got, 1);
    cr_assert(seen[FILL - 1]);
    for (int i = 0; i < LATER; i++) {
        dq_msg m = msg_what(&target_b, FILL + 1 + i);
        cr_assert_eq(dq_post_at_front(q, &m, NULL), 0);
    }
    dq_test_clock_set(t + 10 + FILL + 1);
    cr_assert_eq(drain(seen, FILL + 1 + LATER), FILL + LATER);
    cr_assert_eq(atomic_load(&rec.discards), 0);
}
