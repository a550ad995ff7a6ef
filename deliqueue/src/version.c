/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_version(): the library's version, "MAJOR.MINOR.PATCH", spelled out of
 * the header's DQ_VERSION_* when this file is compiled, so the string and
 * the macros cannot disagree within one build.  The macros are plain
 * decimal literals (//:version_test checks them against MODULE.bazel's
 * version).  Any thread.
 */
#include <deliqueue/deliqueue.h>

/* DQ_VERSION gives MINOR and PATCH eight bits each. */
#if DQ_VERSION_MINOR > 255 || DQ_VERSION_PATCH > 255
#error "DQ_VERSION_MINOR and DQ_VERSION_PATCH must each be at most 255"
#endif

#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_(x)
#define MAJOR_TEXT    STRINGIFY(DQ_VERSION_MAJOR)
#define MINOR_TEXT    STRINGIFY(DQ_VERSION_MINOR)
#define PATCH_TEXT    STRINGIFY(DQ_VERSION_PATCH)

const char *dq_version(void)
{
    return MAJOR_TEXT "." MINOR_TEXT "." PATCH_TEXT;
}
