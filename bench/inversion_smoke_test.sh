#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# inversion_smoke_test.sh INVERSION
# The inversion scenario runs every contender and writes what it promises.
# Not a timed assertion: no latency is checked, only that every contender
# delivered its frames and appears in the table and the JSON.
set -eu
inv=$1
out=${TEST_TMPDIR:-/tmp}/inversion.out
json=${TEST_TMPDIR:-/tmp}/inversion.json
plot=${TEST_TMPDIR:-/tmp}/inversion.dat
"$inv" --quick --json "$json" --plot-data "$plot" >"$out"
fail() { echo "inversion_smoke_test: $*" >&2; cat "$out" >&2; exit 1; }
grep -q '^- machine: ' "$out" || fail "no machine line"
grep -q '^- background posters ran at: \(SCHED_IDLE\|nice 19\)' "$out" \
    || fail "background posters not at the lowest priority"
grep -q '^| contender | frames | jank (> 16 ms) | lateness p50 (us) | lateness p99 (us) | lateness max (us) | post-to-delivery p99 (us) | post-to-delivery max (us) | background posts | trimmed by the consumer | largest trim | longest trim (ms) | consumer CPU (ms) |$' "$out" \
    || fail "no table header"
for c in deliqueue legacy mutex_heap ck_handoff urcu_handoff deliqueue_twin; do
    row=$(grep "^| $c |" "$out") || fail "no row for $c"
    frames=$(echo "$row" | cut -d'|' -f3 | tr -d ' ')
    [ "$frames" -gt 0 ] 2>/dev/null || fail "$c delivered no frame"
    grep -q "\"$c\": {" "$json" || fail "no $c in JSON"
    grep -q "^\"$c\"\$" "$plot" || fail "no $c in the plot data"
done
for k in frames jank_frames lat_p50_us lat_p99_us lat_max_us background_posts trim_max trim_ms_max; do
    [ "$(grep -c "^    \"$k\": " "$json")" -eq 6 ] || fail "JSON key $k not in every contender"
done
grep -q '^- goal (deliqueue: ' "$out" || fail "no goal line"
"$inv" --quick --warm --contenders deliqueue,legacy >"$out.warm" \
    || fail "--warm failed"
grep -q 'warm (every poster posted once first) start' "$out.warm" || fail "--warm not in the run line"
"$inv" --reps 0 >/dev/null 2>&1 && fail "--reps 0 accepted"
"$inv" --contenders nosuch >/dev/null 2>&1 && fail "unknown contender accepted"
echo "inversion_smoke_test: ok"
