#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tools/check_layers against the real sources (passes), then against
# copies with one planted fault each, which it must refuse with the
# message that names the fault.
#   selftest.sh CHECK_LAYERS DESIGN_MD SRC_FILE...
set -uo pipefail
check="$1" design="$2"
shift 2
work="${TEST_TMPDIR:-$(mktemp -d)}/layers"
fails=0

expect() { # expect NAME EXIT PATTERN: run the checker on $work/src
  local name="$1" want="$2" pattern="$3" out rc
  out=$("$check" --src "$work/src" --map "$work/DESIGN.md" 2>&1)
  rc=$?
  if [[ $rc == "$want" ]] && grep -qE "$pattern" <<<"$out"; then
    echo "PASS $name"
  else
    echo "FAIL $name: exit $rc (want $want), output:"
    echo "$out"
    fails=$((fails + 1))
  fi
}

fresh() {
  rm -rf "$work" && mkdir -p "$work/src"
  cp "$@" "$work/src/" && cp "$design" "$work/DESIGN.md"
  chmod -R u+w "$work"
}

fresh "$@"
expect "the sources as they are" 0 "all downward, no cycle"

fresh "$@"
printf '\nvoid dq_planted(dq_queue *q)\n{\n    (void)dq_post(q, NULL, NULL);\n}\n' >>"$work/src/core.c"
expect "a back-call from the shared floor into an entry point" 1 \
  "core.c \(floor 2\) -> any_post.c \(floor 4\): up a floor: dq_post"

fresh "$@"
printf '\nvoid dq_planted(dq_queue *q)\n{\n    (void)dq_cancel(q, 1);\n}\n' >>"$work/src/looper.c"
expect "the consumer calling across into an any-thread file" 1 \
  "looper.c -> any_claim.c: across the top floor"

fresh "$@"
printf '\nvoid dq_planted(void)\n{\n    (void)dq_users_enter(NULL);\n}\n' >>"$work/src/core_fd.c"
expect "a cycle inside the shared floor" 1 "cycle: .*core_fd.c"

fresh "$@"
printf '#include "queue.h"\n' >"$work/src/unmapped.h"
expect "a file the source map does not name" 1 "unmapped.h: not in the source map"

[[ $fails == 0 ]] && echo "check_layers selftest: all passed" || echo "check_layers selftest: $fails failed"
exit $((fails != 0))
