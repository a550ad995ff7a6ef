#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# run_check.sh WANT CHECKER [check_atomics args...]
#
# Runs check_atomics and turns its verdict into a test result:
#   WANT=pass    the test passes iff the checker passes (exit 0)
#   WANT=reject  the test passes iff the checker rejects the build: exit 1
#                with at least one VIOLATION line (a tool error, exit 2,
#                is a test failure, not a rejection)
set -u
want=$1 checker=$2
shift 2
out=$(python3 "$checker" -v "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
case $want in
pass)
    [ $rc -eq 0 ] && { echo "OK: accepted, as expected"; exit 0; }
    echo "FAILED: check_atomics exit $rc, expected 0"; exit 1 ;;
reject)
    if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q '^VIOLATION'; then
        echo "OK: rejected, as expected"; exit 0
    fi
    echo "FAILED: check_atomics exit $rc, expected 1 with VIOLATION lines"; exit 1 ;;
*)
    echo "run_check.sh: WANT must be pass or reject" >&2; exit 2 ;;
esac
