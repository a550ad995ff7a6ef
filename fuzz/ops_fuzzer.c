/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ops_fuzzer: differential operation-sequence fuzzer.
 *
 * The input is decoded into a sequence of operations (post now / delayed /
 * at a time including 0, the past and INT64_MAX / at front, cancel with
 * live, stale, barrier and 0 tokens, remove and has with every match-field
 * combination, barrier post/remove, idle handler add/remove, advancing the
 * queues' manual clock, dq_try_next, dq_is_idle, dq_pending, quit, quit_safely),
 * run on deliqueue (the testing build) and on the legacy queue, which is the
 * reference model.  Every return value, every delivered message, every
 * idle-handler call and every discard report must agree; every accepted
 * message is delivered or discarded exactly once.
 *
 * Both follow deliqueue.h's quit semantics: quit_safely trims what is due
 * later inside the call, and until the consumer's drain ends cancel,
 * remove, has, remove_sync_barrier, pending and is_idle act on what
 * remains; after dq_quit or the drain's end they find nothing (-ENOENT,
 * 0, false, true).  One documented difference of timing (legacy.h):
 * deliqueue reports what dq_quit drops on the consumer's next call or at
 * the last dq_unref, the legacy queue inside the call.  So discards and
 * pending counts are compared op by op until the first dq_quit (through
 * a quit_safely drain too), and as whole sets at the end.
 *
 * Input format: a stream of ops; each op is one opcode byte followed by the
 * parameter bytes it needs (missing bytes read as 0).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deliqueue/deliqueue.h>
#include "bench/baselines/legacy.h"
#include <deliqueue_internal/msg.h>

#include "fuzz/watchdog.h"

#define MAX_OPS    600
#define MAX_IDS    700
#define MAX_BARS   64
#define MAX_IDLE   16
#define CLOCK_BASE (INT64_C(1) << 40)

enum { QA = 0, QB = 1 }; /* A: deliqueue, B: legacy */

static int targets[2];
static int objs[2];
static void cb_a(dq_msg *m)
{
    (void)m;
}
static void (*const callbacks[2])(dq_msg *) = { NULL, cb_a };

/* per-message bookkeeping, indexed by id (= arg2) */
static dq_token tok[2][MAX_IDS];
static uint8_t fate[2][MAX_IDS]; /* 1 delivered, 2 discarded */
static bool accepted[MAX_IDS];
static int n_ids;

static dq_token bar_tok[2][MAX_BARS];
static bool bar_removed[MAX_BARS];
static int n_bars;

/* discard logs */
static int32_t dlog[2][MAX_IDS * 2];
static int dlog_len[2], dlog_checked;

/* idle handlers: the same script on both queues */
typedef struct idle_script {
    int queue, id;
    int calls, keep_for;
} idle_script;
static idle_script idle[2][MAX_IDLE];
static int n_idle;
static int32_t ilog[2][MAX_OPS * MAX_IDLE];
static int ilog_len[2];

static dq_queue *qa;
static dq_legacy *qb;
/* both queues' clock, a fresh one for each input: runs replay exactly */
static dq_clock *clk;
static bool quitting; /* any quit: posts refused */
static bool quit_now; /* dq_quit: discards are reported at different times */

static const uint8_t *in;
static size_t in_len, in_pos;
static int op_index;

static uint8_t byte(void)
{
    return in_pos < in_len ? in[in_pos++] : 0;
}

#define FAIL(...)                                         \
    do {                                                  \
        fprintf(stderr, "ops_fuzzer: op %d: ", op_index); \
        fprintf(stderr, __VA_ARGS__);                     \
        fputc('\n', stderr);                              \
        abort();                                          \
    } while (0)

static void on_discard(const dq_msg *m, void *ctx)
{
    int qi = (int)(intptr_t)ctx;
    int32_t id = m->arg2;
    if (id < 0 || id >= n_ids)
        FAIL("%s reported a discard of unknown id %d", qi ? "legacy" : "deliqueue", id);
    if (fate[qi][id] != 0)
        FAIL("%s: id %d discarded after being %s", qi ? "legacy" : "deliqueue", id,
             fate[qi][id] == 1 ? "delivered" : "discarded");
    if (!accepted[id])
        FAIL("%s: id %d discarded but never accepted", qi ? "legacy" : "deliqueue", id);
    fate[qi][id] = 2;
    dlog[qi][dlog_len[qi]++] = id;
}

static bool idle_fn(void *ctx)
{
    idle_script *s = ctx;
    ilog[s->queue][ilog_len[s->queue]++] = s->id;
    return ++s->calls <= s->keep_for;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The discards since the last check must be the same multiset. */
static void check_discards(void)
{
    int na = dlog_len[QA] - dlog_checked, nb = dlog_len[QB] - dlog_checked;
    if (na != nb)
        FAIL("discards differ: deliqueue reported %d, legacy %d", na, nb);
    qsort(&dlog[QA][dlog_checked], (size_t)na, sizeof(int32_t), cmp_i32);
    qsort(&dlog[QB][dlog_checked], (size_t)nb, sizeof(int32_t), cmp_i32);
    for (int i = 0; i < na; i++)
        if (dlog[QA][dlog_checked + i] != dlog[QB][dlog_checked + i])
            FAIL("discarded different messages: deliqueue id %d, legacy id %d",
                 dlog[QA][dlog_checked + i], dlog[QB][dlog_checked + i]);
    dlog_checked = dlog_len[QA];
}

static void check_idle_log(void)
{
    if (ilog_len[QA] != ilog_len[QB])
        FAIL("idle handler calls differ: deliqueue %d, legacy %d", ilog_len[QA],
             ilog_len[QB]);
    for (int i = 0; i < ilog_len[QA]; i++)
        if (ilog[QA][i] != ilog[QB][i])
            FAIL("idle handler call %d: deliqueue ran #%d, legacy #%d", i, ilog[QA][i],
                 ilog[QB][i]);
}

static void check_rc(const char *what, long a, long b)
{
    if (a != b)
        FAIL("%s: deliqueue returned %ld, legacy %ld", what, a, b);
}

static dq_msg make_msg(void)
{
    uint8_t f = byte();
    dq_msg m = {
        .target = &targets[f & 1],
        .what = (f >> 1) % 3,
        .obj = (f & 8) ? &objs[(f >> 4) & 1] : NULL,
        .callback = callbacks[(f >> 5) & 1],
        .flags = (f & 64) ? DQ_ASYNC : 0,
        .arg1 = f,
    };
    if ((f & 0x87) == 0x87) /* now and then a message that must be refused */
        m.target = NULL;
    else if ((f & 0x86) == 0x86)
        m.flags = 2;
    return m;
}

static int64_t pick_delay(void)
{
    static const int64_t delays[] = {
        -5,
        0,
        1,
        2,
        10,
        100,
        1000,
        1000000,
        1000000000,
        INT64_MAX,
        INT64_MAX - 1,
        -1000000000,
    };
    uint8_t b = byte();
    if (b < 128)
        return delays[b % (sizeof delays / sizeof delays[0])];
    return (int64_t)(b - 128) * 7;
}

static int64_t pick_when(void)
{
    int64_t now = dq_clock_now(clk);
    uint8_t b = byte();
    switch (b % 8) {
    case 0: return 0;         /* front */
    case 1: return INT64_MAX; /* far future */
    case 2: return now;
    case 3: return now - 1 - byte(); /* past */
    case 4: return 1;                /* the very first timed instant */
    case 5: return -1 - byte();      /* invalid */
    default: return dq_when_after(now, byte() * 3);
    }
}

/* dq_post* on both; the message's identity (arg2) is its id. */
static void do_post(int kind)
{
    if (n_ids >= MAX_IDS)
        return;
    int id = n_ids++;
    dq_msg m = make_msg();
    m.arg2 = id;
    accepted[id] = true; /* until the posts say otherwise */
    dq_token *ta = (byte() & 7) ? &tok[QA][id] : NULL;
    dq_token *tb = ta ? &tok[QB][id] : NULL;
    int ra, rb;
    const char *what;
    switch (kind) {
    case 0:
        what = "post";
        ra = dq_post(qa, &m, ta);
        rb = dq_legacy_post(qb, &m, tb);
        break;
    case 1: {
        int64_t d = pick_delay();
        what = "post_delayed";
        ra = dq_post_delayed(qa, &m, d, ta);
        rb = dq_legacy_post_delayed(qb, &m, d, tb);
        break;
    }
    case 2: {
        int64_t w = pick_when();
        what = "post_at";
        ra = dq_post_at(qa, &m, w, ta);
        rb = dq_legacy_post_at(qb, &m, w, tb);
        break;
    }
    default:
        what = "post_at_front";
        ra = dq_post_at_front(qa, &m, ta);
        rb = dq_legacy_post_at_front(qb, &m, tb);
        break;
    }
    check_rc(what, ra, rb);
    if (ra != 0) {
        accepted[id] = false;
        if (ra != -EINVAL && ra != -ESHUTDOWN)
            FAIL("%s returned %d", what, ra);
        if (ra != -EINVAL && (ra == -ESHUTDOWN) != quitting)
            FAIL("%s returned %d while %squitting", what, ra, quitting ? "" : "not ");
        if (fate[QA][id] || fate[QB][id])
            FAIL("a refused post was reported");
    } else if (ta != NULL && (tok[QA][id] == 0 || tok[QB][id] == 0)) {
        FAIL("%s gave token 0", what);
    }
}

/* A token of some earlier message: live, delivered, discarded or refused. */
static int pick_id(void)
{
    if (n_ids == 0)
        return -1;
    uint8_t b = byte();
    if (b & 0x80) /* recent ones are more likely to be pending */
        return n_ids - 1 - (b & 0x7f) % n_ids;
    return b % n_ids;
}

static void do_cancel(void)
{
    uint8_t how = byte() % 8;
    int ra, rb;
    if (how == 0) {
        ra = dq_cancel(qa, 0);
        rb = dq_legacy_cancel(qb, 0);
        check_rc("cancel(0)", ra, rb);
        if (ra != -EINVAL)
            FAIL("cancel(0) returned %d", ra);
        return;
    }
    if (how == 1 && n_bars > 0) {
        int b = byte() % n_bars;
        ra = dq_cancel(qa, bar_tok[QA][b]);
        rb = dq_legacy_cancel(qb, bar_tok[QB][b]);
        if (bar_tok[QA][b] == 0)
            return;
        check_rc("cancel(barrier token)", ra, rb);
        /* deliqueue.h: a removed barrier's token is stale, a pending one's
           is no message's, whether or not the looper has retired it */
        /* after a quit's end (dq_quit, or the drain's end) it is gone */
        if (ra != (bar_removed[b] ? -ENOENT : -EINVAL) && !(quitting && ra == -ENOENT))
            FAIL("cancel(%s barrier's token) returned %d",
                 bar_removed[b] ? "a removed" : "a pending", ra);
        return;
    }
    int id = pick_id();
    if (id < 0 || tok[QA][id] == 0)
        return;
    ra = dq_cancel(qa, tok[QA][id]);
    rb = dq_legacy_cancel(qb, tok[QB][id]);
    check_rc("cancel", ra, rb);
    if (ra == 0 && (fate[QA][id] != 2 || fate[QB][id] != 2))
        FAIL("cancel of id %d returned 0 without reporting it", id);
}

static dq_match make_match(void)
{
    uint8_t f = byte(), g = byte();
    dq_match mt = {
        .target = &targets[f & 1],
        .fields = (f >> 1) & 7,
        .what = g % 3,
        .obj = (g & 4) ? &objs[(g >> 3) & 1] : NULL,
        .callback = callbacks[(g >> 4) & 1],
    };
    if ((f & 0xf0) == 0xf0)
        mt.fields |= 8; /* invalid */
    else if ((f & 0xf0) == 0xe0)
        mt.target = NULL;
    return mt;
}

static void do_remove(bool has)
{
    dq_match mt = make_match();
    bool null_match = (byte() & 31) == 31;
    if (has) {
        bool a = dq_has(qa, null_match ? NULL : &mt);
        bool b = dq_legacy_has(qb, null_match ? NULL : &mt);
        check_rc("has", a, b);
    } else {
        size_t a = dq_remove(qa, null_match ? NULL : &mt);
        size_t b = dq_legacy_remove(qb, null_match ? NULL : &mt);
        check_rc("remove", (long)a, (long)b);
    }
}

static void do_barrier_post(void)
{
    if (n_bars >= MAX_BARS)
        return;
    int b = n_bars++;
    int ra = dq_post_sync_barrier(qa, &bar_tok[QA][b]);
    int rb = dq_legacy_post_sync_barrier(qb, &bar_tok[QB][b]);
    check_rc("post_sync_barrier", ra, rb);
    if (ra != 0)
        bar_tok[QA][b] = bar_tok[QB][b] = 0;
}

static void do_barrier_remove(void)
{
    uint8_t how = byte() % 8;
    int ra, rb;
    if (how == 0) {
        ra = dq_remove_sync_barrier(qa, 0);
        rb = dq_legacy_remove_sync_barrier(qb, 0);
        check_rc("remove_sync_barrier(0)", ra, rb);
        return;
    }
    if (how == 1) { /* a message's token is not a barrier */
        int id = pick_id();
        if (id < 0 || tok[QA][id] == 0)
            return;
        ra = dq_remove_sync_barrier(qa, tok[QA][id]);
        rb = dq_legacy_remove_sync_barrier(qb, tok[QB][id]);
        check_rc("remove_sync_barrier(message token)", ra, rb);
        return;
    }
    if (n_bars == 0)
        return;
    int b = byte() % n_bars;
    if (bar_tok[QA][b] == 0)
        return;
    ra = dq_remove_sync_barrier(qa, bar_tok[QA][b]);
    rb = dq_legacy_remove_sync_barrier(qb, bar_tok[QB][b]);
    check_rc("remove_sync_barrier", ra, rb);
    if (ra == 0)
        bar_removed[b] = true;
}

static void do_idle(bool add)
{
    if (add) {
        if (n_idle >= MAX_IDLE)
            return;
        int i = n_idle++;
        int keep = byte() % 4;
        for (int qi = 0; qi < 2; qi++)
            idle[qi][i] = (idle_script){ .queue = qi, .id = i, .keep_for = keep };
        int ra = dq_add_idle_handler(qa, idle_fn, &idle[QA][i]);
        int rb = dq_legacy_add_idle_handler(qb, idle_fn, &idle[QB][i]);
        check_rc("add_idle_handler", ra, rb);
        return;
    }
    if (n_idle == 0)
        return;
    int i = byte() % n_idle;
    int ra = dq_remove_idle_handler(qa, idle_fn, &idle[QA][i]);
    int rb = dq_legacy_remove_idle_handler(qb, idle_fn, &idle[QB][i]);
    check_rc("remove_idle_handler", ra, rb);
}

static void do_advance(void)
{
    static const int64_t steps[] = { 0,   1,    2,       5,          10,
                                     100, 1000, 1000000, 1000000000, INT64_MAX };
    uint8_t b = byte();
    if (dq_clock_advance(clk, b < 200 ? steps[b % 10] : (int64_t)(b - 199) * 3) != 0)
        FAIL("dq_clock_advance failed");
}

static void do_next(void)
{
    dq_msg oa, ob;
    memset(&oa, 0xa5, sizeof oa);
    memset(&ob, 0x5a, sizeof ob);
    int ra = dq_try_next(qa, &oa);
    int rb = dq_legacy_try_next(qb, &ob);
    check_rc("try_next", ra, rb);
    check_idle_log();
    if (ra != 0) {
        if (ra != -EAGAIN && ra != -ESHUTDOWN)
            FAIL("try_next returned %d", ra);
        return;
    }
    if (oa.arg2 != ob.arg2)
        FAIL("try_next delivered id %d from deliqueue, id %d from legacy", oa.arg2,
             ob.arg2);
    int id = oa.arg2;
    if (id < 0 || id >= n_ids || !accepted[id])
        FAIL("try_next delivered unknown id %d", id);
    if (oa.target != ob.target || oa.what != ob.what || oa.arg1 != ob.arg1 ||
        oa.obj != ob.obj || oa.callback != ob.callback || oa.when != ob.when ||
        oa.flags != ob.flags)
        FAIL("try_next: id %d delivered with different fields (when %lld vs %lld)", id,
             (long long)oa.when, (long long)ob.when);
    if (oa.when > dq_clock_now(clk))
        FAIL("id %d delivered early: when %lld > now %lld", id, (long long)oa.when,
             (long long)dq_clock_now(clk));
    for (int qi = 0; qi < 2; qi++) {
        if (fate[qi][id] != 0)
            FAIL("%s delivered id %d after it was %s", qi ? "legacy" : "deliqueue", id,
                 fate[qi][id] == 1 ? "delivered" : "discarded");
        fate[qi][id] = 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_watchdog_begin("ops_fuzzer");
    in = data;
    in_len = size;
    in_pos = 0;
    n_ids = n_bars = n_idle = 0;
    dlog_len[QA] = dlog_len[QB] = dlog_checked = 0;
    ilog_len[QA] = ilog_len[QB] = 0;
    quitting = quit_now = false;
    memset(tok, 0, sizeof tok);
    memset(fate, 0, sizeof fate);
    memset(accepted, 0, sizeof accepted);
    memset(bar_tok, 0, sizeof bar_tok);
    memset(bar_removed, 0, sizeof bar_removed);
    clk = dq_clock_create_manual(CLOCK_BASE);
    if (clk == NULL)
        abort();

    dq_options oa = { .on_discard = on_discard,
                      .ctx = (void *)(intptr_t)QA,
                      .clock = clk };
    dq_options ob = { .on_discard = on_discard,
                      .ctx = (void *)(intptr_t)QB,
                      .clock = clk };
    qa = dq_create(&oa);
    qb = dq_legacy_create(&ob);
    if (qa == NULL || qb == NULL)
        abort();

    for (op_index = 0; op_index < MAX_OPS && in_pos < in_len; op_index++) {
        uint8_t op = byte() % 20;
        switch (op) {
        case 0:
        case 1: do_post(0); break;
        case 2: do_post(1); break;
        case 3:
        case 4: do_post(2); break;
        case 5: do_post(3); break;
        case 6:
        case 7: do_cancel(); break;
        case 8: do_remove(false); break;
        case 9: do_remove(true); break;
        case 10: do_barrier_post(); break;
        case 11: do_barrier_remove(); break;
        case 12: do_idle(byte() & 1); break;
        case 13: do_advance(); break;
        case 14:
        case 15:
        case 16: do_next(); break;
        case 17: check_rc("is_idle", dq_is_idle(qa), dq_legacy_is_idle(qb)); break;
        case 18:
            if (byte() % 4 == 0) {
                quitting = true;
                if (byte() & 1)
                    dq_quit(qa), dq_legacy_quit(qb), quit_now = true;
                else
                    dq_quit_safely(qa), dq_legacy_quit_safely(qb);
            }
            break;
        default: break;
        }
        if (!quit_now) {
            check_discards();
            check_rc("pending", (long)dq_pending(qa), (long)dq_legacy_pending(qb));
        }
    }
    /* drain what is due, then tear both down */
    for (int i = 0; i < MAX_IDS + 1; i++) {
        dq_msg oa2, ob2;
        int ra = dq_try_next(qa, &oa2);
        int rb = dq_legacy_try_next(qb, &ob2);
        check_rc("final try_next", ra, rb);
        if (ra != 0)
            break;
        check_rc("final try_next id", oa2.arg2, ob2.arg2);
        fate[QA][oa2.arg2] = fate[QB][ob2.arg2] = 1;
    }
    check_idle_log();
    dq_unref(qa);
    dq_legacy_destroy(qb);
    qa = NULL;
    qb = NULL;
    check_discards();
    for (int id = 0; id < n_ids; id++) {
        for (int qi = 0; qi < 2; qi++) {
            if (accepted[id] && fate[qi][id] == 0)
                FAIL("%s: accepted id %d neither delivered nor discarded",
                     qi ? "legacy" : "deliqueue", id);
            if (!accepted[id] && fate[qi][id] != 0)
                FAIL("%s: refused id %d was reported", qi ? "legacy" : "deliqueue", id);
        }
    }
    dq_clock_destroy(clk); /* after qb, which takes no hold on it */
    clk = NULL;
    fuzz_watchdog_end();
    return 0;
}
