/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For //:version_test: prints the version this program was compiled with
 * (the header's macros) and the one that the shared library named on the
 * command line returns from dq_version(), loaded with dlopen so that the
 * answer is that file's and no other build's:
 *
 *   header MAJOR.MINOR.PATCH DQ_VERSION
 *   library VERSION
 */
#include <deliqueue/deliqueue.h>
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: version_check SHARED_LIB\n");
        return 2;
    }
    printf("header %d.%d.%d %ld\n", DQ_VERSION_MAJOR, DQ_VERSION_MINOR,
           DQ_VERSION_PATCH, (long)DQ_VERSION);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "version_check: %s\n", dlerror());
        return 1;
    }
    /* POSIX's way to take a function from dlsym's void *. */
    const char *(*version)(void);
    *(void **)&version = dlsym(lib, "dq_version");
    if (!version) {
        fprintf(stderr, "version_check: %s\n", dlerror());
        return 1;
    }
    printf("library %s\n", version());
    return 0;
}
