#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# count_insns.sh BINARY QEMU_CPU [FORM...]
#
# Executed arm64 guest instructions per CAS pair, for each FORM of cas_pairs,
# under qemu-user.  QEMU's wall-clock times are emulation times, not hardware
# times, so for arm64 we report instruction counts instead.
#
# Method: run `cas_pairs --form=F --quiet` under qemu-aarch64 with
# -singlestep (one guest instruction per translation block) and
# -d exec,nochain (log every executed block, no chaining), so the number of
# "Trace" lines is the number of executed guest instructions of the whole
# process.  Two runs with N1 and N2 pairs differ only in the loop, so
# (count(N2) - count(N1)) / (N2 - N1) is the exact count per pair, with the
# loader, libc start-up and exit cancelled out.  This counts instructions,
# not cycles: an LSE cas and an ldaxr/stlxr loop differ in how many are
# executed, not in what each costs on a given core.
set -eu
bin=$1 cpu=$2
shift 2
forms=${*:-direct ck outline checked proven}
n1=${DQ_COUNT_N1:-1000}
n2=${DQ_COUNT_N2:-3000}
ld_prefix=${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}
qemu=${QEMU_AARCH64:-qemu-aarch64}
[ -x "$bin" ] || { echo "count_insns.sh: $bin: no such executable" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

count() { # form pairs
    if ! "$qemu" -cpu "$cpu" -L "$ld_prefix" -singlestep -d exec,nochain \
            -D "$tmp/log" "$bin" --form="$1" --pairs="$2" --quiet \
            >"$tmp/out" 2>&1; then
        echo "FAILED"
        return
    fi
    grep -c '^Trace' "$tmp/log"
}

printf '%-8s %14s   (%s under qemu-aarch64 -cpu %s; counts, not times)\n' \
    form "insns/pair" "$(basename "$bin")" "$cpu"
for f in $forms; do
    a=$(count "$f" "$n1")
    b=$(count "$f" "$n2")
    if [ "$a" = FAILED ] || [ "$b" = FAILED ]; then
        printf '%-8s %14s\n' "$f" "n/a ($(head -c 60 "$tmp/out" | tr '\n' ' '))"
        continue
    fi
    awk -v f="$f" -v a="$a" -v b="$b" -v n1="$n1" -v n2="$n2" \
        'BEGIN { printf "%-8s %14.2f\n", f, (b - a) / (n2 - n1) }'
done
