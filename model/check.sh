#!/bin/bash
# model/check.sh: check one Promela model exhaustively with SPIN, as a gate.
#
#   check.sh [--mutant] [--ltl NAME] [--depth N] MODEL.pml [-DMACRO ...]
#
#   (default)     safety: assertions and invalid end states
#                 (cc -DSAFETY -DNOCLAIM; ./pan -m<depth>)
#   --ltl NAME    liveness: the model's ltl NAME, acceptance cycles
#                 (cc -DNFAIR=4; ./pan -m<depth> -a -N NAME)
#   --fair        with --ltl: under weak fairness (pan -f).  Only for a
#                 model whose progress needs it: pan -f does not extend a
#                 run that ends in a deadlock by stuttering, so it cannot
#                 see a consumer stuck for good
#   --mutant      the run must FIND an error (a mutant or a weakening that
#                 SPIN cannot catch fails the gate); the trail is printed
#   --depth N     pan's search depth bound (default 200000)
#
# Fails when: errors != 0 (or == 0 with --mutant); pan reports "max search
# depth too small"; the search is not exhaustive (bitstate, hash-compact,
# or an incomplete search); spin, cc or pan fail.  Works in a fresh
# temporary directory: the source tree is never written.  Needs spin and
# cc on PATH.
set -euo pipefail

mutant=0
fair=0
ltl=""
depth=200000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mutant) mutant=1; shift ;;
    --ltl) ltl="$2"; shift 2 ;;
    --fair) fair=1; shift ;;
    --depth) depth="$2"; shift 2 ;;
    *) break ;;
  esac
done
[[ $# -ge 1 ]] || { echo "usage: $0 [--mutant] [--ltl NAME [--fair]] [--depth N] MODEL.pml [-DMACRO ...]" >&2; exit 2; }
model="$1"; shift
defs=("$@")
for d in "${defs[@]}"; do
  [[ $d == -D* ]] || { echo "check.sh: not a -D macro: $d" >&2; exit 2; }
done
command -v spin >/dev/null || { echo "check.sh: spin not on PATH (apt-get install spin)" >&2; exit 2; }
command -v cc >/dev/null || { echo "check.sh: cc not on PATH" >&2; exit 2; }
[[ -r $model ]] || { echo "check.sh: cannot read $model" >&2; exit 2; }

base="${TEST_TMPDIR:-${TMPDIR:-/tmp}}"
work="$(mktemp -d "$base/spin.XXXXXX")"
trap 'rm -rf "$work"' EXIT
name="$(basename "$model")"
cp "$model" "$work/$name"
cd "$work"

label="$name ${defs[*]:-}"
if [[ -n $ltl ]]; then
  label+=" (ltl $ltl"
  [[ $fair == 1 ]] && label+=", weak fairness"
  label+=")"
fi
echo "== $label"
spin -a "${defs[@]}" "$name" >spin.log 2>&1 || { cat spin.log; echo "FAIL: spin -a"; exit 1; }
if [[ -n $ltl ]]; then
  cc -O2 -DNFAIR=4 -o pan pan.c 2>cc.log || { cat cc.log; echo "FAIL: cc"; exit 1; }
  panargs=(-m"$depth" -a -N "$ltl")
  [[ $fair == 1 ]] && panargs+=(-f)
else
  cc -O2 -DSAFETY -DNOCLAIM -o pan pan.c 2>cc.log || { cat cc.log; echo "FAIL: cc"; exit 1; }
  panargs=(-m"$depth")
fi
set +e
./pan "${panargs[@]}" >pan.out 2>&1
rc=$?
set -e

states="$(sed -n 's/^ *\([0-9e+.]*\) states, stored.*/\1/p' pan.out | head -1)"
vdepth="$(sed -n 's/.*depth reached \([0-9]*\),.*/\1/p' pan.out | head -1)"
errline="$(grep -E 'errors: [0-9]+' pan.out | head -1 || true)"
errors="$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)"
echo "states: ${states:-?}  depth: ${vdepth:-?}  ${errline:+$(echo "$errline" | sed 's/.*\(errors: [0-9]*\).*/\1/')}"

bad=""
[[ -n $errors ]] || bad="no errors line in pan's output (rc $rc)"
grep -q "max search depth too small" pan.out && bad="${bad:+$bad; }max search depth too small"
grep -q "Full statespace search for" pan.out || bad="${bad:+$bad; }not a full state-space search"
grep -qiE "bit ?statespace|hash-compact|hash compact|approximat" pan.out && bad="${bad:+$bad; }approximation in use"
grep -qiE "out of memory|reached -DMEMLIM" pan.out && bad="${bad:+$bad; }out of memory"

if [[ $mutant == 1 ]]; then
  if [[ -z $bad && ${errors:-0} -eq 0 ]]; then
    bad="SPIN found no error: the mutant is not caught"
  fi
  if [[ -z $bad ]]; then
    grep -E "^pan:|violated|invalid end state|acceptance cycle" pan.out | head -5 || true
    spin -t -p "${defs[@]}" ${ltl:+-N "$ltl"} "$name" >trail.txt 2>&1 || true
    echo "-- trail (spin -t -p, first 40 lines)"
    head -40 trail.txt
    echo "-- where each process is at the end of the trail"
    grep -E '^ *[0-9]+:[[:space:]]+proc +[0-9]+ \(' trail.txt | grep -v '\[' | tail -8 || true
  fi
else
  if [[ -z $bad && ${errors:-1} -ne 0 ]]; then
    bad="errors: $errors"
    grep -E "^pan:" pan.out | head -5 || true
    spin -t -p "${defs[@]}" ${ltl:+-N "$ltl"} "$name" 2>&1 | head -60 || true
  fi
  if [[ -z $bad ]] && grep -q "Search not completed" pan.out; then
    bad="search not completed"
  fi
fi

if [[ -n $bad ]]; then
  cat pan.out
  echo "FAIL: $label: $bad"
  exit 1
fi
echo "PASS: $label"
