#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# rename_variant.sh SUFFIX NM OBJCOPY CC OUT_OBJ OUT_SYMS ARCHIVE...
#
# One build variant of the dispatched library: merge the objects
# of ARCHIVE(s) into one relocatable object (cc -r, i.e. ld -r), then append
# __SUFFIX to every global symbol the variant defines (nm --defined-only -g,
# objcopy --redefine-syms), so that the llsc and lse copies of the queue can
# be linked side by side.  OUT_SYMS lists the renamed symbols as
# "KIND NAME" lines, KIND "func" (exported through an ifunc by
# gen_ifunc_stubs.sh) or "data" (private to the variant: each copy keeps its
# own, which is consistent because every resolver picks the same variant).
set -eu
suffix=$1 nm=$2 objcopy=$3 cc=$4 out_obj=$5 out_syms=$6
shift 6
tmp=${out_obj}.merged.o
"$cc" -r -nostdlib -o "$tmp" -Wl,--whole-archive "$@" -Wl,--no-whole-archive
# "VALUE TYPE NAME" (or "TYPE NAME" for absolute symbols without a value)
"$nm" --defined-only -g "$tmp" | awk '
    NF >= 2 { type = $(NF - 1); name = $NF
              kind = (type ~ /^[TWi]$/) ? "func" : "data"
              print kind, name }' | LC_ALL=C sort -u -k2 > "$out_syms"
if [ ! -s "$out_syms" ]; then
    echo "rename_variant.sh: $* defines no global symbol" >&2
    exit 1
fi
awk -v s="__$suffix" '{ print $2, $2 s }' "$out_syms" > "${out_obj}.map"
"$objcopy" --redefine-syms="${out_obj}.map" "$tmp" "$out_obj"
rm -f "$tmp" "${out_obj}.map"
