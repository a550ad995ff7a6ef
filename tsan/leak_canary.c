/* A deliberate leak: the only pointer to a malloc'd block is dropped.
 * Under --config=asan LeakSanitizer must report it at exit. */
#include <stdio.h>
#include <stdlib.h>

static void *volatile sink;

int main(void)
{
    sink = malloc(4096);
    sink = NULL; /* the bug: the block is unreachable now */
    printf("leak_canary: exiting (no report means LSan is off)\n");
    return 0;
}
