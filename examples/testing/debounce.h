/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A user's component that lives on a looper: a search box that debounces
 * keystrokes (the search runs once the user has paused for
 * DEBOUNCE_NS) and a session that expires after SESSION_IDLE_NS without
 * input, checked by a repeating post every CHECK_NS.  It knows nothing of
 * tests: it reads time only through the queue (dq_queue_now) and waits
 * only through posts, so a test can drive it on a manual clock.
 */
#ifndef EXAMPLES_TESTING_DEBOUNCE_H
#define EXAMPLES_TESTING_DEBOUNCE_H

#include <deliqueue/deliqueue.h>

#define DEBOUNCE_NS     (INT64_C(300) * 1000000)        /* 300 ms */
#define CHECK_NS        (INT64_C(5) * 1000000000)       /* 5 s */
#define SESSION_IDLE_NS (INT64_C(30) * 60 * 1000000000) /* 30 min */

typedef struct search_box {
    dq_queue *q;
    char text[64];
    dq_token pending_search; /* 0: none */
    dq_token session_check;
    int64_t last_input;
    /* what it did, for whoever shows it */
    int searches;
    char last_query[64];
    int expired;
} search_box;

/* Start on q (the looper's thread runs it): arms the session check. */
int search_box_start(search_box *b, dq_queue *q);
/* A keystroke: appends c, restarts the debounce.  Looper thread. */
int search_box_type(search_box *b, char c);

#endif
