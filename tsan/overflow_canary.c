/* A deliberate heap buffer overflow: one byte written past a malloc'd block.
 * Under --config=asan (and fuzz) AddressSanitizer must report it;
 * overflow_canary_test fails if it does not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    (void)argv;
    size_t n = 16 + (size_t)argc; /* not a constant: keep the compiler honest */
    char *block = malloc(n);
    if (block == NULL)
        return 2;
    memset(block, 'x', n);
    block[n] = '\0'; /* the bug: one past the end */
    printf("overflow_canary: %.4s (no report means ASan is off)\n", block);
    free(block);
    return 0;
}
