#!/bin/bash
# tools/bootstrap.sh: make this Debian 12 machine able to build and test
# deliqueue in every config. Idempotent; a machine that is already set up
# takes a couple of seconds (nothing is fetched or unpacked again).
#
#   1. apt packages (Bazel 4.2.3, compilers, qemu-user, system libraries,
#      tools for soak runs and reports); `apt-get update` runs at most once,
#      and only when something is missing.
#   2. The arm64 sysroot .sysroot/arm64 (git-ignored): Debian's arm64 builds
#      of Criterion, Concurrency Kit, liburcu and their runtime dependencies
#      (libc6 included, so it is also QEMU_LD_PREFIX). Unpacked with
#      `dpkg-deb -x`, never installed: the arm64 -dev packages conflict with
#      the amd64 ones. Downloaded .debs are cached in
#      /var/cache/deliqueue/arm64-debs so a fresh clone does not fetch again.
#      Tests find it in their runfiles (//bazel/remote:arm64_run), so no
#      host path reaches a test action.
#   3. binfmt_misc: arm64 ELF files run through qemu-aarch64, so Criterion
#      can re-execute its own test binary.
#   4. buildifier (the pinned BUILDIFIER_VERSION, from npm) in
#      .sysroot/buildifier, for tools/format.
#   5. vm.mmap_rnd_bits <= 28, which clang-14's TSan runtime needs.
#
# Usage: tools/bootstrap.sh [--quiet]
#   --quiet      print errors only
#   -h, --help   print this help and exit; installs nothing
#
# Exit status: 0 the machine is ready; 1 a step failed (its message says
# which); 2 bad usage.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The help is this header (from its second line), the usage its part from
# "Usage:" on.
header() { sed -n "${1:-2},/^set -euo/{/^#/s/^# \{0,1\}//p}" "${BASH_SOURCE[0]}"; }
QUIET=0
for arg in "$@"; do
  case $arg in
    --quiet) QUIET=1 ;;
    -h | --help)
      header
      exit 0
      ;;
    *)
      echo "bootstrap: error: unknown argument '$arg'" >&2
      header '/^# Usage:/' >&2
      exit 2
      ;;
  esac
done
say() { [[ $QUIET == 1 ]] || echo "bootstrap: $*" >&2; }
die() { echo "bootstrap: error: $*" >&2; exit 1; }
# Any other failing command fails the bootstrap with 1 too, never with its
# own status (apt-get's 100, say), so that 2 means bad usage only.
on_error() { die "line $2: a command failed (exit $1)"; }
trap 'on_error $? $LINENO' ERR

SUDO=""
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null && SUDO="sudo" || SUDO="need-root"
fi
as_root() {
  [[ $SUDO == need-root ]] && die "must run as root (or with sudo) to: $*"
  $SUDO "$@"
}
export DEBIAN_FRONTEND=noninteractive

HOST_PACKAGES=(
  bazel-bootstrap
  gcc libc6-dev binutils
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu
  qemu-user qemu-user-binfmt
  # tools/farm --remote=local: Bazel's reference remote worker (compiled
  # from its source with javac) and nginx as an HTTP cache.
  bazel-bootstrap-source default-jdk-headless nginx
  clang-14 libclang-rt-14-dev llvm
  libck-dev libcriterion-dev liburcu-dev
  valgrind gnuplot-nox openssh-server chromium python3
  file dpkg-dev spin trace-cmd
  # xmllint: the farm's and the soak's selftests check their JUnit XML.
  libxml2-utils
  # model/relacy: Relacy Race Detector (header-only) runs the real sources
  # under the C11 memory model.
  relacy-dev
  bazel-skylib bazel-platforms bazel-rules-java
  pkg-config clang-format-14 universal-ctags
  # //deliqueue/dist:cmake_install_test builds against the installed CMake
  # package (find_package, Unix Makefiles); //man:man_pages_test runs
  # groff -man -ww over the manual pages.
  cmake make groff-base
  libuv1-dev libglib2.0-dev
)

# buildifier for tools/format (the lint gate), from npm: the version is
# pinned because another one formats differently.
BUILDIFIER_VERSION=8.2.1

# Roots of the arm64 sysroot; their Depends are followed recursively.
ARM64_ROOTS=(libc6 libgcc-s1 libcriterion-dev libck-dev liburcu-dev)
# Dependencies left out of the sysroot: build tools and the arm64 libc
# headers (the cross compiler brings its own; see bazel/toolchains).
ARM64_EXCLUDE='^(libc6-dev|linux-libc-dev|libcrypt-dev|libnsl-dev|libtirpc-dev|libc-dev-bin|pkg-config|pkgconf|pkgconf-bin|rpcsvc-proto|gcc-12-base|libtirpc-common)$'
# Bump when the recipe below changes, to force a rebuild of the sysroot.
SYSROOT_RECIPE=3

APT_UPDATED=0
apt_update_once() {
  if [[ $APT_UPDATED == 0 ]]; then
    say "apt-get update"
    as_root apt-get update -qq
    APT_UPDATED=1
  fi
}

installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

# ---- 1. apt packages -------------------------------------------------------
missing=()
for p in "${HOST_PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  say "adding dpkg architecture arm64 (for apt-get download only)"
  as_root dpkg --add-architecture arm64
  APT_UPDATED=0
  NEED_ARM64_LISTS=1
else
  NEED_ARM64_LISTS=0
fi
# npm: Debian's package, unless a node.js install already brings its own
# (the Debian package conflicts with those).
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  apt_update_once
  say "installing: ${missing[*]}"
  as_root apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # nginx is only ever started by bazel/remote/local.py, on 127.0.0.1; a
  # fresh install must not leave Debian's service listening on port 80.
  if [[ " ${missing[*]} " == *" nginx "* ]] && command -v systemctl >/dev/null &&
    systemctl is-enabled nginx >/dev/null 2>&1; then
    as_root systemctl disable --now nginx >/dev/null 2>&1 || say "warning: could not stop the nginx service"
  fi
fi

# ---- 2. arm64 sysroot ------------------------------------------------------
SYSROOT="$ROOT/.sysroot/arm64"
STAMP="$SYSROOT/.deliqueue-sysroot"
DEB_CACHE="${DELIQUEUE_DEB_CACHE:-/var/cache/deliqueue/arm64-debs}"
want_stamp="recipe=$SYSROOT_RECIPE roots=${ARM64_ROOTS[*]}"
if [[ -f "$STAMP" && "$(head -1 "$STAMP")" == "$want_stamp" ]]; then
  say "arm64 sysroot up to date"
else
  [[ $NEED_ARM64_LISTS == 1 ]] && apt_update_once
  arm64_closure() {
    apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
      --no-breaks --no-replaces --no-enhances \
      "${ARM64_ROOTS[@]/%/:arm64}" 2>/dev/null |
      grep -E '^[a-z0-9][^ ]*:arm64$' | sed 's/:arm64$//' |
      grep -Ev "$ARM64_EXCLUDE" | sort -u
  }
  pkgs=$(arm64_closure)
  if ! grep -qx libcriterion3 <<<"$pkgs"; then
    apt_update_once          # package lists without arm64 yet
    pkgs=$(arm64_closure)
  fi
  grep -qx libcriterion3 <<<"$pkgs" || die "cannot resolve arm64 packages (apt lists?)"
  as_root mkdir -p "$DEB_CACHE"
  mkdir -p "$ROOT/.sysroot"
  # One apt-cache call for every candidate version ("pkg version" lines).
  versions=$(apt-cache policy $(sed 's/$/:arm64/' <<<"$pkgs") |
    awk '/^[^ ].*:$/ {sub(/:arm64:$/, ""); name = $0} /Candidate:/ {print name, $2}')
  while read -r p ver; do
    # apt writes the epoch colon as %3a in file names.
    file="${p}_${ver//:/%3a}_arm64.deb"
    if [[ ! -s "$DEB_CACHE/$file" ]]; then
      say "downloading $p:arm64 $ver"
      (cd "$DEB_CACHE" && as_root apt-get download -qq "$p:arm64=$ver" 2>&1 |
        grep -v 'unsandboxed as root' >&2 || true)
      [[ -s "$DEB_CACHE/$file" ]] || die "download of $p:arm64 failed"
    fi
    echo "$DEB_CACHE/$file"
  done <<<"$versions" >"$ROOT/.sysroot/debs.tmp"
  tmp="$ROOT/.sysroot/arm64.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  say "unpacking $(wc -l <"$ROOT/.sysroot/debs.tmp") arm64 packages into .sysroot/arm64"
  while read -r deb; do dpkg-deb -x "$deb" "$tmp"; done <"$ROOT/.sysroot/debs.tmp"
  # Absolute symlinks (e.g. a -dev package's libfoo.so -> /lib/...) would
  # point into the host; make them relative inside the sysroot.
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    if [[ $target == /* ]]; then
      rel=$(realpath -m --relative-to="$(dirname "$link")" "$tmp$target")
      ln -sfn "$rel" "$link"
    fi
  done < <(find "$tmp" -type l -print0)
  {
    echo "$want_stamp"
    sed 's#.*/##' "$ROOT/.sysroot/debs.tmp"
  } >"$tmp/.deliqueue-sysroot"
  rm -f "$ROOT/.sysroot/debs.tmp"
  rm -rf "$SYSROOT"
  mv "$tmp" "$SYSROOT"
  say "arm64 sysroot ready: $(du -sh "$SYSROOT" | cut -f1)"
fi

# ---- 3. binfmt_misc for arm64 ELF -----------------------------------------
BINFMT=/proc/sys/fs/binfmt_misc
if [[ ! -e $BINFMT/register ]]; then
  say "mounting binfmt_misc"
  as_root mount -t binfmt_misc binfmt_misc $BINFMT
fi
if [[ ! -e $BINFMT/qemu-aarch64 ]]; then
  conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  [[ -f $conf ]] || die "$conf missing (package qemu-user-binfmt)"
  say "registering qemu-aarch64 with binfmt_misc"
  as_root sh -c "cat $conf > $BINFMT/register"
fi
if ! grep -qx enabled $BINFMT/qemu-aarch64; then
  as_root sh -c "echo 1 > $BINFMT/qemu-aarch64"
fi
if ! grep -qx enabled $BINFMT/status; then
  as_root sh -c "echo 1 > $BINFMT/status"
fi

# ---- 4. buildifier (npm @bazel/buildifier, into .sysroot/buildifier) -------
bf_dir="$ROOT/.sysroot/buildifier"
bf="$bf_dir/node_modules/.bin/buildifier"
if [[ -x $bf ]] && "$bf" --version 2>/dev/null | grep -q "version: $BUILDIFIER_VERSION\b"; then
  :
else
  say "installing buildifier $BUILDIFIER_VERSION (npm @bazel/buildifier)"
  rm -rf "$bf_dir.tmp"
  mkdir -p "$bf_dir.tmp"
  # --ignore-scripts: the package ships its binaries; nothing needs to run.
  npm install --prefix "$bf_dir.tmp" --no-audit --no-fund --ignore-scripts --silent \
    "@bazel/buildifier@$BUILDIFIER_VERSION" >&2 || die "npm install of @bazel/buildifier failed"
  rm -rf "$bf_dir"
  mv "$bf_dir.tmp" "$bf_dir"
fi

# ---- 5. ASLR entropy that TSan (clang 14) supports --------------------------
bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)
if ((bits > 28)); then
  say "vm.mmap_rnd_bits $bits -> 28 (TSan)"
  as_root sysctl -q -w vm.mmap_rnd_bits=28 || say "warning: could not lower vm.mmap_rnd_bits; TSan may fail"
fi

say "ready"
