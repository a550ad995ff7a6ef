#!/bin/bash
# Lays out an installed deliqueue under PREFIX (tools/install builds the
# files with Bazel, then calls this; //deliqueue/dist:install_test calls it
# on the same Bazel outputs):
#
#   PREFIX/include/deliqueue/deliqueue.h
#   PREFIX/lib/libdeliqueue.so.VERSION, .so.SOVERSION -> it, .so -> it
#   PREFIX/lib/libdeliqueue.a
#   PREFIX/lib/pkgconfig/deliqueue.pc
#
# usage: lay_out.sh PREFIX VERSION SHARED_LIB STATIC_LIB PC_IN HEADER
set -euo pipefail
if (($# != 6)); then
  echo "usage: lay_out.sh PREFIX VERSION SHARED_LIB STATIC_LIB PC_IN HEADER" >&2
  exit 2
fi
prefix=$1 version=$2 shared=$3 static=$4 pc_in=$5 header=$6
[[ $prefix == /* ]] || { echo "lay_out.sh: PREFIX must be absolute: $prefix" >&2; exit 2; }
[[ $version =~ ^[0-9]+(\.[0-9]+)*$ ]] || { echo "lay_out.sh: bad VERSION: $version" >&2; exit 2; }
for f in "$shared" "$static" "$pc_in" "$header"; do
  [[ -f $f ]] || { echo "lay_out.sh: no such file: $f" >&2; exit 2; }
done
# The soname's file name (libdeliqueue.so.N) is what programs load.
soname=$(basename "$shared")
[[ $soname =~ ^libdeliqueue\.so\.[0-9]+$ ]] ||
  { echo "lay_out.sh: $shared is not named libdeliqueue.so.N" >&2; exit 2; }

mkdir -p "$prefix/include/deliqueue" "$prefix/lib/pkgconfig"
install -m 644 "$header" "$prefix/include/deliqueue/deliqueue.h"
install -m 755 "$shared" "$prefix/lib/libdeliqueue.so.$version"
ln -sfn "libdeliqueue.so.$version" "$prefix/lib/$soname"
ln -sfn "$soname" "$prefix/lib/libdeliqueue.so"
install -m 644 "$static" "$prefix/lib/libdeliqueue.a"
# pkg-config's prefix: the one given, with characters sed would read as
# syntax escaped.
escaped=$(printf '%s' "$prefix" | sed 's/[&|\\]/\\&/g')
sed -e "s|@PREFIX@|$escaped|" -e "s|@VERSION@|$version|" "$pc_in" \
  >"$prefix/lib/pkgconfig/deliqueue.pc"
chmod 644 "$prefix/lib/pkgconfig/deliqueue.pc"
