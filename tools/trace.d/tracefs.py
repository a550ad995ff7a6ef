# SPDX-License-Identifier: Apache-2.0
"""Recording a command's atrace markers and scheduling events from tracefs,
and reading them back.  Python 3 standard library only; needs root.

Two ways to record, tried in this order:
  trace-cmd  `trace-cmd record -e sched:sched_switch CMD`, when a probe
             shows it can record on this kernel (it cannot where function
             tracing is locked: trace-cmd 3.1 then fails or crashes);
  tracefs    the session set up by hand on the top-level instance (the
             buffer cleared, sched_switch on, tracing on), every setting
             put back afterwards; then `trace-cmd extract` saves the
             buffer as a .dat file.
Either way the result is a trace-cmd .dat file, read with `trace-cmd
report`, and (tracefs only) the buffer's text as the kernel prints it,
which ui.perfetto.dev opens directly.  Markers need no event of their own:
the kernel records every trace_marker write as ftrace:print.

As a command (bench/run_all runs bench/trace_cost so):
    python3 tools/trace.d/tracefs.py record OUT_PREFIX CMD [ARG...]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MOUNTS = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]


class TraceError(Exception):
    pass


def tracefs_root(mount=True):
    """The tracefs mount point, mounting it at /sys/kernel/tracing (root)
    when it is not mounted and mount is true."""
    for m in MOUNTS:
        if os.path.exists(os.path.join(m, "trace_marker")):
            return m
    if mount and os.path.isdir(MOUNTS[0]):
        r = subprocess.run(["mount", "-t", "tracefs", "nodev", MOUNTS[0]],
                           capture_output=True, text=True)
        if r.returncode == 0 and os.path.exists(os.path.join(MOUNTS[0], "trace_marker")):
            return MOUNTS[0]
    raise TraceError("tracefs is not mounted and could not be mounted "
                     "(needs root: mount -t tracefs nodev /sys/kernel/tracing)")


def _read(root, name):
    with open(os.path.join(root, name)) as f:
        return f.read().strip()


def _write(root, name, value):
    with open(os.path.join(root, name), "w") as f:
        f.write(value)


def trace_cmd_records():
    """None when `trace-cmd record` works here, else why not."""
    if shutil.which("trace-cmd") is None:
        return "trace-cmd is not installed"
    with tempfile.TemporaryDirectory() as d:
        dat = os.path.join(d, "probe.dat")
        try:
            r = subprocess.run(["trace-cmd", "record", "-o", dat, "-e", "sched:sched_switch",
                                "sh", "-c", "sleep 0.05"],
                               capture_output=True, text=True, timeout=60, cwd=d)
        except subprocess.TimeoutExpired:
            return "trace-cmd record timed out"
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-2:]
            return "trace-cmd record fails here (exit %d: %s)" % (r.returncode, " ".join(why))
        rep = subprocess.run(["trace-cmd", "report", dat], capture_output=True, text=True)
        if "sched_switch" not in rep.stdout:
            return "trace-cmd record recorded no sched_switch event"
    return None


def _tracefs_session(root, cmd, env, buffer_kb, timeout):
    saved = {
        "tracing_on": _read(root, "tracing_on"),
        "buffer_size_kb": _read(root, "buffer_size_kb"),
        "events/sched/sched_switch/enable": _read(root, "events/sched/sched_switch/enable"),
    }
    try:
        _write(root, "tracing_on", "0")
        _write(root, "buffer_size_kb", str(buffer_kb))
        _write(root, "trace", "")
        _write(root, "events/sched/sched_switch/enable", "1")
        _write(root, "tracing_on", "1")
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        finally:
            _write(root, "tracing_on", "0")
    except BaseException:
        for k, v in saved.items():
            _write(root, k, v)
        raise
    return r, saved


def record(cmd, out_prefix, env=None, buffer_kb=65536, timeout=600, backend="auto"):
    """Run cmd under a recording session.  Writes out_prefix.dat (trace-cmd
    format) and, with the tracefs backend, out_prefix.trace (the kernel's
    text, for ui.perfetto.dev).  Returns a dict: backend, why (the reason
    trace-cmd record was not used), dat, text (or None), returncode,
    stdout, stderr of cmd."""
    root = tracefs_root()
    why = None
    if backend == "auto":
        why = trace_cmd_records()
        backend = "trace-cmd" if why is None else "tracefs"
    dat = out_prefix + ".dat"
    out = {"backend": backend, "why": why, "dat": dat, "text": None}
    if backend == "trace-cmd":
        r = subprocess.run(["trace-cmd", "record", "-q", "-b", str(buffer_kb), "-o", dat,
                            "-e", "sched:sched_switch"] + list(cmd),
                           env=env, capture_output=True, text=True, timeout=timeout)
    else:
        r, saved = _tracefs_session(root, cmd, env, buffer_kb, timeout)
        try:
            text = out_prefix + ".trace"
            with open(os.path.join(root, "trace")) as src, open(text, "w") as dst:
                shutil.copyfileobj(src, dst)
            out["text"] = text
            if shutil.which("trace-cmd") is not None:
                x = subprocess.run(["trace-cmd", "extract", "-o", dat],
                                   capture_output=True, text=True, timeout=timeout,
                                   cwd=os.path.dirname(os.path.abspath(dat)))
                if x.returncode != 0:
                    raise TraceError("trace-cmd extract failed: " + x.stderr.strip())
            else:
                out["dat"] = None
        finally:
            _write(root, "trace", "")
            for k, v in saved.items():
                _write(root, k, v)
    out.update(returncode=r.returncode, stdout=r.stdout, stderr=r.stderr)
    return out


# "comm-tid [cpu] [flags] ts: [print:] tracing_mark_write: payload", as
# `trace-cmd report` and the kernel's trace file print a marker write.
_MARKER = re.compile(r"^\s*(?P<comm>.+?)-(?P<tid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(?P<cpu>\d+)\]"
                     r"\s+(?:[\w.]{4,6}\s+)?(?P<ts>\d+\.\d+):\s+(?:print:\s+)?"
                     r"tracing_mark_write:\s(?P<payload>.*)$")


def report_text(dat):
    """`trace-cmd report` of a .dat file."""
    r = subprocess.run(["trace-cmd", "report", dat], capture_output=True, text=True)
    if r.returncode != 0:
        raise TraceError("trace-cmd report failed: " + r.stderr.strip())
    return r.stdout


def markers(text, pid=None):
    """[(ts, tid, payload)] of every marker in a report or trace text, in
    order; with pid, only the markers whose atrace pid field is pid."""
    out = []
    for line in text.splitlines():
        m = _MARKER.match(line)
        if not m:
            continue
        payload = m.group("payload").rstrip()
        if pid is not None:
            f = payload.split("|")
            if len(f) < 2 or f[1] != str(pid):
                continue
        out.append((float(m.group("ts")), int(m.group("tid")), payload))
    return out


def main(argv):
    """tracefs.py record OUT_PREFIX CMD [ARG...]: run CMD under a recording
    session (as record() does), print its standard output and error, and
    exit with its status (2 when nothing could be recorded)."""
    if len(argv) < 3 or argv[0] != "record":
        print("usage: tracefs.py record OUT_PREFIX CMD [ARG...]", file=sys.stderr)
        return 2
    try:
        r = record(argv[2:], argv[1])
    except (TraceError, OSError) as e:
        print("tracefs.py: %s" % e, file=sys.stderr)
        return 2
    sys.stdout.write(r["stdout"])
    sys.stderr.write(r["stderr"])
    return r["returncode"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
