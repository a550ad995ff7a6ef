/* Fuzz canary: a planted heap overflow behind a 4-byte magic prefix.
 * Under --config=fuzz, libFuzzer (comparison tracing) must find it within
 * seconds: fuzz_canary_test passes only then. Elsewhere the benign corpus
 * is replayed, proving the dq_fuzz_test replay driver works. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The block escapes through a volatile pointer, or -O2 deletes the bug. */
static char *volatile escaped_block;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t magic;
    if (size < sizeof magic)
        return 0;
    memcpy(&magic, data, sizeof magic);
    if (magic == 0x3f215144u) { /* "DQ!?" little-endian; cmp tracing finds it */
        escaped_block = malloc(4);
        if (escaped_block == NULL)
            return 0;
        memcpy(escaped_block, data,
               size > 8 ? 8 : size); /* the bug: overflow by up to 4 */
        free(escaped_block);
    }
    return 0;
}
