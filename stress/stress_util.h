/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stress/stress_util.h: what the stress programs share.
 *
 * DQ_STRESS_SANITIZED is defined under ASan, TSan or MSan (GCC's and
 * Clang's spellings): those runtimes own malloc/realloc and inflate RSS,
 * so checks that rely on either are switched off or loosened there.
 *
 * Thread contract: nap_ms may be called from any thread.
 */
#ifndef STRESS_STRESS_UTIL_H
#define STRESS_STRESS_UTIL_H

#include <errno.h>
#include <time.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DQ_STRESS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define DQ_STRESS_SANITIZED 1
#endif
#endif

/* Sleep ms milliseconds, resuming after signals. */
static inline void nap_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

#endif /* STRESS_STRESS_UTIL_H */
