#!/bin/bash
# Runs an arm64 test (binary or script) with the arm64 sysroot from its own
# runfiles: `arm64_run.sh PROGRAM ARGS...`. Used as --run_under by the arm64
# configs, so the test action needs no host path: the sysroot's shared
# objects are declared inputs, and their location is found here, at run
# time, wherever the action runs.
#
# Under qemu-user (x86_64 host or worker) QEMU_LD_PREFIX points qemu's ELF
# loader at the sysroot; it is inherited by everything the test starts, so a
# binary that re-executes itself through binfmt_misc finds it too. On an
# aarch64 machine the binary runs natively, and LD_LIBRARY_PATH puts the
# sysroot's libraries (Criterion, ck, liburcu, what they need and the C
# library they were built against) ahead of the machine's own; that C
# library is Debian 12's, like the worker image's loader.
set -euo pipefail

runfiles=${TEST_SRCDIR:-${RUNFILES_DIR:-$0.runfiles}}
sysroot=$runfiles/deliqueue_arm64_sysroot
if [[ ! -e $sysroot/lib/ld-linux-aarch64.so.1 ]]; then
  echo "arm64_run: no arm64 sysroot in the runfiles ($sysroot)" >&2
  exit 2
fi
# qemu resolves the prefix against its own working directory, and a test
# may change directory: make it absolute.
[[ $sysroot == /* ]] || sysroot=$PWD/$sysroot
(($# > 0)) || { echo "usage: arm64_run.sh PROGRAM [ARGS...]" >&2; exit 2; }

case "$(uname -m)" in
  aarch64 | arm64)
    export LD_LIBRARY_PATH="$sysroot/lib/aarch64-linux-gnu:$sysroot/usr/lib/aarch64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    ;;
  *)
    export QEMU_LD_PREFIX=$sysroot
    ;;
esac
exec "$@"
