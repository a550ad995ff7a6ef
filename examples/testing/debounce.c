/* SPDX-License-Identifier: Apache-2.0 */
#include "debounce.h"

#include <string.h>

static const char SEARCH_BOX; /* the messages' target */

static void run_search(dq_msg *m)
{
    search_box *b = m->obj;
    b->pending_search = 0;
    b->searches++;
    strcpy(b->last_query, b->text);
}

static void check_session(dq_msg *m)
{
    search_box *b = m->obj;
    if (dq_queue_now(b->q) - b->last_input >= SESSION_IDLE_NS) {
        b->expired = 1;
        b->text[0] = '\0';
        (void)dq_cancel(b->q, b->session_check); /* from inside its delivery */
    }
}

int search_box_start(search_box *b, dq_queue *q)
{
    memset(b, 0, sizeof(*b));
    b->q = q;
    b->last_input = dq_queue_now(q);
    dq_msg m = { .target = &SEARCH_BOX, .obj = b, .callback = check_session };
    return dq_post_repeating(q, &m, b->last_input + CHECK_NS, CHECK_NS, DQ_FIXED_RATE,
                             &b->session_check);
}

int search_box_type(search_box *b, char c)
{
    size_t len = strlen(b->text);
    if (len + 1 < sizeof(b->text)) {
        b->text[len] = c;
        b->text[len + 1] = '\0';
    }
    b->last_input = dq_queue_now(b->q);
    if (b->pending_search != 0)
        (void)dq_cancel(b->q, b->pending_search);
    dq_msg m = { .target = &SEARCH_BOX, .obj = b, .callback = run_search };
    return dq_post_delayed(b->q, &m, DEBOUNCE_NS, &b->pending_search);
}
