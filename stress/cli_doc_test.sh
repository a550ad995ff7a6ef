#!/bin/bash
# dq_stress's command line is a contract (tools/soak relies on it):
# stress/README.md's section "The CLI" names exactly the flags that
# `dq_stress --help` prints, and dq_stress accepts each flag it prints.
#
# usage: cli_doc_test.sh DQ_STRESS README
set -euo pipefail
bin=$1 readme=$2
work=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*" >&2; exit 1; }
flags_in() { grep -oE -- '--[a-z][a-z0-9-]*' "$1" | sort -u; }

status=0
"$bin" --help >"$work/help" 2>"$work/help.err" || status=$?
((status == 0)) || { cat "$work/help.err" >&2; fail "dq_stress --help exited $status, not 0"; }
[[ ! -s $work/help.err ]] || { cat "$work/help.err" >&2; fail "dq_stress --help wrote to stderr"; }
flags_in "$work/help" >"$work/printed"
[[ -s $work/printed ]] || fail "dq_stress --help prints no --flag"

# The section: from its heading to the next heading of its level.
awk '/^## The CLI/ { on = 1; next } on && /^## / { exit } on' "$readme" >"$work/section"
[[ -s $work/section ]] || fail "$readme has no section '## The CLI'"
flags_in "$work/section" >"$work/documented"

if ! diff -u --label "README.md, The CLI" --label "dq_stress --help" \
    "$work/documented" "$work/printed"; then
  fail "the README's CLI section and dq_stress --help name different flags" \
    "(- README only, + --help only): update stress/README.md"
fi

# Every printed flag is one the parser takes: with a value that is no
# number, a numeric flag is refused for its value, and a string flag is
# taken and the made-up flag after it refused.
probe() {
  status=0
  "$bin" "$@" </dev/null >/dev/null 2>"$work/probe.err" || status=$?
  ((status == 2)) || fail "dq_stress $* exited $status, not 2 (usage)"
  head -n 1 "$work/probe.err"
}
[[ $(probe --no-such-flag=1) == "dq_stress: unknown option '--no-such-flag'" ]] ||
  fail "dq_stress does not refuse a made-up flag: $(cat "$work/probe.err")"
n=0
while read -r flag; do
  [[ $flag != --help ]] || continue
  got=$(probe "$flag=x" --no-such-flag=1)
  case "$got" in
    "dq_stress: bad value for $flag: 'x'" | "dq_stress: unknown option '--no-such-flag'") ;;
    *) fail "dq_stress --help prints $flag, but the parser answers: $got" ;;
  esac
  n=$((n + 1))
done <"$work/printed"
echo "PASS: README.md and dq_stress --help name the same $(wc -l <"$work/printed") flags;" \
  "the parser takes all $n that take a value"
