/* SPDX-License-Identifier: Apache-2.0 */
/* The stand-in runner: every Test in the binary, in link order, in this
   process; prints Criterion's closing line and exits non-zero on failure. */
#include <pthread.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

extern const struct cr_shim_test __start_cr_shim_tests[], __stop_cr_shim_tests[];
extern const struct cr_shim_suite __start_cr_shim_suites[] __attribute__((weak));
extern const struct cr_shim_suite __stop_cr_shim_suites[] __attribute__((weak));

static jmp_buf test_exit;
static pthread_t test_thread;
static bool test_failed;

bool cr_shim_streq(const char *a, const char *b)
{
    return a != NULL && b != NULL && strcmp(a, b) == 0;
}

void cr_shim_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    fprintf(stderr, "[FAIL] %s:%d: assertion failed: %s", file, line, expr);
    if (fmt[0] != '\0') {
        va_list ap;
        va_start(ap, fmt);
        fputs(": ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    if (!pthread_equal(pthread_self(), test_thread))
        _exit(1);
    test_failed = true;
    longjmp(test_exit, 1);
}

static const struct cr_shim_suite *suite_of(const char *name)
{
    if (__start_cr_shim_suites == NULL)
        return NULL;
    for (const struct cr_shim_suite *s = __start_cr_shim_suites;
         s < __stop_cr_shim_suites; s++)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

int main(void)
{
    int tested = 0, failing = 0;
    test_thread = pthread_self();
    for (const struct cr_shim_test *t = __start_cr_shim_tests; t < __stop_cr_shim_tests;
         t++) {
        const struct cr_shim_suite *s = suite_of(t->suite);
        if (t->extra.disabled || (s != NULL && s->extra.disabled))
            continue;
        void (*init)(void) = t->extra.init ? t->extra.init : s ? s->extra.init : NULL;
        void (*fini)(void) = t->extra.fini ? t->extra.fini : s ? s->extra.fini : NULL;
        tested++;
        test_failed = false;
        /* as Criterion's verbose log: a binary killed at its timeout names
           the test it was in */
        fprintf(stderr, "[RUN ] %s::%s\n", t->suite, t->name);
        if (setjmp(test_exit) == 0) {
            if (init)
                init();
            t->fn();
        }
        if (fini && setjmp(test_exit) == 0)
            fini();
        failing += test_failed;
        fprintf(stderr, "[%s] %s::%s\n", test_failed ? "FAIL" : "PASS", t->suite,
                t->name);
    }
    fprintf(stderr,
            "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: 0\n",
            tested, tested - failing, failing);
    return failing ? 1 : (tested ? 0 : 1);
}
