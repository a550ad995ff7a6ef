/* SPDX-License-Identifier: Apache-2.0 */
/* Tracing: each event's marker line exactly as Perfetto and trace-cmd
   read it, in the order the queue writes them, on the manual clock, with
   the markers sent to a memory file instead of tracefs
   (dq_test_trace_to_fd); tracing off writes nothing; a sink that cannot
   be written is reported once on stderr and never fails a post. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

#include "../src/trace.h" /* dq_trace_format, the internal formatter */

enum {
    K_POST = DQ_TRACE_POST,
    K_REFUSED = DQ_TRACE_POST_REFUSED,
    K_BARRIER = DQ_TRACE_BARRIER,
    K_DELIVER = DQ_TRACE_DELIVER,
    K_DISPATCH = DQ_TRACE_DISPATCH,
    K_SLEEP = DQ_TRACE_SLEEP,
    K_END = DQ_TRACE_END,
    K_BACKLOG = DQ_TRACE_BACKLOG,
    K_CANCEL = DQ_TRACE_CANCEL,
    K_REMOVE = DQ_TRACE_REMOVE
};
typedef dq_trace_event event;

static int sink = -1;
static int pid;

static void trace_setup(void)
{
    fixture_setup();
    sink = memfd_create("markers", 0);
    cr_assert_geq(sink, 0);
    /* appends, as trace_marker does: each event one whole line */
    cr_assert_eq(fcntl(sink, F_SETFL, O_APPEND), 0);
    cr_assert_eq(dq_test_trace_to_fd(sink), 0);
    cr_assert_eq(dq_trace_enable(true), 0);
    cr_assert(dq_trace_enabled());
    cr_assert_eq(dq_set_name(q, "ui"), 0);
    pid = (int)getpid();
}

static void trace_teardown(void)
{
    fixture_teardown();
    (void)dq_trace_enable(false);
    close(sink);
}

TestSuite(trace, .init = trace_setup, .fini = trace_teardown);

/* Everything written so far, NUL-terminated (static buffer). */
static const char *written(void)
{
    static char buf[1 << 16];
    ssize_t n = pread(sink, buf, sizeof(buf) - 1, 0);
    cr_assert_geq(n, 0);
    buf[n] = '\0';
    return buf;
}

/* The lines we expect, each "%d"-formatted with the pid, newline-ended. */
static void expect_lines(const char *const *lines, size_t n)
{
    char want[4096] = "";
    for (size_t i = 0; i < n; i++) {
        char line[160];
        snprintf(line, sizeof(line), lines[i], pid);
        strcat(want, line);
        strcat(want, "\n");
    }
    cr_assert_str_eq(written(), want);
}

Test(trace, format_of_every_event)
{
    struct {
        event e;
        const char *line;
    } cases[] = {
        { { K_POST, 7, "ui", 3, 1000, 1000 }, "I|7|dq:ui post what=3 due=now\n" },
        { { K_POST, 7, "ui", -1, 5000, 1000 }, "I|7|dq:ui post what=-1 due=+4000ns\n" },
        { { K_POST, 7, "ui", 2, 0, 1000 }, "I|7|dq:ui post what=2 due=front\n" },
        { { K_POST, 7, "ui", 2, INT64_MAX, 1 }, "I|7|dq:ui post what=2 due=none\n" },
        { { K_REFUSED, 7, "ui", 0, -108, 0 }, "I|7|dq:ui post refused err=-108\n" },
        { { K_BARRIER, 7, "ui", 0, 1000, 1000 }, "I|7|dq:ui barrier due=now\n" },
        { { K_DELIVER, 7, "ui", 9, 0, 0 }, "I|7|dq:ui deliver what=9\n" },
        { { K_DISPATCH, 7, "ui", 9, 0, 0 }, "B|7|dq:ui dispatch what=9\n" },
        { { K_SLEEP, 7, "ui", 0, 3000, 1000 }, "B|7|dq:ui sleep until=+2000ns\n" },
        { { K_SLEEP, 7, "ui", 0, INT64_MAX, 1000 }, "B|7|dq:ui sleep until=none\n" },
        { { K_END, 7, NULL, 0, 0, 0 }, "E|7\n" },
        { { K_BACKLOG, 7, "ui", 0, 42, 0 }, "C|7|dq:ui backlog|42\n" },
        { { K_CANCEL, 7, "ui", 4, 0, 0 }, "I|7|dq:ui cancel what=4\n" },
        { { K_REMOVE, 7, "ui", 5, 0, 0 }, "I|7|dq:ui remove what=5\n" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[128];
        size_t n = dq_trace_format(buf, sizeof(buf), &cases[i].e);
        cr_assert_str_eq(buf, cases[i].line, "case %zu", i);
        cr_assert_eq(n, strlen(cases[i].line), "case %zu", i);
    }
}

Test(trace, format_cuts_a_line_that_does_not_fit)
{
    event e = { K_POST,     123456,        "a-rather-long-queue-name-here",
                2147483647, INT64_MAX - 1, 0 };
    char full[128], cut[24];
    size_t n = dq_trace_format(full, sizeof(full), &e);
    cr_assert_lt(n, sizeof(full));
    cr_assert_eq(full[n - 1], '\n');
    size_t m = dq_trace_format(cut, sizeof(cut), &e);
    cr_assert_eq(m, sizeof(cut) - 1);
    cr_assert_eq(strlen(cut), m);
    cr_assert_eq(strncmp(cut, full, m), 0);
    char one[1] = { 'x' };
    cr_assert_eq(dq_trace_format(one, 1, &e), 0);
    cr_assert_eq(one[0], '\0');
}

Test(trace, posts_cancels_removes_and_deliveries_in_order)
{
    dq_token tok;
    dq_msg m = msg_what(&target_a, 4);
    cr_assert_eq(post_at(1, 1000000), 0);
    cr_assert_eq(post_at(2, 1004000), 0);
    m.what = 3;
    cr_assert_eq(dq_post_at_front(q, &m, NULL), 0);
    m.what = 4;
    cr_assert_eq(dq_post_at(q, &m, 1000000 + 1000000000, &tok), 0);
    cr_assert_eq(dq_cancel(q, tok), 0);
    dq_msg b = msg_what(&target_b, 5);
    cr_assert_eq(dq_post_at(q, &b, 1002000, NULL), 0);
    dq_match match = { .target = &target_b };
    cr_assert_eq(dq_remove(q, &match), 1);
    cr_assert_eq(next_what(), 3);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(next_what(), NOTHING_DUE);
    static const char *const lines[] = {
        "I|%d|dq:ui post what=1 due=now",
        "I|%d|dq:ui post what=2 due=+4000ns",
        "I|%d|dq:ui post what=3 due=front",
        "I|%d|dq:ui post what=4 due=+1000000000ns",
        "I|%d|dq:ui cancel what=4",
        "I|%d|dq:ui post what=5 due=+2000ns",
        "I|%d|dq:ui remove what=5",
        /* the first step sweeps 1, 2 and 3 (the cancelled and removed
           never reach the heaps), then delivers 3 */
        "C|%d|dq:ui backlog|3",
        "C|%d|dq:ui backlog|2",
        "I|%d|dq:ui deliver what=3",
        "C|%d|dq:ui backlog|1",
        "I|%d|dq:ui deliver what=1",
    };
    expect_lines(lines, sizeof(lines) / sizeof(lines[0]));
    cr_assert_eq(dq_pending(q), 1);
}

Test(trace, barriers_are_not_backlog)
{
    dq_token barrier;
    cr_assert_eq(dq_post_sync_barrier(q, &barrier), 0);
    dq_msg a = msg_what(&target_a, 9);
    a.flags = DQ_ASYNC;
    cr_assert_eq(dq_post_at(q, &a, 1000000, NULL), 0);
    cr_assert_eq(next_what(), 9);
    cr_assert_eq(dq_remove_sync_barrier(q, barrier), 0);
    cr_assert_eq(next_what(), NOTHING_DUE);
    static const char *const lines[] = {
        "I|%d|dq:ui barrier due=now", "I|%d|dq:ui post what=9 due=now",
        "C|%d|dq:ui backlog|1",       "C|%d|dq:ui backlog|0",
        "I|%d|dq:ui deliver what=9",
    };
    expect_lines(lines, sizeof(lines) / sizeof(lines[0]));
}

static void quit_from_callback(dq_msg *m)
{
    (void)m;
    dq_quit(q);
}

Test(trace, dispatch_is_a_slice_and_a_refused_post_says_so)
{
    dq_msg m = msg_what(&target_a, 7);
    m.callback = quit_from_callback;
    cr_assert_eq(dq_post_at(q, &m, 1000000, NULL), 0);
    cr_assert_eq(dq_loop(q), 0);
    cr_assert_eq(post_at(8, 1000000), -ESHUTDOWN);
    static const char *const lines[] = {
        "I|%d|dq:ui post what=7 due=now",
        "C|%d|dq:ui backlog|1",
        "C|%d|dq:ui backlog|0",
        "B|%d|dq:ui dispatch what=7",
        "E|%d",
        "I|%d|dq:ui post what=8 due=now",
        "I|%d|dq:ui post refused err=-108",
    };
    expect_lines(lines, sizeof(lines) / sizeof(lines[0]));
}

static void *advance_later(void *arg)
{
    (void)arg;
    struct timespec ts = { 0, 20 * 1000000 };
    nanosleep(&ts, NULL);
    test_advance(5000);
    return NULL;
}

/* The consumer sleeps until the next due time, a slice until=+4000ns
   while the manual clock stands; the advance that makes the message due
   wakes it (the event reads the clock again, so a slice begun as the
   clock moves may say less). */
Test(trace, sleeps_are_slices)
{
    cr_assert_eq(post_at(2, 1004000), 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, advance_later, NULL), 0);
    dq_msg out;
    cr_assert_eq(dq_next_until(q, &out, 1010000), 0);
    cr_assert_eq(out.what, 2);
    pthread_join(t, NULL);
    char want_sleep[64], any_sleep[64], want_end[16];
    snprintf(want_sleep, sizeof(want_sleep), "B|%d|dq:ui sleep until=+4000ns", pid);
    snprintf(any_sleep, sizeof(any_sleep), "B|%d|dq:ui sleep until=", pid);
    snprintf(want_end, sizeof(want_end), "E|%d", pid);
    char *copy = strdup(written());
    int sleeps = 0, depth = 0, line_no = 0;
    const char *last = NULL;
    for (char *save, *l = strtok_r(copy, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save)) {
        line_no++;
        if (line_no <= 2)
            continue; /* the post and the first backlog */
        if (strncmp(l, any_sleep, strlen(any_sleep)) == 0) {
            cr_assert_eq(depth, 0, "a sleep inside a sleep");
            depth = 1;
            sleeps += strcmp(l, want_sleep) == 0;
        } else if (strcmp(l, want_end) == 0) {
            cr_assert_eq(depth, 1, "an end without a sleep");
            depth = 0;
        } else {
            cr_assert_eq(depth, 0, "'%s' inside a sleep", l);
        }
        last = l;
    }
    cr_assert_geq(sleeps, 1);
    cr_assert_eq(depth, 0);
    char want_last[64];
    snprintf(want_last, sizeof(want_last), "I|%d|dq:ui deliver what=2", pid);
    cr_assert_str_eq(last, want_last);
    free(copy);
}

Test(trace, off_writes_nothing)
{
    cr_assert_eq(dq_trace_enable(false), 0);
    cr_assert_not(dq_trace_enabled());
    cr_assert_eq(post_at(1, 1000000), 0);
    cr_assert_eq(next_what(), 1);
    cr_assert_str_eq(written(), "");
}

Test(trace, names)
{
    cr_assert_eq(dq_set_name(NULL, "x"), -EINVAL);
    cr_assert_eq(dq_set_name(q, NULL), -EINVAL);
    cr_assert_eq(dq_set_name(q, ""), -EINVAL);
    cr_assert_eq(dq_set_name(q, "a|b"), -EINVAL);
    cr_assert_eq(dq_set_name(q, "line\nbreak"), -EINVAL);
    char longest[DQ_NAME_MAX];
    memset(longest, 'n', sizeof(longest) - 1);
    longest[sizeof(longest) - 1] = '\0';
    cr_assert_eq(dq_set_name(q, longest), 0);
    char too_long[DQ_NAME_MAX + 1];
    memset(too_long, 'n', sizeof(too_long) - 1);
    too_long[sizeof(too_long) - 1] = '\0';
    cr_assert_eq(dq_set_name(q, too_long), -EINVAL);
    cr_assert_eq(dq_set_name(q, "renamed"), 0);
    cr_assert_eq(post_at(1, 1000000), 0);
    /* an unnamed queue shows its address */
    dq_queue *other = dq_create(NULL);
    cr_assert_not_null(other);
    dq_msg m = msg_what(&target_a, 2);
    cr_assert_eq(dq_post_at(other, &m, 1000000, NULL), 0);
    dq_unref(other);
    char want[256];
    snprintf(want, sizeof(want),
             "I|%d|dq:renamed post what=1 due=now\nI|%d|dq:%lx post what=2 due=now\n",
             pid, pid, (unsigned long)(uintptr_t)other);
    cr_assert_str_eq(written(), want);
}

Test(trace, an_unwritable_sink_is_reported_once_and_posts_succeed)
{
    int readonly = open("/dev/null", O_RDONLY);
    cr_assert_geq(readonly, 0);
    cr_assert_eq(dq_test_trace_to_fd(readonly), 0);
    int err_sink = memfd_create("stderr", 0), saved = dup(2);
    cr_assert_geq(err_sink, 0);
    dup2(err_sink, 2);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(post_at(i, 1000000), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(next_what(), i);
    dup2(saved, 2);
    close(saved);
    char buf[1024];
    ssize_t n = pread(err_sink, buf, sizeof(buf) - 1, 0);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    close(err_sink);
    close(readonly);
    cr_assert_not_null(
        strstr(buf, "deliqueue: tracing: writing to (test descriptor) failed"));
    cr_assert_eq(strchr(buf, '\n'), buf + n - 1, "more than one line: %s", buf);
}

/* Two threads whose posts fail to write at once: one report between them,
   decided by report_once's exchange.  Two threads run the rounds in
   lockstep (spin_start on one rising count); the first re-arms the report
   (dq_test_trace_to_fd) before each round, and one or the other starts
   late by a swept offset.  Bounded by rounds and by time (QEMU,
   sanitizers). */
#define FAIL_ROUNDS 200000
#define FAIL_NS     3000000000LL
static _Atomic int fail_phase, fail_rounds_run;
static _Atomic bool fail_stop;
static int fail_sink;

static void *failing_poster(void *arg)
{
    bool second = arg != NULL;
    int64_t end = real_ns() + FAIL_NS;
    for (int r = 0;; r++) {
        if (!second) {
            atomic_store(&fail_stop, r == FAIL_ROUNDS || real_ns() > end);
            cr_assert_eq(dq_test_trace_to_fd(fail_sink), 0);
        }
        spin_start(&fail_phase, 4 * r + 2);
        if (atomic_load(&fail_stop))
            break;
        /* either thread may be the later one: sweep both ways */
        int offset = r % 128 - 64;
        if (second ? offset > 0 : offset < 0)
            spin_for((unsigned)abs(offset) * 4);
        if (!second)
            atomic_store(&fail_rounds_run, r + 1);
        dq_msg m = msg_what(&target_a, 1);
        cr_assert_eq(dq_post_at(q, &m, 1000000, NULL), 0);
        spin_start(&fail_phase, 4 * r + 4);
    }
    return NULL;
}

Test(trace, unwritable_sink_failing_on_two_threads_is_reported_once)
{
    fail_sink = open("/dev/null", O_RDONLY);
    cr_assert_geq(fail_sink, 0);
    int err_sink = memfd_create("stderr", 0), saved = dup(2);
    cr_assert_geq(err_sink, 0);
    dup2(err_sink, 2);
    /* one report alone, for its length */
    cr_assert_eq(dq_test_trace_to_fd(fail_sink), 0);
    cr_assert_eq(post_at(1, 1000000), 0);
    off_t one = lseek(2, 0, SEEK_CUR);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, failing_poster, i ? &t[0] : NULL), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    off_t all = lseek(2, 0, SEEK_CUR);
    dup2(saved, 2);
    close(saved);
    close(err_sink);
    close(fail_sink);
    int rounds = atomic_load(&fail_rounds_run);
    cr_assert_gt(one, 0);
    cr_assert_gt(rounds, 0);
    cr_assert_eq(all, one * (rounds + 1),
                 "%lld reports in %d rounds of two failing posts",
                 (long long)(all / one - 1), rounds);
}

/* A sink installed while another thread posts: the poster that meets the
   new descriptor writes whole lines to it.  Under TSan this checks that
   meeting it orders the poster after the sink's creation (the descriptor
   is published release, read acquire). */
static _Atomic bool late_stop;
static _Atomic int late_posts;

static void *late_poster(void *arg)
{
    (void)arg;
    while (!atomic_load(&late_stop)) {
        dq_msg m = msg_what(&target_a, 7);
        cr_assert_eq(dq_post_at(q, &m, 1000000, NULL), 0);
        atomic_fetch_add(&late_posts, 1);
    }
    return NULL;
}

Test(trace, a_sink_installed_while_another_thread_posts)
{
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, late_poster, NULL), 0);
    while (atomic_load(&late_posts) < 100)
        sched_yield();
    /* open(), which TSan sees create the descriptor (memfd_create it
       does not) */
    const char *dir = getenv("TEST_TMPDIR");
    int late = open(dir != NULL ? dir : ".", O_TMPFILE | O_RDWR | O_APPEND, 0600);
    cr_assert_geq(late, 0);
    cr_assert_eq(dq_test_trace_to_fd(late), 0);
    int64_t end = real_ns() + 10000000000LL;
    struct stat st;
    do {
        cr_assert_eq(fstat(late, &st), 0);
        cr_assert_lt(real_ns(), end, "no event reached the new sink in 10 s");
        sched_yield();
    } while (st.st_size < 4096);
    atomic_store(&late_stop, true);
    pthread_join(t, NULL);
    static char buf[1 << 20];
    ssize_t n = pread(late, buf, sizeof(buf) - 1, 0);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    close(late);
    char line[64];
    snprintf(line, sizeof(line), "I|%d|dq:ui post what=7 due=now", pid);
    cr_assert_eq(buf[n - 1], '\n');
    for (char *save, *l = strtok_r(buf, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save))
        cr_assert_str_eq(l, line);
}

/* Renames from two threads at once: every name is kept until the queue
   goes (a post may still be formatting it), so none may be dropped from
   the list; under LSan (the asan config) a dropped one is a leak. */
#define RENAMES 200000
static _Atomic int rename_arrived;

static void *racing_renamer(void *arg)
{
    spin_start(&rename_arrived, 2);
    for (int i = 0; i < RENAMES; i++)
        cr_assert_eq(dq_set_name(q, arg != NULL ? "left" : "right"), 0);
    return NULL;
}

Test(trace, renames_from_two_threads_keep_every_name)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, racing_renamer, i ? &t[0] : NULL), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(post_at(1, 1000000), 0);
    const char *w = written();
    cr_assert(strstr(w, "dq:left post") != NULL || strstr(w, "dq:right post") != NULL,
              "the post is under neither name: %s", w);
}

/* Producers, the consumer and renames at once (what TSan checks in its
   config): every post and delivery is one whole line, under one of the
   names the queue had. */
#define RACE_PRODUCERS 2
#define RACE_POSTS     2000

static void *race_producer(void *arg)
{
    int p = (int)(intptr_t)arg;
    for (int i = 0; i < RACE_POSTS; i++) {
        dq_msg m = msg_what(&target_a, p * RACE_POSTS + i);
        cr_assert_eq(dq_post_at(q, &m, 1000000, NULL), 0);
    }
    return NULL;
}

static void *race_renamer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(dq_set_name(q, i % 2 ? "ui" : "renamed"), 0);
    return NULL;
}

Test(trace, posts_deliveries_and_renames_race)
{
    /* real time, so that a lost message ends the wait below (-ETIMEDOUT) */
    fixture_real_time();
    cr_assert_eq(dq_set_name(q, "ui"), 0);
    pthread_t producers[RACE_PRODUCERS], renamer;
    for (int p = 0; p < RACE_PRODUCERS; p++)
        cr_assert_eq(
            pthread_create(&producers[p], NULL, race_producer, (void *)(intptr_t)p), 0);
    cr_assert_eq(pthread_create(&renamer, NULL, race_renamer, NULL), 0);
    for (int got = 0; got < RACE_PRODUCERS * RACE_POSTS;) {
        dq_msg out;
        int err = dq_next_until(q, &out, dq_now() + 5000000000LL);
        cr_assert_eq(err, 0);
        got++;
    }
    for (int p = 0; p < RACE_PRODUCERS; p++)
        pthread_join(producers[p], NULL);
    pthread_join(renamer, NULL);
    static char buf[1 << 20];
    ssize_t n = pread(sink, buf, sizeof(buf) - 1, 0);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    cr_assert_eq(buf[n - 1], '\n');
    int posts = 0, delivers = 0;
    char prefix[2][32];
    snprintf(prefix[0], sizeof(prefix[0]), "|%d|dq:ui ", pid);
    snprintf(prefix[1], sizeof(prefix[1]), "|%d|dq:renamed ", pid);
    for (char *save, *l = strtok_r(buf, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save)) {
        cr_assert(strchr("IBEC", l[0]) && l[1] == '|', "malformed line '%s'", l);
        if (l[0] == 'E')
            continue;
        const char *rest = NULL;
        for (int k = 0; k < 2 && rest == NULL; k++)
            if (strncmp(l + 1, prefix[k], strlen(prefix[k])) == 0)
                rest = l + 1 + strlen(prefix[k]);
        cr_assert_not_null(rest, "line '%s' under no name of the queue", l);
        posts += strncmp(rest, "post what=", 10) == 0;
        delivers += strncmp(rest, "deliver what=", 13) == 0;
    }
    cr_assert_eq(posts, RACE_PRODUCERS * RACE_POSTS);
    cr_assert_eq(delivers, RACE_PRODUCERS * RACE_POSTS);
}
