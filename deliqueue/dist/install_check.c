/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A program built outside Bazel against an installed deliqueue (plain gcc
 * and pkg-config): posts two messages out of order and receives them in
 * time order.  Exits 0 only if the queue behaves.
 */
#include <deliqueue/deliqueue.h>
#include <stdio.h>

static const char handler[] = "install_check";

int main(void)
{
    dq_queue *q = dq_create(NULL);
    if (!q) {
        fprintf(stderr, "dq_create failed\n");
        return 1;
    }
    int64_t now = dq_now();
    dq_msg late = { .target = handler, .what = 2 };
    dq_msg early = { .target = handler, .what = 1 };
    if (dq_post_at(q, &late, now + 2000000, NULL) != 0 ||
        dq_post_at(q, &early, now + 1000000, NULL) != 0) {
        fprintf(stderr, "dq_post_at failed\n");
        return 1;
    }
    dq_msg got[2];
    for (int i = 0; i < 2; i++) {
        int rc = dq_next(q, &got[i]);
        if (rc != 0) {
            fprintf(stderr, "dq_next: %d\n", rc);
            return 1;
        }
    }
    dq_unref(q);
    if (got[0].what != 1 || got[1].what != 2) {
        fprintf(stderr, "out of order: %d then %d\n", (int)got[0].what,
                (int)got[1].what);
        return 1;
    }
    printf("deliqueue %s: 2 messages in time order\n", dq_atomics());
    return 0;
}
