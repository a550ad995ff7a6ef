/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How to unit-test code that runs on a looper: give its queue a manual
 * clock, act on the looper's thread (the test's own), and step time with
 * dq_fast_forward, which runs every message as it falls due.  Thirty
 * minutes of session pass in a few milliseconds, and nothing depends on
 * how fast the machine is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debounce.h"

#define MS  INT64_C(1000000)
#define MIN (INT64_C(60) * 1000 * MS)

static int failures;
#define EXPECT(cond)                                                            \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                         \
        }                                                                       \
    } while (0)

int main(void)
{
    dq_clock *clock = dq_clock_create_manual(0);
    dq_options opts = { .clock = clock };
    dq_queue *q = dq_create(&opts);
    if (clock == NULL || q == NULL)
        return 1;
    search_box box;
    EXPECT(search_box_start(&box, q) == 0);

    /* typing: each key restarts the debounce, so no search yet */
    const char *word = "looper";
    for (const char *c = word; *c != '\0'; c++) {
        EXPECT(search_box_type(&box, *c) == 0);
        EXPECT(dq_fast_forward(q, 100 * MS) == 0);
    }
    EXPECT(box.searches == 0);
    EXPECT(dq_peek_when(q) == dq_queue_now(q) + 200 * MS); /* the pending search */

    /* a pause: exactly one search, for the whole word, at 300 ms */
    EXPECT(dq_fast_forward(q, 199 * MS) == 0);
    EXPECT(box.searches == 0);
    EXPECT(dq_fast_forward(q, 1 * MS) == 1);
    EXPECT(box.searches == 1 && strcmp(box.last_query, word) == 0);

    /* the session: checks every 5 s do nothing for 29 minutes ... */
    int64_t since_input = dq_queue_now(q) - box.last_input;
    EXPECT(dq_fast_forward(q, 29 * MIN - since_input) > 0);
    EXPECT(!box.expired);
    /* ... the one at 30:00 of the clock sees 29:59.5 of silence (the last
       key was at 0:00.5) ... */
    EXPECT(dq_fast_forward(q, 1 * MIN) >= 1);
    EXPECT(!box.expired);
    /* ... and the next one expires the session and stops the checks */
    EXPECT(dq_fast_forward(q, CHECK_NS) == 1);
    EXPECT(box.expired && box.text[0] == '\0');
    EXPECT(dq_peek_when(q) == -ENOENT);
    EXPECT(dq_fast_forward(q, 60 * MIN) == 0);

    /* nothing due right now either */
    EXPECT(dq_run_until_idle(q) == 0);
    EXPECT(dq_pending(q) == 0);

    dq_unref(q);
    dq_clock_destroy(clock);
    if (failures == 0)
        printf("debounce_test: every expectation held\n");
    return failures != 0;
}
