#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""trace_record_test WORKLOAD TRACEFS_PY: record trace_workload with its
markers and the kernel's sched_switch events (tools/trace.d/tracefs.py:
trace-cmd record, or tracefs and trace-cmd extract where trace-cmd record
cannot run), read them back with `trace-cmd report`, and check that

  - every post is there (one post instant per accepted post),
  - every delivery is there (one dispatch slice per dispatched message),
  - every cancel and every removal is there,
  - posts = deliveries + cancels + removals + what the quit dropped,
  - each thread's slices balance (no E without a B, none left open),
  - the consumer slept (sleep slices) and sched_switch events were
    recorded for the workload's threads,
  - at each quiescent point the last backlog counter equals dq_pending.

Needs root (tracefs).  Exit 0 when all hold, 1 with the reasons if not."""
import importlib.util
import os
import re
import sys
import tempfile


def load_tracefs(path):
    spec = importlib.util.spec_from_file_location("tracefs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check(text, summary, tracefs):
    errors = []
    counts = dict(kv.split("=") for kv in summary.split())
    counts = {k: int(v) for k, v in counts.items()}
    pid = counts["pid"]
    marks = tracefs.markers(text, pid=pid)
    if not marks:
        return ["no marker of pid %d in the report" % pid]
    name = "dq:rec "
    posts = [p for _, _, p in marks if p.startswith("I|%d|%spost what=" % (pid, name))]
    dispatches = [p for _, _, p in marks if p.startswith("B|%d|%sdispatch what=" % (pid, name))]
    cancels = [p for _, _, p in marks if p.startswith("I|%d|%scancel " % (pid, name))]
    removes = [p for _, _, p in marks if p.startswith("I|%d|%sremove " % (pid, name))]
    sleeps = [p for _, _, p in marks if p.startswith("B|%d|%ssleep " % (pid, name))]
    for what, got, want in (("post instants", len(posts), counts["posted"]),
                            ("dispatch slices", len(dispatches), counts["delivered"]),
                            ("cancel instants", len(cancels), counts["cancelled"]),
                            ("remove instants", len(removes), counts["removed"])):
        if got != want:
            errors.append("%s: %d in the trace, %d by the workload's count" % (what, got, want))
    unique = [p for p in posts if " what=-1 " not in p]  # -1: the sync messages
    if len(set(unique)) != len(unique):
        errors.append("a post instant appears twice")
    accounted = counts["delivered"] + counts["cancelled"] + counts["removed"] + counts["dropped"]
    if counts["posted"] != accounted:
        errors.append("posted %d != delivered + cancelled + removed + dropped = %d"
                      % (counts["posted"], accounted))
    if not sleeps:
        errors.append("no sleep slice")

    depth = {}
    for ts, tid, p in marks:
        if p.startswith("B|"):
            depth[tid] = depth.get(tid, 0) + 1
        elif p.startswith("E|"):
            depth[tid] = depth.get(tid, 0) - 1
            if depth[tid] < 0:
                errors.append("thread %d: an E without a B at %.6f" % (tid, ts))
                depth[tid] = 0
    for tid, d in depth.items():
        if d:
            errors.append("thread %d: %d slice(s) left open" % (tid, d))

    tids = {tid for _, tid, _ in marks}
    switches = [l for l in text.splitlines()
                if "sched_switch" in l and any(":%d " % t in l or "=%d " % t in l
                                               for t in tids)]
    if not switches:
        errors.append("no sched_switch event of the workload's threads")

    backlog = None
    checks = 0
    counter = re.compile(r"^C\|%d\|%sbacklog\|(\d+)$" % (pid, re.escape(name)))
    for _, _, p in marks:
        m = counter.match(p)
        if m:
            backlog = int(m.group(1))
            continue
        if p.startswith("I|%d|check pending=" % pid):
            checks += 1
            pending = int(p.split("=")[1])
            if backlog != pending:
                errors.append("quiescent point %d: backlog counter %s, dq_pending %d"
                              % (checks, backlog, pending))
    if checks != 3:
        errors.append("%d quiescent-point markers, want 3" % checks)
    return errors


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    workload, tracefs_py = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        print("trace_record_test: needs root (tracefs)", file=sys.stderr)
        return 1
    tracefs = load_tracefs(tracefs_py)
    out_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or tempfile.mkdtemp()
    rec = tracefs.record([os.path.abspath(workload)], os.path.join(out_dir, "trace_workload"),
                         buffer_kb=16384, timeout=120)
    print("trace_record_test: recorded with %s%s" % (
        rec["backend"], "" if rec["why"] is None else " (%s)" % rec["why"]))
    if rec["returncode"] != 0:
        print("trace_record_test: the workload failed (exit %d): %s"
              % (rec["returncode"], rec["stderr"].strip()), file=sys.stderr)
        return 1
    summary = rec["stdout"].strip().splitlines()[-1]
    print("trace_record_test: workload: " + summary)
    errors = check(tracefs.report_text(rec["dat"]), summary, tracefs)
    for e in errors:
        print("trace_record_test: FAIL: " + e, file=sys.stderr)
    if errors:
        return 1
    print("trace_record_test: every post, delivery, cancel and removal is in the trace; "
          "slices balance; the backlog counter equals dq_pending at 3 quiescent points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
