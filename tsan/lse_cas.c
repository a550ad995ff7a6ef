/* One C11 compare-and-swap. Built with -march=armv8.1-a (--config=arm64-lse)
 * the compiler emits the LSE `cas` instruction, which an ARMv8.0 core such
 * as cortex-a53 does not have: lse_trap_test expects SIGILL there and a
 * clean run on QEMU's `max` CPU. */
#include <stdatomic.h>
#include <stdio.h>

static _Atomic long word;

int main(int argc, char **argv)
{
    (void)argv;
    long expected = 0;
    /* seq_cst: the strongest order; only the instruction choice matters. */
    if (!atomic_compare_exchange_strong(&word, &expected, (long)argc))
        return 3;
    printf("lse_cas: word=%ld\n", atomic_load(&word));
    return atomic_load(&word) == argc ? 0 : 4;
}
