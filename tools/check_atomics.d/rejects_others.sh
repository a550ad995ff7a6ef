#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# rejects_others.sh CHECKER OWN FILES... : the negative test.
#
# FILES are a library built as variant OWN.  The checker must REJECT it
# (exit 1 with VIOLATION lines) under every other expectation; the test
# fails if any mismatched expectation is accepted or cannot be checked.
set -u
checker=$1 own=$2
shift 2
bad=0
for expect in x86_64 llsc lse outline dispatch; do
    [ "$expect" = "$own" ] && continue
    out=$(python3 "$checker" --expect=$expect "$@" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q '^VIOLATION'; then
        printf 'built %-8s --expect=%-8s rejected (ok): %s\n' "$own" "$expect" \
            "$(printf '%s\n' "$out" | grep -m1 '^VIOLATION' | cut -c1-110)"
    else
        printf '%s\n' "$out"
        printf 'built %-8s --expect=%-8s exit %d: NOT REJECTED\n' "$own" "$expect" $rc
        bad=1
    fi
done
[ $bad -eq 0 ] && echo "OK: every mismatched expectation is rejected" || echo FAILED
exit $bad
