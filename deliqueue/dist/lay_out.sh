#!/bin/bash
# Lays out an installed deliqueue for PREFIX (tools/install builds the
# files with Bazel, then calls this; //deliqueue/dist:install_test,
# :cmake_install_test and //:version_test call it on the same Bazel
# outputs).  LIBDIR is relative to PREFIX (default lib; lib/x86_64-linux-gnu
# for a Debian multiarch layout):
#
#   PREFIX/include/deliqueue/deliqueue.h
#   PREFIX/LIBDIR/libdeliqueue.so.VERSION, .so.SOVERSION -> it, .so -> it
#   PREFIX/LIBDIR/libdeliqueue.a
#   PREFIX/LIBDIR/pkgconfig/deliqueue.pc
#   PREFIX/LIBDIR/cmake/deliqueue/deliqueueConfig.cmake,
#     deliqueueConfigVersion.cmake          with --cmake
#   PREFIX/share/man/man3/*.3, man7/*.7     with --man (MAN_DIR/man3, man7)
#
# The files are written under DESTDIR/PREFIX when --destdir is given (a
# staging tree for a package); what they say names PREFIX alone.
#
# usage: lay_out.sh [--destdir DESTDIR] [--libdir LIBDIR] [--cmake CMAKE_IN_DIR]
#          [--man MAN_DIR] PREFIX VERSION SHARED_LIB STATIC_LIB PC_IN HEADER
# CMAKE_IN_DIR holds deliqueueConfig.cmake.in and deliqueueConfigVersion.cmake.in.
set -euo pipefail
usage() {
  echo "usage: lay_out.sh [--destdir DESTDIR] [--libdir LIBDIR] [--cmake CMAKE_IN_DIR]" \
    "[--man MAN_DIR] PREFIX VERSION SHARED_LIB STATIC_LIB PC_IN HEADER" >&2
  exit 2
}
die() { echo "lay_out.sh: $*" >&2; exit 2; }
destdir="" libdir=lib cmake_in="" man=""
while (($#)) && [[ $1 == --* ]]; do
  (($# >= 2)) || usage
  case $1 in
    --destdir) destdir=$2 ;;
    --libdir) libdir=$2 ;;
    --cmake) cmake_in=$2 ;;
    --man) man=$2 ;;
    *) usage ;;
  esac
  shift 2
done
(($# == 6)) || usage
prefix=$1 version=$2 shared=$3 static=$4 pc_in=$5 header=$6
[[ $prefix == /* ]] || die "PREFIX must be absolute: $prefix"
[[ -z $destdir || $destdir == /* ]] || die "DESTDIR must be absolute: $destdir"
[[ $version =~ ^([0-9]+)\.([0-9]+)(\.[0-9]+)*$ ]] || die "bad VERSION: $version"
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
# LIBDIR: a plain relative path, so that the CMake package can also find
# the prefix from its own place.
if [[ -z $libdir || $libdir == /* || /$libdir/ =~ /\.{1,2}/ || $libdir =~ // || $libdir == */ ]]; then
  die "LIBDIR must be a path relative to PREFIX, without . or .. or empty parts: '$libdir'"
fi
# The .pc and CMake files quote PREFIX and LIBDIR: these characters would
# need escaping that neither pkg-config nor every CMake list can carry, and
# @ would read as a placeholder of the templates.
for v in "$prefix" "$libdir"; do
  [[ $v != *[\"\\\$\;@$'\n']* ]] || die "'$v': PREFIX and LIBDIR cannot contain \" \\ \$ ; @ or a newline"
done
for f in "$shared" "$static" "$pc_in" "$header" ${cmake_in:+"$cmake_in"/deliqueueConfig.cmake.in \
  "$cmake_in"/deliqueueConfigVersion.cmake.in}; do
  [[ -f $f ]] || die "no such file: $f"
done
[[ -z $man || (-d $man/man3 && -d $man/man7) ]] || die "no man3 and man7 under $man"
# The soname's file name (libdeliqueue.so.N) is what programs load.
soname=$(basename "$shared")
[[ $soname =~ ^libdeliqueue\.so\.[0-9]+$ ]] || die "$shared is not named libdeliqueue.so.N"

root=$destdir$prefix
lib=$root/$libdir
mkdir -p "$root/include/deliqueue" "$lib/pkgconfig"
install -m 644 "$header" "$root/include/deliqueue/deliqueue.h"
install -m 755 "$shared" "$lib/libdeliqueue.so.$version"
ln -sfn "libdeliqueue.so.$version" "$lib/$soname"
ln -sfn "$soname" "$lib/libdeliqueue.so"
install -m 644 "$static" "$lib/libdeliqueue.a"

# Templates: @NAME@ replaced by its value, with the characters sed would
# read as syntax escaped.
subst=()
add_subst() { subst+=(-e "s|@$1@|$(printf '%s' "$2" | sed 's/[&|\\]/\\&/g')|g"); }
add_subst VERSION "$version"
add_subst MAJOR "$major"
add_subst MINOR "$minor"
add_subst SONAME "$soname"
fill() { # TEMPLATE OUT
  sed "${subst[@]}" "$1" >"$2"
  chmod 644 "$2"
  if grep -n '@[A-Z_]*@' "$2" >&2; then die "$1: placeholders left (above)"; fi
}
# Pointer size from the ELF class of the shared library (CMake offers a
# package only to builds of the same size).
case $(od -An -tu1 -j4 -N1 "$shared" | tr -d ' ') in
  1) add_subst SIZEOF_VOID_P 4 && add_subst BITS 32 ;;
  2) add_subst SIZEOF_VOID_P 8 && add_subst BITS 64 ;;
  *) die "$shared is not an ELF file" ;;
esac
# From LIBDIR/cmake/deliqueue up to PREFIX.
up=..
IFS=/ read -ra parts <<<"$libdir/cmake"
for _ in "${parts[@]}"; do up+=/..; done
add_subst UP "$up"
add_subst LIBDIR "$libdir"
add_subst PREFIX "$prefix"

fill "$pc_in" "$lib/pkgconfig/deliqueue.pc"
if [[ -n $cmake_in ]]; then
  mkdir -p "$lib/cmake/deliqueue"
  for f in deliqueueConfig.cmake deliqueueConfigVersion.cmake; do
    fill "$cmake_in/$f.in" "$lib/cmake/deliqueue/$f"
  done
fi
if [[ -n $man ]]; then
  mkdir -p "$root/share/man/man3" "$root/share/man/man7"
  install -m 644 "$man"/man3/*.3 "$root/share/man/man3/"
  install -m 644 "$man"/man7/*.7 "$root/share/man/man7/"
fi
