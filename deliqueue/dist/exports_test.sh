#!/bin/bash
# The shared library exports exactly the functions deliqueue.h declares
# (nothing internal, nothing missing), under the version node of its
# soname, and its soname is libdeliqueue.so.N.
#
# usage: exports_test.sh SHARED_LIB HEADER
set -euo pipefail
lib=$1 header=$2
work=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*" >&2; exit 1; }

# The compiler reads the header: every function it declares, whatever the
# layout of the declaration.
gcc -std=c11 -fsyntax-only -aux-info "$work/aux" -x c "$header" || fail "gcc could not read $header"
grep -F "$(basename "$header"):" "$work/aux" | grep -v ' static ' |
  sed -E 's|^/\*.*\*/ *||; s/^extern [^(]*[ *]([A-Za-z_][A-Za-z0-9_]*) \(.*/\1/' | sort -u >"$work/declared"
[[ -s "$work/declared" ]] || fail "no function declarations found in $header"

nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' >"$work/exported.raw"
sed 's/@.*//' "$work/exported.raw" | sort -u >"$work/exported"
if ! diff -u --label "declared in $(basename "$header")" --label "exported by $(basename "$lib")" \
    "$work/declared" "$work/exported"; then
  fail "the exported symbols differ from the header's functions (- header only, + library only)"
fi

soname=$(readelf -d "$lib" | sed -nE 's/.*Library soname: \[(.*)\]/\1/p')
[[ $soname =~ ^libdeliqueue\.so\.[0-9]+$ ]] || fail "soname is '$soname', not libdeliqueue.so.N"
node="DELIQUEUE_${soname##*.}"
unversioned=$(grep -v "@@$node\$" "$work/exported.raw" || true)
[[ -z $unversioned ]] || fail "not under version $node: $unversioned"
echo "PASS: $(wc -l <"$work/exported") functions exported, soname $soname, version $node"
