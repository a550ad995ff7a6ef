#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# probe_matrix.sh CHECKER VARIANT=FILES... : the checker's own truth table.
#
# Each argument names the variant a build of the core was made as (llsc,
# lse, outline, x86_64) and its files (comma-separated).  Every build is
# checked, on the default hot functions, against every expectation: it
# must pass exactly its own and be rejected (exit 1, VIOLATION) by every
# other.
set -u
checker=$1
shift
bad=0
printf '%-10s %-10s %-8s %s\n' probe expect verdict ok?
for arg in "$@"; do
    built=${arg%%=*}
    files=$(printf '%s' "${arg#*=}" | tr ',' ' ')
    for expect in llsc lse outline x86_64; do
        # shellcheck disable=SC2086
        out=$(python3 "$checker" --expect=$expect $files 2>&1)
        rc=$?
        if [ "$expect" = "$built" ]; then want=0; else want=1; fi
        verdict=$([ $rc -eq 0 ] && echo PASS || { [ $rc -eq 1 ] && echo FAIL || echo "ERROR($rc)"; })
        if [ $rc -eq $want ]; then ok=yes; else ok=NO; bad=1; printf '%s\n' "$out"; fi
        printf '%-10s %-10s %-8s %s\n' "$built" "$expect" "$verdict" "$ok"
    done
done
[ $bad -eq 0 ] && echo "OK: every build passes only its own variant" || echo "FAILED"
exit $bad
