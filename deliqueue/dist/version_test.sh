#!/bin/bash
# deliqueue's version is written in one place, MODULE.bazel's
# module(version = ...); everything else that states it must agree:
#
#   - the header's DQ_VERSION_MAJOR, _MINOR, _PATCH, and DQ_VERSION
#     (MAJOR << 16 | MINOR << 8 | PATCH);
#   - dq_version() of the shared library, called at run time;
#   - the Version line of the pkg-config file and the PACKAGE_VERSION of
#     deliqueueConfigVersion.cmake, laid out as tools/install lays them out;
#   - the shared library's soname, libdeliqueue.so.MAJOR (SOVERSION in
#     deliqueue/dist/symbols.bzl).
#
# Every disagreement is reported, each naming the file to change, so that a
# new version is one run away from complete.
#
# usage: version_test.sh MODULE_BAZEL MODULE_VERSION_SH VERSION_CHECK
#          SHARED_LIB LAY_OUT STATIC_LIB PC_IN HEADER CMAKE_CONFIG_IN
set -euo pipefail
module=$1 module_version=$2 check=$3 shared=$4 lay_out=$5 static=$6 pc_in=$7 header=$8
cmake_in=$(dirname "$9")
work=${TEST_TMPDIR:?run under bazel test}/version
problems=0
fail() {
  echo "FAIL: $*" >&2
  problems=$((problems + 1))
}

version=$("$module_version" "$module")
IFS=. read -r major minor patch <<<"$version"
echo "MODULE.bazel: $version"

# The header's macros and the library's dq_version().
out=$("$check" "$shared") || { echo "FAIL: version_check $shared: $out" >&2; exit 1; }
read -r _ header_version header_packed <<<"$(grep '^header ' <<<"$out")"
library_version=$(sed -n 's/^library //p' <<<"$out")
echo "deliqueue.h: $header_version ($header_packed); dq_version(): $library_version"
[[ $header_version == "$version" ]] ||
  fail "deliqueue.h's DQ_VERSION_MAJOR/_MINOR/_PATCH say $header_version," \
    "MODULE.bazel says $version"
if ((minor > 255 || patch > 255)); then
  fail "$version: DQ_VERSION has 8 bits for MINOR and 8 for PATCH"
fi
IFS=. read -r h_major h_minor h_patch <<<"$header_version"
packed=$(((h_major << 16) | (h_minor << 8) | h_patch))
[[ $header_packed == "$packed" ]] ||
  fail "deliqueue.h's DQ_VERSION is $header_packed, not its $header_version packed" \
    "(MAJOR << 16 | MINOR << 8 | PATCH = $packed)"
[[ $library_version == "$version" ]] ||
  fail "dq_version() of $(basename "$shared") returns '$library_version'," \
    "MODULE.bazel says $version (deliqueue/src/version.c spells the header's macros)"

# The pkg-config file and the CMake package, from the version tools/install
# reads.
"$lay_out" --cmake "$cmake_in" "$work/prefix" "$version" "$shared" "$static" "$pc_in" "$header"
pc=$work/prefix/lib/pkgconfig/deliqueue.pc
pc_version=$(sed -n 's/^Version: *//p' "$pc")
echo "deliqueue.pc: Version: $pc_version"
[[ $pc_version == "$version" ]] ||
  fail "deliqueue.pc says Version: '$pc_version', MODULE.bazel says $version" \
    "(deliqueue/dist/deliqueue.pc.in should say Version: @VERSION@)"
cmake_version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' \
  "$work/prefix/lib/cmake/deliqueue/deliqueueConfigVersion.cmake")
echo "deliqueueConfigVersion.cmake: PACKAGE_VERSION $cmake_version"
[[ $cmake_version == "$version" ]] ||
  fail "deliqueueConfigVersion.cmake says PACKAGE_VERSION '$cmake_version'," \
    "MODULE.bazel says $version (deliqueue/dist/deliqueueConfigVersion.cmake.in" \
    "should say set(PACKAGE_VERSION \"@VERSION@\"))"

# The soname's number is the major version.
soname=$(readelf -d "$shared" | sed -nE 's/.*Library soname: \[(.*)\]/\1/p')
echo "soname: $soname"
[[ $soname == "libdeliqueue.so.$major" ]] ||
  fail "the soname is '$soname', not libdeliqueue.so.$major for $version" \
    "(SOVERSION in deliqueue/dist/symbols.bzl)"

if ((problems)); then
  echo "FAIL: $problems place(s) disagree with MODULE.bazel's version $version" >&2
  exit 1
fi
echo "PASS: MODULE.bazel, deliqueue.h, dq_version(), deliqueue.pc, the CMake package" \
  "and the soname all say $version"
