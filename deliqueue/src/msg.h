/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The message spec shared by deliqueue, the legacy queue and every baseline:
 * validation of posted messages, matching for remove/has, and the one
 * ordering key (when, seq) with its comparators.  Pure functions; any thread.
 */
#ifndef DELIQUEUE_MSG_H
#define DELIQUEUE_MSG_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include <deliqueue/deliqueue.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Internal due key of a front post: before every timed message (timed keys
   are >= 0).  Chosen so that a comparator built on subtraction overflows. */
#define DQ_KEY_FRONT INT64_MIN

/* 0 if *m may be posted, else -EINVAL. */
static inline int dq_msg_check(const dq_msg *m)
{
    if (m == NULL || m->target == NULL || (m->flags & ~DQ_ASYNC) != 0)
        return -EINVAL;
    return 0;
}

/* 0 if *match is usable, else -EINVAL. */
static inline int dq_match_check(const dq_match *match)
{
    if (match == NULL || match->target == NULL ||
        (match->fields & ~(uint32_t)DQ_MATCH_ALL_FIELDS) != 0)
        return -EINVAL;
    return 0;
}

/* Whether message fields (target, what, obj, callback) satisfy *match.
   Branchless on the optional fields: every field is compared, and the
   comparison of a field not asked for is masked out. */
static inline bool dq_match_fields(const dq_match *match, const void *target,
                                   int32_t what, const void *obj,
                                   void (*callback)(dq_msg *))
{
    uint32_t miss = 0;
    miss |= (uint32_t)(what != match->what) * DQ_MATCH_WHAT;
    miss |= (uint32_t)(obj != match->obj) * DQ_MATCH_OBJ;
    miss |= (uint32_t)(callback != match->callback) * DQ_MATCH_CALLBACK;
    return target == match->target && (miss & match->fields) == 0;
}

static inline bool dq_match_msg(const dq_match *match, const dq_msg *m)
{
    return dq_match_fields(match, m->target, m->what, m->obj, m->callback);
}

/* when = now + delay with Android's rules: negative delay is 0, overflow
   saturates at INT64_MAX. */
static inline int64_t dq_when_after(int64_t now, int64_t delay)
{
    if (delay < 0)
        delay = 0;
    return now > INT64_MAX - delay ? INT64_MAX : now + delay;
}

/* Ordering key: due key, then insertion sequence.  Front posts have
   key == DQ_KEY_FRONT and a decreasing seq, which makes them LIFO.
   seq is never negative (see dq_key_less). */
typedef struct dq_key {
    int64_t when;
    int64_t seq;
} dq_key;

/* -1, 0, +1 without subtraction (so without overflow) and without a
   branch: compilers emit two setcc/cset and a subtract. */
static inline int dq_sign_cmp(int64_t a, int64_t b)
{
    return (a > b) - (a < b);
}

/* The branchless comparator of the Android MessageQueue article: sign(when) * 2 + sign(seq).  Its sign
   is the lexicographic order; correct over the whole int64 range. */
static inline int dq_key_cmp(dq_key a, dq_key b)
{
    return dq_sign_cmp(a.when, b.when) * 2 + dq_sign_cmp(a.seq, b.seq);
}

/* The heap's comparator: dq_key_cmp(a, b) < 0, as one subtraction with
   borrow across both words, so it needs no more cycles than even the
   branchy comparator's early exit (tools/mca_comparator):
     x86_64:  cmp seq; sbb when; setl       (128-bit compare)
     arm64:   cmp seq; sbcs when; cset lt   (GCC 12 would branch on the
              128-bit compare, hence the three instructions spelled out)
   Requires seq >= 0, which the looper guarantees (its sequence numbers
   start at 2^62 and stay positive); when may be any int64. */
static inline bool dq_key_less(dq_key a, dq_key b)
{
#if defined(__aarch64__) && defined(__GNUC__)
    bool less;
    __asm__(
        "cmp  %[aseq], %[bseq]\n\t"
        "sbcs xzr, %[awhen], %[bwhen]\n\t"
        "cset %w[less], lt"
        : [less] "=r"(less)
        : [aseq] "r"(a.seq), [bseq] "r"(b.seq), [awhen] "r"(a.when), [bwhen] "r"(b.when)
        : "cc");
    return less;
#elif defined(__SIZEOF_INT128__)
    /* (when, seq) as one signed 128-bit integer; converting the unsigned
       composition to signed is modular in GCC and Clang, with no UB */
    __extension__ typedef __int128 wide;
    __extension__ typedef unsigned __int128 uwide;
    wide ka = (wide)((uwide)(uint64_t)a.when << 64 | (uint64_t)a.seq);
    wide kb = (wide)((uwide)(uint64_t)b.when << 64 | (uint64_t)b.seq);
    return ka < kb;
#else
    return dq_key_cmp(a, b) < 0;
#endif
}

#ifdef __cplusplus
}
#endif
#endif /* DELIQUEUE_MSG_H */
