#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# readme_quickstart_test.sh BINARY: the README's quick start, built as
# written, runs to a clean exit and prints what the README says it does.
set -eu
out=$("$1") || { echo "readme_quickstart_test: $1 exited $?" >&2; exit 1; }
want=$(printf 'what=1\nwhat=2\nwhat=3')
if [ "$out" != "$want" ]; then
    printf 'readme_quickstart_test: printed\n%s\nexpected\n%s\n' "$out" "$want" >&2
    exit 1
fi
echo "readme_quickstart_test: ok"
