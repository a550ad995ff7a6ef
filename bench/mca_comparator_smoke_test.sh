#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# bench/mca_comparator runs over the library's comparators and the
# baselines' branchy one and prints a row for every pair and core.
#   mca_comparator_smoke_test.sh MCA_COMPARATOR DELIQUEUE_H HEAP_H MSG_H
set -euo pipefail
tool="$1" api="$2" msg="$4"
include="${api%/deliqueue/deliqueue.h}"
src="$(dirname "$msg")"
out=$(python3 "$tool" --no-check --include "$include" --src-include "$src" --root . 2>&1) || {
  echo "$out"
  echo "FAIL: mca_comparator exited $?"
  exit 1
}
echo "$out"
rows=$(grep -c " vs " <<<"$out" || true)
if [[ $rows -lt 10 ]]; then
  echo "FAIL: $rows comparison rows, expected at least 10"
  exit 1
fi
echo "PASS: $rows comparison rows"
