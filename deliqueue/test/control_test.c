/* SPDX-License-Identifier: Apache-2.0 */
/* Manual clocks, the dispatch observer, dq_dump and the consumer's test
   control (dq_peek_when, dq_is_blocked_on_barrier, dq_run_until_idle,
   dq_fast_forward): each call's semantics and each error path. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <deliqueue/deliqueue.h>

#include "leak_check.h"

#define MS    INT64_C(1000000)
#define SEC   (1000 * MS)
#define START (INT64_C(1000) * SEC)

static dq_clock *clk;
static dq_queue *q;
static int target;

typedef struct seen {
    int32_t what[64];
    int64_t clock_at[64]; /* the queue's time during each dispatch */
    int count;
} seen;
static seen got;

static void record(dq_msg *m)
{
    if (got.count < 64) {
        got.what[got.count] = m->what;
        got.clock_at[got.count] = dq_queue_now(q);
    }
    got.count++;
}

static void setup(void)
{
    memset(&got, 0, sizeof(got));
    clk = dq_clock_create_manual(START);
    cr_assert_not_null(clk);
    dq_options o = { .clock = clk, .idle_spin_ns = -1 };
    q = dq_create(&o);
    cr_assert_not_null(q);
}

static void teardown(void)
{
    dq_unref(q);
    dq_clock_destroy(clk);
    q = NULL;
    clk = NULL;
    leak_check();
}

static dq_msg msg(int32_t what)
{
    dq_msg m = { .target = &target, .what = what, .callback = record };
    return m;
}

static int post_in(int32_t what, int64_t delay)
{
    dq_msg m = msg(what);
    return dq_post_delayed(q, &m, delay, NULL);
}

static int64_t real_ns(void)
{
    return dq_now();
}

static void sleep_ms(int ms)
{
    struct timespec ts = { 0, ms * 1000000L };
    nanosleep(&ts, NULL);
}

/* Run fn(arg) on another thread and wait for it: for the -EPERM paths. */
typedef struct other_call {
    int64_t (*fn)(void);
    int64_t result;
} other_call;

static void *other_main(void *p)
{
    other_call *c = p;
    c->result = c->fn();
    return NULL;
}

static int64_t on_other_thread(int64_t (*fn)(void))
{
    other_call c = { fn, 0 };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, other_main, &c), 0);
    pthread_join(t, NULL);
    return c.result;
}

TestSuite(clock, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(observer, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(dump, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(control, .init = setup, .fini = teardown, .timeout = 60);

/* ---- the manual clock ---------------------------------------------------- */

Test(clock, errors)
{
    errno = 0;
    cr_assert_null(dq_clock_create_manual(-1));
    cr_assert_eq(errno, EINVAL);
    cr_assert_eq(dq_clock_advance(NULL, 1), -EINVAL);
    cr_assert_eq(dq_clock_advance(clk, -1), -EINVAL);
    cr_assert_eq(dq_clock_now(clk), START, "a negative advance changes nothing");
    cr_assert_eq(dq_queue_now(NULL), -EINVAL);
    dq_clock_destroy(NULL);
}

Test(clock, reads_and_advances)
{
    int64_t t0 = dq_now();
    int64_t c = dq_clock_now(NULL);
    cr_assert(c >= t0 && c <= dq_now(), "NULL reads CLOCK_MONOTONIC");
    cr_assert_eq(dq_clock_now(clk), START);
    cr_assert_eq(dq_queue_now(q), START);
    cr_assert_eq(dq_clock_advance(clk, 0), 0);
    cr_assert_eq(dq_clock_advance(clk, 250), 0);
    cr_assert_eq(dq_queue_now(q), START + 250);
    cr_assert_eq(dq_clock_advance(clk, INT64_MAX), 0);
    cr_assert_eq(dq_clock_now(clk), INT64_MAX, "saturates");
    dq_queue *plain = dq_create(NULL);
    t0 = dq_now();
    int64_t p = dq_queue_now(plain);
    cr_assert(p >= t0 && p <= dq_now());
    dq_unref(plain);
}

Test(clock, posts_and_deadlines_are_on_the_queue_clock)
{
    cr_assert_eq(post_in(1, 10 * SEC), 0);
    cr_assert_eq(dq_peek_when(q), START + 10 * SEC);
    dq_msg out;
    /* real time passes; the queue's does not */
    sleep_ms(20);
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    cr_assert_eq(dq_next_until(q, &out, START), -ETIMEDOUT,
                 "a deadline already reached");
    cr_assert_eq(dq_clock_advance(clk, 10 * SEC - 1), 0);
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    cr_assert_eq(dq_clock_advance(clk, 1), 0);
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(out.what, 1);
    cr_assert_eq(out.when, START + 10 * SEC);
}

typedef struct sleeper {
    dq_queue *q;
    int64_t deadline; /* INT64_MAX: dq_next */
    _Atomic int result;
    _Atomic int done;
    dq_msg out;
} sleeper;

static void *sleeper_main(void *p)
{
    sleeper *s = p;
    int r = s->deadline == INT64_MAX ? dq_next(s->q, &s->out)
                                     : dq_next_until(s->q, &s->out, s->deadline);
    atomic_store(&s->result, r);
    atomic_store(&s->done, 1);
    return NULL;
}

static void await_done(sleeper *s)
{
    int64_t end = real_ns() + 5 * SEC;
    while (!atomic_load(&s->done)) {
        cr_assert(real_ns() < end, "the sleeper was not woken");
        sleep_ms(1);
    }
}

Test(clock, an_advance_wakes_a_sleeping_consumer)
{
    cr_assert_eq(post_in(7, 3 * SEC), 0);
    sleeper s = { .q = q, .deadline = INT64_MAX };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, sleeper_main, &s), 0);
    sleep_ms(30);
    cr_assert_eq(atomic_load(&s.done), 0, "nothing due on the queue's clock");
    cr_assert_eq(dq_clock_advance(clk, 3 * SEC), 0);
    await_done(&s);
    pthread_join(t, NULL);
    cr_assert_eq(atomic_load(&s.result), 0);
    cr_assert_eq(s.out.what, 7);
}

Test(clock, an_advance_to_the_deadline_times_out_next_until)
{
    sleeper s = { .q = q, .deadline = START + 2 * SEC };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, sleeper_main, &s), 0);
    sleep_ms(30);
    cr_assert_eq(atomic_load(&s.done), 0);
    cr_assert_eq(dq_clock_advance(clk, SEC), 0);
    sleep_ms(30);
    cr_assert_eq(atomic_load(&s.done), 0, "the deadline is not reached yet");
    cr_assert_eq(dq_clock_advance(clk, SEC), 0);
    await_done(&s);
    pthread_join(t, NULL);
    cr_assert_eq(atomic_load(&s.result), -ETIMEDOUT);
}

Test(clock, one_advance_wakes_every_queue_on_the_clock)
{
    dq_options o = { .clock = clk, .idle_spin_ns = -1 };
    dq_queue *q2 = dq_create(&o);
    cr_assert_not_null(q2);
    dq_msg m = msg(1);
    cr_assert_eq(dq_post_delayed(q, &m, SEC, NULL), 0);
    m.what = 2;
    cr_assert_eq(dq_post_delayed(q2, &m, SEC / 2, NULL), 0);
    sleeper a = { .q = q, .deadline = INT64_MAX },
            b = { .q = q2, .deadline = INT64_MAX };
    pthread_t ta, tb;
    cr_assert_eq(pthread_create(&ta, NULL, sleeper_main, &a), 0);
    cr_assert_eq(pthread_create(&tb, NULL, sleeper_main, &b), 0);
    sleep_ms(30);
    cr_assert_eq(dq_clock_advance(clk, SEC), 0);
    await_done(&a);
    await_done(&b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cr_assert_eq(a.out.what, 1);
    cr_assert_eq(b.out.what, 2);
    dq_unref(q2);
}

Test(clock, a_destroyed_clock_lives_as_long_as_its_queues)
{
    dq_clock *c = dq_clock_create_manual(5);
    dq_options o = { .clock = c };
    dq_queue *q2 = dq_create(&o);
    cr_assert_not_null(q2);
    dq_clock_destroy(c); /* the queue still holds it */
    cr_assert_eq(dq_queue_now(q2), 5);
    dq_msg m = msg(3);
    cr_assert_eq(dq_post(q2, &m, NULL), 0);
    dq_msg out;
    cr_assert_eq(dq_try_next(q2, &out), 0);
    dq_unref(q2); /* frees the clock: leak_check sees nothing left */
}

Test(clock, quit_safely_cuts_on_the_queue_clock)
{
    cr_assert_eq(post_in(1, 0), 0);
    cr_assert_eq(post_in(2, SEC), 0);
    dq_quit_safely(q); /* the cut is START: 2 is due later, dropped */
    cr_assert_eq(dq_run_until_idle(q), 1);
    cr_assert_eq(got.what[0], 1);
    cr_assert_eq(dq_run_until_idle(q), -ESHUTDOWN);
}

/* ---- the observer -------------------------------------------------------- */

typedef struct observed {
    int starts, ends, slow_delivery, slow_dispatch;
    int64_t start[8], end[8], slow_ns[8];
    uint32_t slow_kind[8];
    int32_t what[8];
    int slows;
} observed;
static observed obs;

static void on_start(const dq_msg *m, int64_t start, void *ctx)
{
    cr_assert_eq(ctx, &obs);
    obs.what[obs.starts & 7] = m->what;
    obs.start[obs.starts++ & 7] = start;
}

static void on_end(const dq_msg *m, int64_t start, int64_t end, void *ctx)
{
    (void)m, (void)ctx;
    cr_assert_eq(start, obs.start[obs.ends & 7]);
    obs.end[obs.ends++ & 7] = end;
}

static void on_slow(const dq_msg *m, uint32_t kind, int64_t ns, void *ctx)
{
    (void)m, (void)ctx;
    obs.slow_kind[obs.slows & 7] = kind;
    obs.slow_ns[obs.slows++ & 7] = ns;
}

static void takes_five_ms(dq_msg *m)
{
    record(m);
    dq_clock_advance(clk, 5 * MS);
}

static dq_observer observer_all(int64_t delivery, int64_t dispatch)
{
    dq_observer o = { on_start, on_end, on_slow, delivery, dispatch, &obs };
    return o;
}

Test(observer, errors)
{
    dq_observer o = observer_all(-1, 0);
    cr_assert_eq(dq_set_observer(NULL, NULL), -EINVAL);
    cr_assert_eq(dq_set_observer(q, &o), -EINVAL);
    o = observer_all(0, -1);
    cr_assert_eq(dq_set_observer(q, &o), -EINVAL);
    cr_assert_eq(dq_set_observer(q, NULL), 0, "removing none");
    dq_quit(q);
    cr_assert_eq(dq_run_until_idle(q), -ESHUTDOWN); /* the teardown */
    o = observer_all(0, 0);
    cr_assert_eq(dq_set_observer(q, &o), -ESHUTDOWN);
}

Test(observer, reports_each_dispatch_with_exact_slow_times)
{
    memset(&obs, 0, sizeof(obs));
    dq_observer o = observer_all(10 * MS, 5 * MS - 1);
    cr_assert_eq(dq_set_observer(q, &o), 0);
    memset(&o, 0, sizeof(o)); /* copied: this no longer matters */
    dq_msg m = msg(1);
    m.callback = takes_five_ms;
    cr_assert_eq(dq_post(q, &m, NULL), 0); /* due START */
    cr_assert_eq(dq_clock_advance(clk, 10 * MS), 0);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_MESSAGE);
    cr_assert_eq(obs.starts, 1);
    cr_assert_eq(obs.ends, 1);
    cr_assert_eq(obs.what[0], 1);
    cr_assert_eq(obs.start[0], START + 10 * MS);
    cr_assert_eq(obs.end[0], START + 15 * MS);
    /* delivery 10 ms late against a 10 ms threshold: strict, not slow;
       dispatch 5 ms against 5 ms - 1: slow, by exactly end - start */
    cr_assert_eq(obs.slows, 1);
    cr_assert_eq(obs.slow_kind[0], DQ_SLOW_DISPATCH);
    cr_assert_eq(obs.slow_ns[0], 5 * MS);

    m.what = 2;
    cr_assert_eq(dq_post(q, &m, NULL), 0); /* due START + 15 ms */
    cr_assert_eq(dq_clock_advance(clk, 10 * MS + 1), 0);
    cr_assert_eq(dq_run_until_idle(q), 1);
    cr_assert_eq(obs.slows, 3);
    cr_assert_eq(obs.slow_kind[1], DQ_SLOW_DELIVERY);
    cr_assert_eq(obs.slow_ns[1], 10 * MS + 1, "exactly start - when");
    cr_assert_eq(obs.slow_kind[2], DQ_SLOW_DISPATCH);
}

Test(observer, front_posts_are_never_late_and_zero_thresholds_are_off)
{
    memset(&obs, 0, sizeof(obs));
    dq_observer o = observer_all(1, 0);
    cr_assert_eq(dq_set_observer(q, &o), 0);
    dq_msg m = msg(1);
    m.callback = takes_five_ms;
    cr_assert_eq(dq_post_at_front(q, &m, NULL), 0);
    cr_assert_eq(dq_clock_advance(clk, SEC), 0);
    cr_assert_eq(dq_run_until_idle(q), 1);
    cr_assert_eq(obs.starts, 1);
    cr_assert_eq(obs.slows, 0);
}

Test(observer, removed_and_not_for_dq_next)
{
    memset(&obs, 0, sizeof(obs));
    dq_observer o = observer_all(0, 0);
    cr_assert_eq(dq_set_observer(q, &o), 0);
    cr_assert_eq(post_in(1, 0), 0);
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(obs.starts, 0, "dq_next* dispatch nothing");
    cr_assert_eq(post_in(2, 0), 0);
    cr_assert_eq(dq_run_until_idle(q), 1);
    cr_assert_eq(obs.starts, 1);
    cr_assert_eq(dq_set_observer(q, &o), 0); /* replaced before taken */
    cr_assert_eq(dq_set_observer(q, NULL), 0);
    cr_assert_eq(post_in(3, 0), 0);
    cr_assert_eq(dq_run_until_idle(q), 1);
    cr_assert_eq(obs.starts, 1);
}

/* ---- dq_dump -------------------------------------------------------------- */

static char *dump_text(dq_queue *dq)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(dq_dump(dq, f), 0);
    fclose(f);
    return buf;
}

/* The lines that start with prefix, in order, as one string. */
static char *lines_with(const char *text, const char *prefix)
{
    size_t cap = strlen(text) + 1, n = 0;
    char *out = calloc(1, cap);
    for (const char *l = text; *l != '\0';) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l) + 1 : strlen(l);
        if (strncmp(l, prefix, strlen(prefix)) == 0) {
            memcpy(out + n, l, len);
            n += len;
        }
        l += len;
    }
    return out;
}

static bool keep_idle(void *ctx)
{
    (void)ctx;
    return true;
}

Test(dump, errors)
{
    cr_assert_eq(dq_dump(NULL, stdout), -EINVAL);
    cr_assert_eq(dq_dump(q, NULL), -EINVAL);
}

Test(dump, exact_when_quiescent)
{
    cr_assert_eq(dq_set_name(q, "ui"), 0);
    dq_msg m = msg(10);
    m.arg1 = 1;
    m.arg2 = -2;
    cr_assert_eq(dq_post_delayed(q, &m, 2 * MS, NULL), 0);
    m.what = 11;
    cr_assert_eq(dq_post_delayed(q, &m, MS, NULL), 0);
    m.what = 12;
    cr_assert_eq(dq_post_delayed(q, &m, MS, NULL), 0); /* after 11: posted later */
    m.what = 13;
    cr_assert_eq(dq_post_at_front(q, &m, NULL), 0);
    m.what = 14;
    dq_token front_tok;
    cr_assert_eq(dq_post_at_front(q, &m, &front_tok), 0); /* before 13: LIFO */
    m.what = 15;
    m.flags = DQ_ASYNC;
    cr_assert_eq(dq_post_delayed(q, &m, 3 * MS, NULL), 0);
    m.flags = 0;
    m.what = 16;
    dq_token rep;
    cr_assert_eq(dq_post_repeating(q, &m, START + 4 * MS, 7, DQ_FIXED_DELAY, &rep), 0);
    dq_token barrier;
    cr_assert_eq(dq_post_sync_barrier(q, &barrier), 0);
    m.what = 17;
    dq_token gone;
    cr_assert_eq(dq_post(q, &m, &gone), 0);
    cr_assert_eq(dq_cancel(q, gone), 0);
    cr_assert_eq(dq_add_idle_handler(q, keep_idle, &target), 0);

    char *text = dump_text(q);
    char head[160];
    snprintf(head, sizeof(head), "dq_dump queue=%p name=ui clock=manual now=%lld\n",
             (void *)q, (long long)START);
    cr_assert_eq(strncmp(text, head, strlen(head)), 0, "%s", text);
    cr_assert_not_null(strstr(text, "consumer state=none until=never held=0 quit=no\n"),
                       "%s", text);
    cr_assert_not_null(
        strstr(text, "counts pending=7 barriers=1 idle_handlers=1 fds=0\n"), "%s",
        text);
    char *kinds = lines_with(text, "msg");
    char expected[2048];
    char cb[32], tgt[32];
    snprintf(cb, sizeof(cb), "%p", (void *)(uintptr_t)record);
    snprintf(tgt, sizeof(tgt), "%p", (void *)&target);
    /* what, due, async, repeat, in delivery order */
    struct {
        int what;
        const char *due;
        int async;
        const char *repeat;
        int64_t period;
    } want[] = {
        { 14, "front", 0, "no", 0 },       { 13, "front", 0, "no", 0 },
        { 11, "+1000000", 0, "no", 0 },    { 12, "+1000000", 0, "no", 0 },
        { 10, "+2000000", 0, "no", 0 },    { 15, "+3000000", 1, "no", 0 },
        { 16, "+4000000", 0, "delay", 7 },
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        n += (size_t)snprintf(expected + n, sizeof(expected) - n,
                              "msg due=%s target=%s what=%d arg1=1 arg2=-2 obj=(nil) "
                              "callback=%s async=%d repeat=%s period=%lld token=",
                              want[i].due, tgt, want[i].what, cb, want[i].async,
                              want[i].repeat, (long long)want[i].period);
    /* compare line by line up to the token, which differs per post */
    const char *line = kinds, *exp = expected;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *tok = strstr(exp, "token=") + strlen("token=");
        size_t len = (size_t)(tok - exp);
        cr_assert_eq(strncmp(line, exp, len), 0, "line %zu:\n%s\nwanted\n%.*s", i, line,
                     (int)len, exp);
        exp = tok;
        line = strchr(line, '\n') + 1;
    }
    cr_assert_eq(*line, '\0', "no other msg line:\n%s", kinds);
    char want_tok[64];
    snprintf(want_tok, sizeof(want_tok), "token=%llu\n", (unsigned long long)front_tok);
    cr_assert_not_null(strstr(kinds, want_tok), "the front post's token");
    snprintf(want_tok, sizeof(want_tok), "barrier due=+0 token=%llu\n",
             (unsigned long long)barrier);
    cr_assert_not_null(strstr(text, want_tok), "%s", text);
    char idle_line[96];
    snprintf(idle_line, sizeof(idle_line), "idle fn=%p ctx=%p\n",
             (void *)(uintptr_t)keep_idle, (void *)&target);
    cr_assert_not_null(strstr(text, idle_line), "%s", text);
    cr_assert(strlen(text) > 4 && strcmp(text + strlen(text) - 4, "end\n") == 0);
    free(kinds);
    free(text);
    cr_assert_eq(dq_cancel(q, rep), 0);
    cr_assert_eq(dq_remove_idle_handler(q, keep_idle, &target), 0);
}

static uint32_t never_called(int fd, uint32_t events, void *ctx)
{
    (void)fd, (void)events, (void)ctx;
    return 0;
}

Test(dump, consumer_state_and_fds)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    cr_assert_eq(dq_add_fd_listener(q, p[0], DQ_EVENT_INPUT, never_called, &target), 0);
    /* a consumer asleep in epoll until a message 5 s away, on the clock */
    cr_assert_eq(post_in(1, 5 * SEC), 0);
    sleeper s = { .q = q, .deadline = INT64_MAX };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, sleeper_main, &s), 0);
    int64_t end = real_ns() + 5 * SEC;
    char *text;
    for (;;) {
        text = dump_text(q);
        if (strstr(text, "consumer state=sleeping until=+5000000000 held=0 quit=no\n"))
            break;
        free(text);
        cr_assert(real_ns() < end, "the consumer never showed asleep");
        sleep_ms(1);
    }
    char fd_line[128];
    snprintf(fd_line, sizeof(fd_line), "fd fd=%d events=in,err listener=%p ctx=%p\n",
             p[0], (void *)(uintptr_t)never_called, (void *)&target);
    cr_assert_not_null(strstr(text, fd_line), "%s", text);
    cr_assert_not_null(
        strstr(text, "counts pending=1 barriers=0 idle_handlers=0 fds=1\n"), "%s",
        text);
    free(text);
    cr_assert_eq(dq_clock_advance(clk, 5 * SEC), 0);
    await_done(&s);
    pthread_join(t, NULL);
    text = dump_text(q);
    cr_assert_not_null(
        strstr(text, "consumer state=running until=never held=0 quit=no\n"), "%s",
        text);
    free(text);
    dq_quit(q);
    text = dump_text(q);
    cr_assert_not_null(strstr(text, "quit=now\n"), "%s", text);
    cr_assert_not_null(strstr(text, "counts pending=0 barriers=0"), "%s", text);
    free(text);
    close(p[0]);
    close(p[1]);
}

/* Producers post and cancel, the consumer runs dq_loop, another thread
   dumps all the while: every dump is whole and consistent with itself,
   and (under TSan) no access races. */
typedef struct race {
    dq_queue *q;
    _Atomic int producers_done;
    _Atomic long delivered;
    long dumps;
} race;

static void race_dispatch(dq_msg *m, void *ctx)
{
    (void)m;
    atomic_fetch_add(&((race *)ctx)->delivered, 1);
}

static void *race_producer(void *p)
{
    race *r = p;
    for (int i = 0; i < 5000; i++) {
        dq_msg m = { .target = &target, .what = i, .arg1 = i % 7 };
        if (i % 5 == 0)
            m.flags = DQ_ASYNC;
        dq_token tok;
        cr_assert_eq(dq_post_delayed(r->q, &m, (i % 3) * 200000, &tok), 0);
        if (i % 4 == 0)
            (void)dq_cancel(r->q, tok); /* 0, or -ENOENT if delivered first */
    }
    atomic_fetch_add(&r->producers_done, 1);
    return NULL;
}

static void *race_consumer(void *p)
{
    cr_assert_eq(dq_loop(((race *)p)->q), 0);
    return NULL;
}

static size_t count_lines(const char *text, const char *prefix)
{
    size_t n = 0;
    for (const char *l = text; l != NULL && *l != '\0';) {
        if (strncmp(l, prefix, strlen(prefix)) == 0)
            n++;
        l = strchr(l, '\n');
        l = l ? l + 1 : NULL;
    }
    return n;
}

static void *race_dumper(void *p)
{
    race *r = p;
    while (atomic_load(&r->producers_done) < 2 || r->dumps < 3) {
        char *text = dump_text(r->q);
        cr_assert_eq(strncmp(text, "dq_dump queue=", 14), 0);
        size_t len = strlen(text);
        cr_assert(len > 4 && strcmp(text + len - 4, "end\n") == 0);
        size_t pending = 0, barriers = 0;
        const char *c = strstr(text, "counts pending=");
        cr_assert_not_null(c);
        cr_assert_eq(sscanf(c, "counts pending=%zu barriers=%zu", &pending, &barriers),
                     2);
        cr_assert_eq(count_lines(text, "msg "), pending);
        cr_assert_eq(count_lines(text, "barrier "), barriers);
        free(text);
        r->dumps++;
    }
    return NULL;
}

Test(dump, safe_while_producers_and_the_consumer_race)
{
    race r = { 0 };
    dq_options o = { .dispatch = race_dispatch, .ctx = &r };
    r.q = dq_create(&o);
    cr_assert_not_null(r.q);
    pthread_t prod[2], cons, dumper;
    cr_assert_eq(pthread_create(&cons, NULL, race_consumer, &r), 0);
    cr_assert_eq(pthread_create(&dumper, NULL, race_dumper, &r), 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&prod[i], NULL, race_producer, &r), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(prod[i], NULL);
    pthread_join(dumper, NULL);
    dq_quit_safely(r.q);
    pthread_join(cons, NULL);
    cr_assert_gt(atomic_load(&r.delivered), 0);
    cr_assert_geq(r.dumps, 3);
    dq_unref(r.q);
}

/* ---- test control --------------------------------------------------------- */

static int64_t peek_q(void)
{
    return dq_peek_when(q);
}
static int64_t run_q(void)
{
    return dq_run_until_idle(q);
}
static int64_t ff_q(void)
{
    return dq_fast_forward(q, SEC);
}
static int64_t blocked_q(void)
{
    return dq_is_blocked_on_barrier(q);
}

Test(control, errors)
{
    cr_assert_eq(dq_peek_when(NULL), -EINVAL);
    cr_assert_eq(dq_run_until_idle(NULL), -EINVAL);
    cr_assert_eq(dq_fast_forward(NULL, 1), -EINVAL);
    cr_assert_eq(dq_fast_forward(q, -1), -EINVAL);
    cr_assert(!dq_is_blocked_on_barrier(NULL));
    dq_queue *plain = dq_create(NULL);
    cr_assert_eq(dq_fast_forward(plain, 1), -EINVAL, "a real clock");
    dq_unref(plain);
    cr_assert_eq(dq_peek_when(q), -ENOENT, "empty; makes this thread the consumer");
    cr_assert_eq(on_other_thread(peek_q), -EPERM);
    cr_assert_eq(on_other_thread(run_q), -EPERM);
    cr_assert_eq(on_other_thread(ff_q), -EPERM);
    cr_assert_eq(on_other_thread(blocked_q), 0);
    cr_assert_eq(dq_run_until_idle(q), 0);
    dq_quit(q);
    cr_assert_eq(dq_peek_when(q), -ENOENT);
    cr_assert(!dq_is_blocked_on_barrier(q));
    cr_assert_eq(dq_run_until_idle(q), -ESHUTDOWN);
    cr_assert_eq(dq_fast_forward(q, 1), -ESHUTDOWN);
}

Test(control, peek_when_and_a_barrier)
{
    cr_assert_eq(post_in(1, 3 * MS), 0);
    cr_assert_eq(dq_peek_when(q), START + 3 * MS, "not due yet");
    cr_assert(!dq_is_blocked_on_barrier(q));
    dq_token b;
    cr_assert_eq(dq_post_sync_barrier(q, &b), 0);
    cr_assert_eq(dq_peek_when(q), -ENOENT, "a barrier first, no async message");
    dq_msg m = msg(2);
    m.flags = DQ_ASYNC;
    cr_assert_eq(dq_post_delayed(q, &m, 9 * MS, NULL), 0);
    cr_assert_eq(dq_peek_when(q), START + 9 * MS,
                 "behind a barrier: the async message");
    cr_assert(!dq_is_blocked_on_barrier(q), "the sync message is not due");
    cr_assert_eq(dq_clock_advance(clk, 3 * MS), 0);
    cr_assert(dq_is_blocked_on_barrier(q));
    cr_assert_eq(dq_run_until_idle(q), 0, "held");
    cr_assert_eq(dq_fast_forward(q, 6 * MS), 1, "the async one, at its due");
    cr_assert_eq(got.what[0], 2);
    cr_assert_eq(got.clock_at[0], START + 9 * MS);
    cr_assert_eq(dq_remove_sync_barrier(q, b), 0);
    cr_assert(!dq_is_blocked_on_barrier(q));
    cr_assert_eq(dq_peek_when(q), START + 3 * MS);
    cr_assert_eq(dq_run_until_idle(q), 1);
    m = msg(3);
    cr_assert_eq(dq_post_at_front(q, &m, NULL), 0);
    cr_assert_eq(dq_peek_when(q), 0, "a front post");
}

static void repost_now(dq_msg *m)
{
    record(m);
    dq_msg again = *m;
    cr_assert_eq(dq_post(q, &again, NULL), 0);
}

Test(control, run_until_idle_runs_what_was_due_at_its_start)
{
    cr_assert_eq(dq_run_until_idle(q), 0);
    for (int i = 1; i <= 3; i++)
        cr_assert_eq(post_in(i, 0), 0);
    cr_assert_eq(post_in(9, 1), 0);
    cr_assert_eq(dq_run_until_idle(q), 3);
    cr_assert_eq(got.what[2], 3);
    dq_msg m = msg(5);
    m.callback = repost_now;
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    cr_assert_eq(dq_run_until_idle(q), 1,
                 "its repost, due now, waits for the next call");
    cr_assert_eq(dq_run_until_idle(q), 1);
    dq_token rep;
    m = msg(6);
    cr_assert_eq(dq_post_repeating(q, &m, START, 1, DQ_FIXED_RATE, &rep), 0);
    cr_assert_eq(dq_run_until_idle(q), 2, "the repost and one occurrence");
    cr_assert_eq(dq_cancel(q, rep), 0);
    cr_assert_eq(dq_remove(q, &(dq_match){ .target = &target }), 2);
}

static void post_within_window(dq_msg *m)
{
    record(m);
    if (m->what == 1)
        cr_assert_eq(post_in(2, 30 * MS), 0);
}

Test(control, fast_forward_dispatches_in_order_at_each_due_time)
{
    dq_msg m = msg(1);
    m.callback = post_within_window;
    cr_assert_eq(dq_post_delayed(q, &m, 10 * MS, NULL), 0);
    cr_assert_eq(post_in(3, 50 * MS), 0);
    cr_assert_eq(post_in(4, 50 * MS + 1), 0);
    cr_assert_eq(dq_fast_forward(q, 50 * MS), 3, "1, 2 (posted meanwhile), 3; not 4");
    cr_assert_eq(got.what[0], 1);
    cr_assert_eq(got.clock_at[0], START + 10 * MS);
    cr_assert_eq(got.what[1], 2);
    cr_assert_eq(got.clock_at[1], START + 40 * MS);
    cr_assert_eq(got.what[2], 3);
    cr_assert_eq(got.clock_at[2], START + 50 * MS, "the window is inclusive");
    cr_assert_eq(dq_queue_now(q), START + 50 * MS);
    cr_assert_eq(dq_fast_forward(q, 0), 0);
    cr_assert_eq(dq_fast_forward(q, 7), 1);
    cr_assert_eq(dq_queue_now(q), START + 50 * MS + 7, "exactly start + ns");
    cr_assert_eq(dq_fast_forward(q, INT64_MAX), 0,
                 "an empty queue, to the end of time");
    cr_assert_eq(dq_queue_now(q), INT64_MAX);
}

Test(control, fast_forward_crosses_hours_in_milliseconds)
{
    dq_token rep;
    dq_msg m = msg(1);
    cr_assert_eq(dq_post_repeating(q, &m, START + SEC, SEC, DQ_FIXED_RATE, &rep), 0);
    int64_t t0 = real_ns();
    cr_assert_eq(dq_fast_forward(q, 3 * 3600 * SEC), 3 * 3600);
    cr_assert_lt(real_ns() - t0, 2 * SEC);
    cr_assert_eq(got.count, 3 * 3600);
    cr_assert_eq(got.clock_at[63], START + 64 * SEC);
    cr_assert_eq(dq_peek_when(q), START + 3 * 3600 * SEC + SEC);
    cr_assert_eq(dq_cancel(q, rep), 0);
}
