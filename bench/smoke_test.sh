#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# smoke_test.sh QUEUE_BENCH HEAP_CMP PUSH_DECOMP STEADY_POST SUMMARY_PY
# The benchmarks run and print what they promise.  Not a timed assertion:
# no number is checked, only that every contender and scenario appears.
set -eu
qb=$1 hc=$2 pd=$3 sp=$4 summary=$5
out=${TEST_TMPDIR:-/tmp}/queue_bench.out
json=${TEST_TMPDIR:-/tmp}/queue_bench.json
"$qb" --quick --reps 1 --json "$json" >"$out"
fail() { echo "smoke_test: $*" >&2; cat "$out" >&2; exit 1; }
grep -q '^- machine: ' "$out" || fail "no machine line"
grep -q '^- build: ' "$out" || fail "no build line"
grep -q '^- interruptions: with all [0-9]* CPUs busy, [0-9]* gaps' "$out" || fail "no interruptions probe"
grep -q '^| metric | unit | deliqueue | legacy | mutex_heap | ck_handoff | urcu_handoff | floor | deliqueue_twin |$' "$out" \
    || fail "no queue table header (with the A/A twin)"
grep -q '^| metric | unit | branchless | branchy | andor | wide | branchless_twin |$' "$out" \
    || fail "no heap table header (with the A/A twin)"
grep -q '^| target | measured (medians) | held in (range) | A/A band | |$' "$out" \
    || fail "no targets table with the A/A band"
for row in 'insert cost, depth 1000, 1 producer' 'insert throughput, depth 10000, 2 producers' \
           'e2e throughput' 'post-to-delivery p99, paced' 'post-to-delivery p99, steady' \
           'remove by criteria' 'cancel by token' \
           'heap hold'; do
    grep -q "^| $row" "$out" || fail "no row '$row'"
done
grep -q '"metrics": \[' "$json" || fail "no metrics in JSON"
grep -q '"ratio_to_deliqueue"' "$json" || fail "no ratios in JSON"
python3 "$summary" "$json" >"$out.summary" || fail "summary.py failed on the JSON"
grep -q "^| push at depth 10k, 1 producer: deliqueue's cost / the floor's | [0-9.]*x ([0-9.]*x-[0-9.]*x) | " \
    "$out.summary" || fail "summary.py: no push row with its range"
echo '{}' >"$out.bad"
python3 "$summary" "$out.bad" >/dev/null 2>&1 && fail "summary.py accepted a file that is not queue_bench JSON"
# Every comparator spells the same total order (keys never repeat: seq is
# unique), so the same workload pops the same keys in the same order and
# each heap's checksum of them must agree; both sift-down shapes are
# checked this way, with and without ties on `when`.
for q in 1 1000000; do
    want=
    for c in branchless branchy andor wide; do
        line=$("$hc" "$c" 1000 10000 "$q") || fail "heap_cmp $c failed"
        echo "$line" | grep -q "comparator=$c" || fail "heap_cmp $c: $line"
        sum=${line#*checksum=}; sum=${sum%% *}
        [ -n "$want" ] || want=$sum
        [ "$sum" = "$want" ] || fail "heap_cmp $c, quantum $q: checksum $sum, branchless $want"
    done
done
"$hc" bogus >/dev/null 2>&1 && fail "heap_cmp accepted a bogus comparator"
"$pd" --rounds 5 >"$out" || fail "push_decomp failed"
for row in 'floor (bare push, own nodes)' '+copy, 2 lines' '+prefetch 7 ahead' '+48 register moves' '+address order (free map)' '+pool chain through line 1' '+pool chain in line 0' 'dq_post_at'; do
    grep -qF "| $row |" "$out" || fail "push_decomp: no row '$row'"
done
"$pd" --rounds 0 >/dev/null 2>&1 && fail "push_decomp accepted --rounds 0"
"$sp" --seconds 0.2 --reps 2 >"$out" || fail "steady_post failed"
grep -q '^| median | | [0-9.]* | [0-9.]* |$' "$out" || fail "steady_post: no median row"
"$sp" --reps 0 >/dev/null 2>&1 && fail "steady_post accepted --reps 0"
echo "smoke_test: ok"
