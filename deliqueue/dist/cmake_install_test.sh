#!/bin/bash
# Installs deliqueue as a distribution package is made: lay_out.sh (as
# tools/install) with DESTDIR set and a multiarch libdir,
# lib/$(gcc -print-multiarch), into a staging tree, then moves the tree to
# its prefix, as the package manager would.  Debian's cmake then
# configures cmake_consumer/ through find_package(deliqueue CONFIG
# REQUIRED), builds install_check.c against deliqueue::deliqueue (shared)
# and deliqueue::deliqueue_static, and runs both.  Also checked:
#
#   - no installed file names the staging tree; the .pc and CMake files
#     name the prefix;
#   - the man pages are installed under share/man;
#   - read from the staging tree before the move, the CMake package finds
#     its files there (it is relocatable);
#   - deliqueueConfigVersion.cmake accepts the requests its comment says
#     it does, for a 0.x and a 1.x version (real find_package calls, in
#     cmake -P).
#
# Hermetic: everything is under TEST_TMPDIR, HOME included (CMake's user
# package registry), and nothing is downloaded.
#
# usage: cmake_install_test.sh LAY_OUT SHARED_LIB STATIC_LIB PC_IN HEADER
#          PROGRAM_C CMAKE_LISTS CONFIG_IN MAN_PAGE_7
set -euo pipefail
lay_out=$1 shared=$2 static=$3 pc_in=$4 header=$5 program=$6 lists=$7 config_in=$8 man7=$9
work=${TEST_TMPDIR:?run under bazel test}/cmake_install
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in cmake make gcc pkg-config; do
  command -v "$tool" >/dev/null || fail "no $tool on PATH: tools/bootstrap.sh installs it"
done
cmake_in=$(dirname "$config_in")
man=$(dirname "$(dirname "$man7")")

rm -rf "$work"
mkdir -p "$work/home"
export HOME=$work/home
unset CMAKE_PREFIX_PATH CMAKE_GENERATOR deliqueue_DIR DESTDIR
unset PKG_CONFIG_PATH PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
cmake_flags=(-DCMAKE_C_COMPILER=gcc -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)

arch=$(gcc -print-multiarch)
[[ -n $arch ]] || fail "gcc -print-multiarch printed nothing"
libdir=lib/$arch
prefix=$work/usr
destdir=$work/stage
"$lay_out" --destdir "$destdir" --libdir "$libdir" --cmake "$cmake_in" --man "$man" \
  "$prefix" 1.2.3 "$shared" "$static" "$pc_in" "$header"

# ---- the staging tree -------------------------------------------------------
[[ ! -e $prefix ]] || fail "lay_out.sh wrote to the prefix itself, not under DESTDIR"
staged=$destdir$prefix
for f in include/deliqueue/deliqueue.h "$libdir/libdeliqueue.so.1.2.3" \
  "$libdir/libdeliqueue.so.0" "$libdir/libdeliqueue.so" "$libdir/libdeliqueue.a" \
  "$libdir/pkgconfig/deliqueue.pc" "$libdir/cmake/deliqueue/deliqueueConfig.cmake" \
  "$libdir/cmake/deliqueue/deliqueueConfigVersion.cmake" share/man/man7/deliqueue.7 \
  share/man/man3/dq_post.3 share/man/man3/dq_post_at.3; do
  [[ -e $staged/$f ]] || fail "not installed: \$DESTDIR\$prefix/$f"
done
n_src=$(find "$man" -name '*.[37]' | wc -l)
n_inst=$(find "$staged/share/man" -name '*.[37]' | wc -l)
((n_src == n_inst)) || fail "$n_src man pages in the source, $n_inst installed"
if named=$(grep -rlF "$destdir" "$destdir"); then
  fail "installed files name the staging tree (DESTDIR): $named"
fi
pc=$staged/$libdir/pkgconfig/deliqueue.pc
export PKG_CONFIG_PATH=$staged/$libdir/pkgconfig
[[ $(pkg-config --variable=prefix deliqueue) == "$prefix" ]] || fail "deliqueue.pc: $(cat "$pc")"
[[ $(pkg-config --variable=libdir deliqueue) == "$prefix/$libdir" ]] ||
  fail "deliqueue.pc's libdir: $(cat "$pc")"
unset PKG_CONFIG_PATH
grep -qF "\"$prefix\"" "$staged/$libdir/cmake/deliqueue/deliqueueConfig.cmake" ||
  fail "deliqueueConfig.cmake does not name the prefix $prefix"

src=$work/src
mkdir -p "$src/cmake_consumer"
cp "$lists" "$src/cmake_consumer/CMakeLists.txt"
cp "$program" "$src/install_check.c"

# Read from the staging tree: found there, and its files are there (the
# package checks that they exist).
out=$(cmake -S "$src/cmake_consumer" -B "$work/build-staged" "${cmake_flags[@]}" \
  -DCMAKE_PREFIX_PATH="$staged" 2>&1) || fail "cmake configure from the staging tree: $out"
grep -qxF -- "-- deliqueue 1.2.3 from $staged/$libdir/cmake/deliqueue" <<<"$out" ||
  fail "from the staging tree, cmake found: $(grep -- '-- deliqueue' <<<"$out")"

# ---- versions ---------------------------------------------------------------
# Each version's ConfigVersion file beside an empty Config file: which
# requests find_package accepts.
for v in 0.3.2 1.2.3; do
  "$lay_out" --cmake "$cmake_in" "$work/v$v" "$v" "$shared" "$static" "$pc_in" "$header"
  : >"$work/v$v/lib/cmake/deliqueue/deliqueueConfig.cmake"
done
cat >"$work/versions.cmake" <<'EOF'
function(expect version want)
  find_package(deliqueue ${ARGN} CONFIG QUIET PATHS "${WORK}/v${version}" NO_DEFAULT_PATH)
  if(deliqueue_FOUND)
    set(got "found")
  else()
    set(got "not found")
  endif()
  if(NOT got STREQUAL want)
    message(SEND_ERROR "find_package(deliqueue ${ARGN}), ${version} installed: ${got}, want ${want}")
  endif()
endfunction()
expect(0.3.2 found)
expect(0.3.2 found 0)
expect(0.3.2 found 0.3)
expect(0.3.2 found 0.3.0)
expect(0.3.2 found 0.3.2)
expect(0.3.2 found 0.3.2 EXACT)
expect(0.3.2 found 0.2...<0.4)
expect(0.3.2 found 0.3.1...0.3.2)
expect(0.3.2 "not found" 0.3.3)
expect(0.3.2 "not found" 0.2)
expect(0.3.2 "not found" 0.2.9)
expect(0.3.2 "not found" 0.4)
expect(0.3.2 "not found" 1)
expect(0.3.2 "not found" 0.3 EXACT)
expect(0.3.2 "not found" 0.1...0.3)
expect(0.3.2 "not found" 0.3.3...0.5)
expect(0.3.2 "not found" 0.2...<0.3.2)
expect(1.2.3 found)
expect(1.2.3 found 1)
expect(1.2.3 found 1.0)
expect(1.2.3 found 1.2.3)
expect(1.2.3 found 1.2.3 EXACT)
expect(1.2.3 found 0.9...2)
expect(1.2.3 "not found" 1.2.4)
expect(1.2.3 "not found" 1.3)
expect(1.2.3 "not found" 2)
expect(1.2.3 "not found" 0.9)
expect(1.2.3 "not found" 1.2 EXACT)
set(CMAKE_SIZEOF_VOID_P 4)
expect(1.2.3 "not found")
EOF
out=$(cmake -DWORK="$work" -P "$work/versions.cmake" 2>&1) ||
  fail "deliqueueConfigVersion.cmake: $out"

# ---- installed: moved to the prefix -----------------------------------------
mkdir -p "$(dirname "$prefix")"
mv "$staged" "$prefix"
build=$work/build
out=$(cmake -S "$src/cmake_consumer" -B "$build" "${cmake_flags[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix" 2>&1) || fail "cmake configure: $out"
grep -qxF -- "-- deliqueue 1.2.3 from $prefix/$libdir/cmake/deliqueue" <<<"$out" ||
  fail "cmake found: $(grep -- '-- deliqueue' <<<"$out")"
out=$(cmake --build "$build" 2>&1) || fail "cmake --build: $out"

soname=$(basename "$shared")
readelf -d "$build/check_shared" | grep -q "NEEDED.*\[$soname\]" ||
  fail "check_shared does not load $soname"
"$build/check_shared" || fail "check_shared exited $?"
out=$(ldd "$build/check_shared")
grep -q "libdeliqueue.so.* => $prefix/$libdir/" <<<"$out" || fail "ldd check_shared: $out"
if readelf -d "$build/check_static" | grep -q "NEEDED.*libdeliqueue"; then
  fail "check_static loads libdeliqueue.so"
fi
"$build/check_static" || fail "check_static exited $?"
echo "PASS: installed with DESTDIR and --libdir $libdir; cmake's find_package built and ran" \
  "deliqueue::deliqueue and deliqueue::deliqueue_static; versions as documented"
