/* Deliberate undefined behaviour: signed integer overflow. Under
 * --config=asan (UBSan, -fno-sanitize-recover=all) it must stop the program. */
#include <limits.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    (void)argv;
    int big = INT_MAX - 1 + argc; /* INT_MAX when run without arguments */
    int wrapped = big + 1;        /* the bug */
    printf("ubsan_canary: %d (no report means UBSan is off)\n", wrapped);
    return 0;
}
