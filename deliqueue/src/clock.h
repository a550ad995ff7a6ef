/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The clock: dq_now() (public) on CLOCK_MONOTONIC, or, in testing builds
 * (DQ_TEST_CLOCK), on the manual test clock while a test has it on.  The
 * wait (wait.c) sleeps on real time and asks here whether dq_now() is
 * real.  Any thread.
 */
#ifndef DELIQUEUE_SRC_CLOCK_H
#define DELIQUEUE_SRC_CLOCK_H

#include <stdint.h>

/* Real monotonic time in ns, whatever the test clock says. */
int64_t dq_clock_real(void);
/* Nonzero while the test clock is on (testing builds only). */
int dq_clock_is_manual(void);

#endif /* DELIQUEUE_SRC_CLOCK_H */
