#!/bin/bash
# Test runner behind dq_fuzz_test (//bazel/defs:fuzz.bzl).
#
# usage: fuzz_run.sh fuzz|replay BINARY MAX_TOTAL_TIME TIMEOUT EXPECT_CRASH [CORPUS_FILE...]
#   fuzz:   BINARY is a libFuzzer fuzzer; fuzz a writable copy of the corpus
#           for MAX_TOTAL_TIME seconds, or $DQ_FUZZ_MAX_TOTAL_TIME seconds when that
#           is set (a canary, EXPECT_CRASH=1, keeps at least its own time:
#           less may not find its planted bug), reproducers into
#           $TEST_UNDECLARED_OUTPUTS_DIR. Fails on any finding, or, with
#           EXPECT_CRASH=1, on finding nothing.
#   replay: BINARY is linked with fuzz_replay_main.c; run every corpus file once.
set -u
mode=$1 bin=$2 max_total_time=$3 timeout=$4 expect_crash=$5
shift 5

if [[ $mode == replay ]]; then
  exec "$bin" "$@"
fi

if [[ -n "${DQ_FUZZ_MAX_TOTAL_TIME:-}" ]]; then
  if ! [[ $DQ_FUZZ_MAX_TOTAL_TIME =~ ^[0-9]+$ ]] || ((10#$DQ_FUZZ_MAX_TOTAL_TIME == 0)); then
    echo "FAIL: DQ_FUZZ_MAX_TOTAL_TIME=$DQ_FUZZ_MAX_TOTAL_TIME is not a positive number of seconds"
    exit 1
  fi
  if [[ $expect_crash != 1 ]] || ((10#$DQ_FUZZ_MAX_TOTAL_TIME > max_total_time)); then
    max_total_time=$((10#$DQ_FUZZ_MAX_TOTAL_TIME))
  fi
fi
work="${TEST_TMPDIR:-$(mktemp -d)}/corpus"
out="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-/tmp}}"
mkdir -p "$work" "$out"
for f in "$@"; do cp -- "$f" "$work/" 2>/dev/null || true; done
echo "fuzz: $bin for ${max_total_time}s, $(ls "$work" | wc -l) seed inputs, timeout ${timeout}s per input"

"$bin" -max_total_time="$max_total_time" -timeout="$timeout" \
  -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$out/" "$work"
status=$?
findings=$(ls "$out" | grep -cE '^(crash|leak|timeout|oom|slow-unit)-' || true)
echo "fuzz: libFuzzer exit status $status, $findings reproducer(s) in test.outputs"

if [[ $expect_crash == 1 ]]; then
  if [[ $status != 0 && $findings -gt 0 ]]; then
    echo "PASS: the planted bug was found"
    exit 0
  fi
  echo "FAIL: libFuzzer did not find the planted bug in ${max_total_time}s: is the fuzz config instrumenting?"
  exit 1
fi
[[ $status == 0 ]] || { echo "FAIL: libFuzzer found a problem; reproducer above"; exit 1; }
echo "PASS"
