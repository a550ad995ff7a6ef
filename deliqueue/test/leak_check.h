/* SPDX-License-Identifier: Apache-2.0 */
/* Leaks fail the test under ASan.  LeakSanitizer's report at exit comes
   after Criterion has recorded the test's verdict and does not change it,
   nor does an assertion in a suite's .fini: so each suite's .fini (the
   fixture's teardown, or leak_check itself) checks once the test's
   objects are gone and aborts on a leak, which Criterion counts as a
   crash.  Elsewhere it does nothing. */
#ifndef DELIQUEUE_TEST_LEAK_CHECK_H
#define DELIQUEUE_TEST_LEAK_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DQ_TEST_LEAK_CHECK 1
#endif
#endif
#ifdef DQ_TEST_LEAK_CHECK
#include <sanitizer/lsan_interface.h>
#endif

static inline void leak_check(void)
{
#ifdef DQ_TEST_LEAK_CHECK
    if (__lsan_do_recoverable_leak_check() != 0) {
        fprintf(stderr, "LeakSanitizer found leaks (its report is above)\n");
        abort();
    }
#endif
}

#endif /* DELIQUEUE_TEST_LEAK_CHECK_H */
