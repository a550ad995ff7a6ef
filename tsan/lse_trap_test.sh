#!/bin/bash
# Proof that --config=arm64-lse really emits LSE atomics: the CAS binary must
# contain a `cas` instruction, die with SIGILL on an ARMv8.0 CPU model
# (cortex-a53) and run cleanly on QEMU's `max` model. The arm64 binary runs
# directly through binfmt_misc; QEMU_LD_PREFIX comes from --run_under
# (//bazel/remote:arm64_run).
#
# usage: lse_trap_test.sh LSE_CAS_BINARY
set -u
bin=$1
fail() { echo "FAIL: $*"; exit 1; }

if command -v aarch64-linux-gnu-objdump >/dev/null; then
  if aarch64-linux-gnu-objdump -d "$bin" | grep -qE $'\tcas(al|a|l)?\t'; then
    echo "ok: $bin contains an LSE cas instruction"
  else
    fail "$bin has no LSE cas instruction (was -march=armv8.1-a applied?)"
  fi
fi

QEMU_CPU=cortex-a53 "$bin"
status=$?
echo "cortex-a53: exit status $status"
# 128 + SIGILL (4)
[[ $status == 132 ]] || fail "expected SIGILL (status 132) on cortex-a53, got $status"
echo "ok: cortex-a53 trapped with SIGILL"

QEMU_CPU=max "$bin" || fail "the LSE binary failed on QEMU_CPU=max (status $?)"
echo "ok: runs on max"
echo "PASS"
