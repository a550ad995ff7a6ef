/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cas_pairs: the CAS-pair benchmark of the article "How R8 made Kotlin
 * coroutines on Android twice as fast" (AppTractor), in C.
 *
 * The article timed compareAndSet pairs on one AtomicReference<Boolean>,
 * true -> false then false -> true, once directly (50.7 ns per pair on a
 * Pixel 5) and once through AtomicReferenceFieldUpdater (135 ns, 2.7x),
 * whose every call re-checks by reflection that the field exists, has the
 * right type and may be accessed, before it reaches the one Unsafe CAS.
 * R8 made the two equal by proving the checks at compile time.
 *
 * Here one int flag is flipped false -> true -> false (one "pair") through:
 *   direct    C11 atomic_compare_exchange_strong (seq_cst), inlined
 *   ck        Concurrency Kit ck_pr_cas_int (x86_64: lock cmpxchg; arm64:
 *             its LL/SC loop, no LSE: Debian's ck cannot enable LSE;
 *             ck's CAS carries no ordering on arm64, weaker than direct)
 *   outline   libgcc's __aarch64_cas4_acq_rel helper, what -moutline-atomics
 *             emits: a call that tests __aarch64_have_lse_atomics on every
 *             CAS, then runs casal or an ldaxr/stlxr loop (arm64 only)
 *   checked   a field updater: a descriptor (owner type, offset, size,
 *             alignment, CAS routine) checked on every call, then the CAS
 *             through a function pointer; the descriptor is reached through
 *             a volatile pointer, as one made at run time would be
 *   proven    the same updater code with the descriptor a compile-time
 *             constant: the compiler proves the checks and inlines the CAS
 *             (what R8 does), so it should cost what direct costs
 *
 * Single thread, uncontended, like the article.  Benchmark only: it prints
 * numbers and ratios and asserts nothing about time; it exits non-zero only
 * if a CAS failed that must succeed (a broken access form).
 *
 * Usage: cas_pairs [--pairs=N] [--reps=R] [--form=NAME] [--quiet] [--wall]
 *   default: every form, N = 10,000,000 pairs, R = 7 repetitions, median,
 *   timed in thread CPU time (--wall: CLOCK_MONOTONIC).
 *   --form=NAME --quiet: run one form once and print nothing (for counting
 *   executed instructions under QEMU; see bench/cas/count_insns.sh).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if DQ_BENCH_HAVE_CK
#include <ck_pr.h>
#endif

#if defined(__aarch64__)
/* libgcc's outline atomics (gcc/config/aarch64/lse.S): returns the old
   value; uses LSE when __aarch64_have_lse_atomics, else LL/SC. */
extern int __aarch64_cas4_acq_rel(int expected, int desired, int *ptr);
#endif

/* ---- the holder and its field (the article's AtomicReference) ---- */

typedef struct holder {
    int64_t other;    /* so the field is not at offset 0 */
    _Atomic int flag; /* direct, checked, proven */
    int plain_flag;   /* ck and outline (they take a plain int *) */
} holder;

/* ---- the field updater (the article's AtomicReferenceFieldUpdater) ---- */

typedef struct type_desc {
    const char *name;
    size_t size;
} type_desc;

static const type_desc holder_type = { "holder", sizeof(holder) };
static const type_desc int_type = { "int", sizeof(int) };

typedef struct int_field_updater {
    const type_desc *owner; /* type the field belongs to */
    const type_desc *field; /* type of the field */
    size_t offset;          /* of the field in owner */
    size_t align;           /* required alignment of the field */
    bool (*cas)(_Atomic int *field, int expected, int desired);
} int_field_updater;

static bool cas_int_seq_cst(_Atomic int *field, int expected, int desired)
{
    /* seq_cst, as Java's compareAndSet */
    return atomic_compare_exchange_strong(field, &expected, desired);
}

static const int_field_updater flag_updater = {
    &holder_type, &int_type, offsetof(holder, flag), _Alignof(int), cas_int_seq_cst,
};

static unsigned long updater_check_failures;

/* Every check a reflective updater makes on each call, then the CAS.
   always_inline so that both the checked and the proven form run this same
   code; only what the compiler can know about u differs. */
static inline __attribute__((always_inline)) bool
updater_cas(const int_field_updater *u, void *obj, const type_desc *obj_type,
            int expected, int desired)
{
    if (u == NULL || obj == NULL || obj_type != u->owner || u->field != &int_type ||
        u->field->size != sizeof(int) || u->offset > u->owner->size - u->field->size ||
        u->align == 0) {
        updater_check_failures++;
        return false;
    }
    uintptr_t addr = (uintptr_t)obj + u->offset;
    if (addr % u->align != 0) {
        updater_check_failures++;
        return false;
    }
    return u->cas((_Atomic int *)addr, expected, desired);
}

/* The descriptor as the program sees one created at run time. */
static const int_field_updater *volatile runtime_updater = &flag_updater;

/* ---- one pair through each form ---- */

typedef unsigned long pair_fn(holder *h, unsigned long pairs);

#define NOINLINE __attribute__((noinline))

static NOINLINE unsigned long pairs_direct(holder *h, unsigned long pairs)
{
    unsigned long ok = 0;
    for (unsigned long i = 0; i < pairs; i++) {
        int expected = 0;
        ok += atomic_compare_exchange_strong(&h->flag, &expected, 1);
        expected = 1;
        ok += atomic_compare_exchange_strong(&h->flag, &expected, 0);
    }
    return ok;
}

#if DQ_BENCH_HAVE_CK
static NOINLINE unsigned long pairs_ck(holder *h, unsigned long pairs)
{
    unsigned long ok = 0;
    for (unsigned long i = 0; i < pairs; i++) {
        ok += ck_pr_cas_int(&h->plain_flag, 0, 1);
        ok += ck_pr_cas_int(&h->plain_flag, 1, 0);
    }
    return ok;
}
#endif

#if defined(__aarch64__)
static NOINLINE unsigned long pairs_outline(holder *h, unsigned long pairs)
{
    unsigned long ok = 0;
    for (unsigned long i = 0; i < pairs; i++) {
        ok += __aarch64_cas4_acq_rel(0, 1, &h->plain_flag) == 0;
        ok += __aarch64_cas4_acq_rel(1, 0, &h->plain_flag) == 1;
    }
    return ok;
}
#endif

static NOINLINE unsigned long pairs_checked(holder *h, unsigned long pairs)
{
    unsigned long ok = 0;
    for (unsigned long i = 0; i < pairs; i++) {
        ok += updater_cas(runtime_updater, h, &holder_type, 0, 1);
        ok += updater_cas(runtime_updater, h, &holder_type, 1, 0);
    }
    return ok;
}

static NOINLINE unsigned long pairs_proven(holder *h, unsigned long pairs)
{
    unsigned long ok = 0;
    for (unsigned long i = 0; i < pairs; i++) {
        ok += updater_cas(&flag_updater, h, &holder_type, 0, 1);
        ok += updater_cas(&flag_updater, h, &holder_type, 1, 0);
    }
    return ok;
}

typedef struct form {
    const char *name;
    pair_fn *fn;     /* NULL: not available on this target */
    const char *why; /* why not */
} form;

static const form forms[] = {
    { "direct", pairs_direct, NULL },
#if DQ_BENCH_HAVE_CK
    { "ck", pairs_ck, NULL },
#else
    {"ck", NULL, "built without Concurrency Kit"},
#endif
#if defined(__aarch64__)
    { "outline", pairs_outline, NULL },
#else
    {"outline", NULL, "no outline helpers on this target"},
#endif
    { "checked", pairs_checked, NULL }, { "proven", pairs_proven, NULL },
};
#define NFORMS (sizeof(forms) / sizeof(forms[0]))

/* Thread CPU time by default: on a shared, oversubscribed machine the time
   a preempted thread spends off the CPU is not the CAS's.  --wall switches
   to CLOCK_MONOTONIC. */
static clockid_t bench_clock = CLOCK_THREAD_CPUTIME_ID;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(bench_clock, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *target_name(void)
{
#if defined(__x86_64__)
    return "x86_64";
#elif defined(__aarch64__) && defined(__ARM_FEATURE_ATOMICS)
    return "arm64, inline atomics LSE (-march=armv8.1-a)";
#elif defined(__aarch64__)
    return "arm64, inline atomics LL/SC (-march=armv8-a)";
#else
    return "unknown";
#endif
}

int main(int argc, char **argv)
{
    unsigned long pairs = 10000000;
    int reps = 7;
    const char *only = NULL;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--pairs=", 8) == 0)
            pairs = strtoul(argv[i] + 8, NULL, 10);
        else if (strncmp(argv[i], "--reps=", 7) == 0)
            reps = atoi(argv[i] + 7);
        else if (strncmp(argv[i], "--form=", 7) == 0)
            only = argv[i] + 7;
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = true;
        else if (strcmp(argv[i], "--wall") == 0)
            bench_clock = CLOCK_MONOTONIC;
        else {
            fprintf(stderr,
                    "usage: %s [--pairs=N] [--reps=R] [--form=NAME] "
                    "[--quiet] [--wall]\n",
                    argv[0]);
            return 2;
        }
    }
    if (pairs == 0 || reps < 1 || reps > 101) {
        fprintf(stderr, "cas_pairs: need --pairs >= 1 and 1 <= --reps <= 101\n");
        return 2;
    }

    static holder h; /* static: zeroed, aligned, not on a shared line */
    int failed = 0;
    double median[NFORMS] = { 0 };
    bool found = only == NULL;

    if (!quiet) {
        printf("cas_pairs: compare-and-set pairs (false->true, true->false), "
               "one thread, %s\n",
               target_name());
        printf("%lu pairs per repetition, median of %d repetitions "
               "(interleaved across forms), %s time\n",
               pairs, reps, bench_clock == CLOCK_MONOTONIC ? "wall" : "thread CPU");
#if defined(__aarch64__)
        printf("NOTE: on arm64 these times come from whatever runs this "
               "binary; under qemu-user they are emulation times, NOT "
               "hardware times.\nFor arm64 report executed guest instructions "
               "per pair instead (bench/cas/count_insns.sh).\n");
#endif
        printf("%-8s %12s %12s %10s\n", "form", "ns/pair", "min ns/pair", "vs direct");
    }
    /* Repetitions are interleaved across forms (rep 1 of every form, then
       rep 2, ...), so that load from other processes drifting over the run
       hits every form alike. */
    static double t[NFORMS][101];
    bool run[NFORMS] = { false };
    for (size_t f = 0; f < NFORMS; f++) {
        if (only != NULL && strcmp(only, forms[f].name) != 0)
            continue;
        found = true;
        run[f] = forms[f].fn != NULL;
    }
    int r_count = only != NULL && quiet ? 1 : reps;
    for (int r = 0; r < r_count; r++) {
        for (size_t f = 0; f < NFORMS; f++) {
            if (!run[f])
                continue;
            double t0 = now_ns();
            unsigned long ok = forms[f].fn(&h, pairs);
            t[f][r] = (now_ns() - t0) / (double)pairs;
            if (ok != 2 * pairs) {
                fprintf(stderr, "cas_pairs: %s: %lu of %lu CASes failed\n",
                        forms[f].name, 2 * pairs - ok, 2 * pairs);
                failed = 1;
            }
        }
    }
    for (size_t f = 0; f < NFORMS; f++) {
        if (only != NULL && strcmp(only, forms[f].name) != 0)
            continue;
        if (forms[f].fn == NULL) {
            if (!quiet)
                printf("%-8s %12s   (%s)\n", forms[f].name, "n/a", forms[f].why);
            continue;
        }
        qsort(t[f], (size_t)r_count, sizeof(t[f][0]), cmp_double);
        median[f] = t[f][r_count / 2];
        if (!quiet)
            printf("%-8s %12.2f %12.2f %9.2fx\n", forms[f].name, median[f], t[f][0],
                   median[0] > 0 ? median[f] / median[0] : 0.0);
    }
    if (!found) {
        fprintf(stderr, "cas_pairs: no form named %s\n", only);
        return 2;
    }
    if (updater_check_failures != 0) {
        fprintf(stderr, "cas_pairs: %lu updater checks failed\n",
                updater_check_failures);
        failed = 1;
    }
    if (!quiet)
        printf("article (Pixel 5, ART JIT): direct 50.7 ns, updater 135 ns "
               "per pair = 2.66x\n");
    return failed;
}
