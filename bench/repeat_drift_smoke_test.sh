#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# repeat_drift_smoke_test.sh REPEAT_DRIFT
# repeat_drift runs every contender and prints its table, each contender
# having delivered occurrences.  Not a timed assertion: no drift is checked.
set -eu
rd=$1
out=${TEST_TMPDIR:-/tmp}/repeat_drift.out
"$rd" --periods=40 --period-us=1000 --load-us=100 --burners=0 --reps=1 >"$out"
fail() { echo "repeat_drift_smoke_test: $*" >&2; cat "$out" >&2; exit 1; }
grep -q '^- machine: ' "$out" || fail "no machine line"
grep -q '^| contender | occurrences (median) | expected | drift median (us) | drift max (us) | median drift ratio to dq_fixed_rate |$' "$out" \
    || fail "no table header"
for c in dq_fixed_rate dq_repost uv_timer; do
    row=$(grep "^| $c |" "$out") || fail "no row for $c"
    occ=$(echo "$row" | cut -d'|' -f3 | tr -d ' ')
    [ "$occ" -gt 0 ] 2>/dev/null || fail "$c delivered no occurrence"
    [ "$(echo "$row" | cut -d'|' -f4 | tr -d ' ')" = 40 ] || fail "$c: expected is not 40"
done
"$rd" --periods=0 >/dev/null 2>&1 && fail "--periods=0 was accepted"
echo "PASS"
