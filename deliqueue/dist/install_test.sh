#!/bin/bash
# Installs deliqueue into a temporary prefix (lay_out.sh, as tools/install
# does) and builds install_check.c with plain gcc and pkg-config, once
# against the shared library and once against the static one, and runs
# both.
#
# usage: install_test.sh LAY_OUT SHARED_LIB STATIC_LIB PC_IN HEADER PROGRAM_C
set -euo pipefail
lay_out=$1 shared=$2 static=$3 pc_in=$4 header=$5 program=$6
work=${TEST_TMPDIR:?run under bazel test}/install
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

"$lay_out" "$prefix" 1.2.3 "$shared" "$static" "$pc_in" "$header"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
[[ "$(pkg-config --modversion deliqueue)" == 1.2.3 ]] || fail "pkg-config --modversion"
[[ -L "$prefix/lib/libdeliqueue.so" && -L "$prefix/lib/$(basename "$shared")" ]] ||
  fail "the .so symlinks are missing"

# Shared: found through the prefix's lib directory at run time.
read -ra flags <<<"$(pkg-config --cflags --libs deliqueue)"
gcc -std=c11 -Wall -Wextra -Werror -o "$work/check_shared" "$program" "${flags[@]}" ||
  fail "gcc with pkg-config --cflags --libs deliqueue"
readelf -d "$work/check_shared" | grep -q "NEEDED.*\[$(basename "$shared")\]" ||
  fail "check_shared does not load $(basename "$shared")"
LD_LIBRARY_PATH="$prefix/lib" "$work/check_shared" || fail "check_shared exited $?"
out=$(LD_LIBRARY_PATH="$prefix/lib" ldd "$work/check_shared")
grep -q "libdeliqueue.so.* => $prefix/lib/" <<<"$out" || fail "ldd: $out"

# Static: the archive alone is a complete library.
read -ra cflags <<<"$(pkg-config --cflags deliqueue)"
read -ra private <<<"$(pkg-config --static --libs-only-other deliqueue)"
libdir=$(pkg-config --variable=libdir deliqueue)
gcc -std=c11 -Wall -Wextra -Werror -o "$work/check_static" "$program" "${cflags[@]}" \
  "$libdir/libdeliqueue.a" "${private[@]}" ||
  fail "gcc with $libdir/libdeliqueue.a"
if readelf -d "$work/check_static" | grep -q "NEEDED.*libdeliqueue"; then
  fail "check_static loads libdeliqueue.so"
fi
"$work/check_static" || fail "check_static exited $?"
echo "PASS: installed, built with gcc + pkg-config (shared and static), ran"
