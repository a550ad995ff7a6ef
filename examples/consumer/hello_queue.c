/* Posts three messages out of order and delivers them in `when` order. */
#include <deliqueue/deliqueue.h>
#include <stdio.h>

static const char handler[] = "hello";

int main(void)
{
    dq_queue *q = dq_create(NULL);
    if (q == NULL) {
        perror("dq_create");
        return 1;
    }
    int64_t now = dq_now();
    for (int i = 3; i >= 1; i--) {
        dq_msg m = { .target = handler, .what = i };
        int rc = dq_post_at(q, &m, now + i * 1000000, NULL); /* i ms from now */
        if (rc != 0) {
            fprintf(stderr, "dq_post_at: %d\n", rc);
            return 1;
        }
    }
    for (int i = 0; i < 3; i++) {
        dq_msg out;
        int rc = dq_next(q, &out);
        if (rc != 0) {
            fprintf(stderr, "dq_next: %d\n", rc);
            return 1;
        }
        printf("delivered what=%d\n", (int)out.what);
    }
    printf("atomics: %s\n", dq_atomics());
    dq_quit(q);
    dq_unref(q);
    return 0;
}
