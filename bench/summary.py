#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/summary.py QUEUE_BENCH_JSON: the headline figures of one
queue_bench run, as a Markdown table.

Each row is a ratio between deliqueue and one opponent, oriented so that
above 1x means deliqueue did better, given as the median of the
per-repetition ratios and their range over the repetitions (never the best
one), beside the same figure for deliqueue_twin (deliqueue against its own
copy: what noise alone makes of that ratio in this run).  A row whose
metric the run did not measure is left out.  Exit 2 on a file that is not
queue_bench JSON.
"""

import json
import statistics
import sys

# (label, metric name, opponent, how the ratio reads)
# "cost": opponent / deliqueue on a lower-is-better metric, "rate":
# deliqueue / opponent on a higher-is-better one, "floor": deliqueue / floor
# (a cost relative to the bare push: lower is closer).
HEADLINES = [
    ("insert at depth 100k, 1 producer: legacy's cost / deliqueue's",
     "insert cost, depth 100000, 1 producer", "legacy", "cost"),
    ("insert at depth 100k, 2 producers: legacy's cost / deliqueue's",
     "insert cost, depth 100000, 2 producers", "legacy", "cost"),
    ("push at depth 10k, 1 producer: deliqueue's cost / the floor's",
     "insert cost, depth 10000, 1 producer", "floor", "floor"),
    ("insert throughput at depth 10k, 2 producers: deliqueue / mutex_heap",
     "insert throughput, depth 10000, 2 producers", "mutex_heap", "rate"),
    ("insert throughput at depth 10k, 2 producers: deliqueue / urcu_handoff",
     "insert throughput, depth 10000, 2 producers", "urcu_handoff", "rate"),
    ("steady post-to-delivery p99 at depth 10k: ck_handoff's / deliqueue's",
     "post-to-delivery p99, steady, depth 10000, 1 producer", "ck_handoff", "cost"),
    ("steady post-to-delivery p99 at depth 10k: urcu_handoff's / deliqueue's",
     "post-to-delivery p99, steady, depth 10000, 1 producer", "urcu_handoff", "cost"),
    ("heap hold at depth 100k, ms keys: branchy comparator / branchless",
     "heap hold (pop+push), depth 100000, due times in ms (ties)", "branchy", "cost"),
]


def ratios(cols, base, other, how):
    """Per-repetition ratios in the row's sense, where both have a sample."""
    out = []
    for b, o in zip(cols[base]["samples"], cols[other]["samples"]):
        if b is None or o is None or b <= 0 or o <= 0:
            continue
        out.append(b / o if how in ("rate", "floor") else o / b)
    return out


def fmt(r):
    if r >= 100:
        return f"{r:,.0f}x"
    if r >= 10:
        return f"{r:.1f}x"
    return f"{r:.2f}x"


def span(rs):
    return f"{fmt(statistics.median(rs))} ({fmt(min(rs))}-{fmt(max(rs))})"


def main(argv):
    if len(argv) != 2:
        print("usage: bench/summary.py QUEUE_BENCH_JSON", file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            run = json.load(f)
        metrics = {m["name"]: m for m in run["metrics"]}
        reps = run["run"]["repetitions"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"summary.py: {argv[1]}: not queue_bench JSON ({e})", file=sys.stderr)
        return 2
    plural = "s" if reps != 1 else ""
    print(f"The median of the per-repetition ratios over {reps} repetition{plural} "
          "and, in brackets, their range; above 1x deliqueue did better, except "
          "on the push row (a cost over the floor's: 1x is the floor).  The twin "
          "column is the same ratio between deliqueue and its own copy: noise.")
    print()
    print("| figure | this run | deliqueue_twin (noise) |")
    print("|---|---:|---:|")
    for label, name, opponent, how in HEADLINES:
        m = metrics.get(name)
        if m is None:
            continue
        cols = m["columns"]
        base, twin = ("branchless", "branchless_twin") if m["group"] == "heap" \
            else ("deliqueue", "deliqueue_twin")
        if opponent not in cols or base not in cols:
            continue
        rs = ratios(cols, base, opponent, how)
        if not rs:
            continue
        # the twin in the opponent's place: the same ratio between two copies
        ts = ratios(cols, base, twin, "rate" if how == "floor" else how) if twin in cols else []
        print(f"| {label} | {span(rs)} | {span(ts) if ts else '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
