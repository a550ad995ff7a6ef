#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# observe_bench_smoke_test.sh OBSERVE_BENCH
# observe_bench runs every row and prints its tables.  Not a timed
# assertion: no number is checked, only that each row is there.
set -eu
ob=$1
out=${TEST_TMPDIR:-/tmp}/observe_bench.out
"$ob" --msgs=2000 --pending=1000 --reps=1 >"$out"
fail() { echo "observe_bench_smoke_test: $*" >&2; cat "$out" >&2; exit 1; }
grep -q '^- machine: ' "$out" || fail "no machine line"
for row in 'no observer' 'no observer (A/A twin)' 'observer: start and end callbacks' \
    'observer: slow thresholds only'; do
    grep -qF "| $row | " "$out" || fail "no row for $row"
done
grep -q '^| no observer | [0-9.]* | 1.00 |$' "$out" || fail "the first row's ratio is not 1.00"
grep -q '^| to /dev/null | 1000 | [0-9.]* |$' "$out" || fail "no dump row"
"$ob" --msgs=0 >/dev/null 2>&1 && fail "--msgs=0 was accepted"
echo "PASS"
