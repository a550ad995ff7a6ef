#!/bin/bash
# Canary runner: passes only if PROGRAM fails AND its output matches PATTERN,
# i.e. the sanitizer caught the planted bug. A program that exits 0, or
# fails without the report, means the config no longer instruments: FAIL.
#
# usage: expect_report.sh PROGRAM PATTERN [PATTERN...]
set -u
program=$1
shift
out="${TEST_TMPDIR:-/tmp}/canary.out"
"$program" >"$out" 2>&1
status=$?
cat "$out"
echo "---- canary: $program exited with status $status"
if [[ $status == 0 ]]; then
  echo "FAIL: the planted bug went unreported (exit 0): is the sanitizer on?"
  exit 1
fi
for pattern in "$@"; do
  if ! grep -qE -- "$pattern" "$out"; then
    echo "FAIL: exit $status but no report matching: $pattern"
    exit 1
  fi
done
echo "PASS: the sanitizer reported the planted bug"
