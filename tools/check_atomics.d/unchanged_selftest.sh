#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# unchanged_selftest.sh CHECKER : the --compare mode's own test, no Bazel.
#
# Compiles tiny C files with the host cc and checks the verdicts:
#   the same source twice                              -> same, exit 0
#   one store weakened from seq_cst to relaxed         -> differs, exit 1,
#                                                         naming that function only
#   lines inserted above an assert() (its line moves) and two functions
#   swapped (addresses, section layout shift)          -> same, exit 0
#   a function only on one side                        -> differs, exit 1
#   no such file                                       -> exit 2
set -u
checker=$1
cc=${CC:-cc}
dir=$(mktemp -d "${TEST_TMPDIR:-/tmp}/unchanged_selftest.XXXXXX")
trap 'rm -rf "$dir"' EXIT
bad=0

src() { # src NAME ORDER LEAD SWAP: the probe with its store ORDER, LEAD
        # blank lines first, publish and peek swapped if SWAP is 1; each
        # version is probe.c in its own directory (the same __FILE__)
    mkdir -p "$dir/$1"
    pub='void publish(int v) { atomic_store_explicit(&flag, v, '$2'); }'
    peek='int peek(void) { return atomic_load_explicit(&flag, memory_order_acquire); }'
    [ "$4" = 1 ] && { t=$pub; pub=$peek; peek=$t; }
    {
        echo '#include <assert.h>'
        echo '#include <stdatomic.h>'
        echo '#include <stdio.h>'
        i=0
        while [ $i -lt "$3" ]; do echo; i=$((i + 1)); done
        echo 'static _Atomic(int) flag;'
        echo "$pub"
        echo "$peek"
        cat <<'C'
int checked(int k)
{
    static int calls;
    assert(k > 0);
    printf("checked %d\n", k);
    return ++calls + k;
}
C
        [ "$1" = more ] && echo 'int extra(void) { return 7; }'
    } >"$dir/$1/probe.c"
    (cd "$dir/$1" && "$cc" -std=c11 -O2 -g -c probe.c -o ../"$1".o) ||
        { echo "cc failed"; exit 2; }
}

expect() { # expect WANT_RC WANT_TEXT ARGS...
    want=$1 text=$2
    shift 2
    out=$(python3 "$checker" "$@" 2>&1)
    rc=$?
    printf '%s\n' "$out" | sed 's/^/    /'
    if [ $rc -eq "$want" ] && printf '%s\n' "$out" | grep -q -- "$text"; then
        echo "ok: exit $rc, '$text'"
    else
        echo "FAILED: exit $rc (want $want), want '$text'"
        bad=1
    fi
}

src base memory_order_seq_cst 0 0
src again memory_order_seq_cst 0 0
src weak memory_order_relaxed 0 0
src moved memory_order_seq_cst 5 1
src more memory_order_seq_cst 0 0

expect 0 'same' --compare "$dir/base.o" "$dir/again.o"
expect 1 'differs: functions publish$' --compare "$dir/base.o" "$dir/weak.o"
expect 1 'DIFFERS 1 of 1' --compare "$dir/base.o" "$dir/weak.o"
expect 0 'UNCHANGED' --compare "$dir/base.o" "$dir/moved.o" -v
expect 1 'extra (only in new)' --compare "$dir/base.o" "$dir/more.o"
expect 2 'no such file' --compare "$dir/base.o" "$dir/none.o"

[ $bad -eq 0 ] && echo "OK: every verdict as expected" || echo FAILED
exit $bad
