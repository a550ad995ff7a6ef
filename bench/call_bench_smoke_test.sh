#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# call_bench_smoke_test.sh CALL_BENCH
# call_bench runs every contender and prints its table.  Not a timed
# assertion: no number is checked, only that each row is there.
set -eu
cb=$1
out=${TEST_TMPDIR:-/tmp}/call_bench.out
"$cb" --iters=200 --reps=1 >"$out"
fail() { echo "call_bench_smoke_test: $*" >&2; cat "$out" >&2; exit 1; }
grep -q '^- machine: ' "$out" || fail "no machine line"
grep -q '^| contender | ns per round trip (median) | ratio to dq_call |$' "$out" \
    || fail "no table header"
for c in dq_call mutex_condvar dq_post_futex; do
    grep -q "^| $c | [0-9]* | [0-9.]* |\$" "$out" || fail "no row for $c"
done
grep -q '^| dq_call | [0-9]* | 1.00 |$' "$out" || fail "dq_call's ratio to itself is not 1.00"
"$cb" --iters=0 >/dev/null 2>&1 && fail "--iters=0 was accepted"
echo "PASS"
