/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A minimal, in-process stand-in for Criterion's <criterion/criterion.h>,
 * used only under --config=tsan.  Criterion's runner cannot start under
 * ThreadSanitizer (BoxFort maps its inheritable arena at fixed addresses
 * that TSan reserves: Snaipe/Criterion#274), so the same test sources are
 * built against this header there and run in one process, one test after
 * another.  Covers what deliqueue's tests use: Test, TestSuite with
 * .init/.fini, cr_assert*, cr_log_info.  A failed assertion on the test's
 * own thread ends that test; on any other thread it ends the process.
 */
#ifndef DELIQUEUE_CRITERION_SHIM_H
#define DELIQUEUE_CRITERION_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct cr_shim_extra {
    void (*init)(void);
    void (*fini)(void);
    int disabled;
    double timeout;
    const char *description;
};

struct cr_shim_test {
    const char *suite;
    const char *name;
    void (*fn)(void);
    struct cr_shim_extra extra;
};

struct cr_shim_suite {
    const char *name;
    struct cr_shim_extra extra;
};

void cr_shim_fail(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define CR_SHIM_SECTION(s) __attribute__((used, section(s), aligned(8)))

#define Test(Suite, Name, ...)                                                      \
    static void cr_shim_##Suite##_##Name(void);                                     \
    static const struct cr_shim_test cr_shim_desc_##Suite##_##Name CR_SHIM_SECTION( \
        "cr_shim_tests") = {                                                        \
        #Suite, #Name, cr_shim_##Suite##_##Name, { __VA_ARGS__ }                    \
    };                                                                              \
    static void cr_shim_##Suite##_##Name(void)

#define TestSuite(Name, ...)                                                \
    static const struct cr_shim_suite cr_shim_suite_##Name CR_SHIM_SECTION( \
        "cr_shim_suites") = { #Name, { __VA_ARGS__ } }

#define cr_assert(cond, ...)                                         \
    do {                                                             \
        if (!(cond))                                                 \
            cr_shim_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__); \
    } while (0)
#define cr_expect                   cr_assert
#define cr_assert_not(cond, ...)    cr_assert(!(cond), __VA_ARGS__)
#define cr_assert_eq(a, b, ...)     cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...)    cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...)     cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...)    cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...)     cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...)    cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_null(p, ...)      cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...)  cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(cr_shim_streq((a), (b)), __VA_ARGS__)
#define cr_expect_eq                cr_assert_eq
#define cr_expect_neq               cr_assert_neq
#define cr_assert_fail(...) \
    cr_shim_fail(__FILE__, __LINE__, "cr_assert_fail", "" __VA_ARGS__)
#define cr_log_info(...) (fprintf(stderr, "[----] " __VA_ARGS__), fputc('\n', stderr))
#define cr_log_warn      cr_log_info
#define cr_log_error     cr_log_info

bool cr_shim_streq(const char *a, const char *b);

#endif
