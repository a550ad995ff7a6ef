"""Runs: one (target, config, seed) each, driven through its transport, and
the bounded-parallel scheduler with the live progress line.

Verdicts:
  PASS    exit 0 and a JSON summary saying "pass" with 0 violations
  FAILED  the binary reported a violation (exit 1 / "result":"fail")
  LOST    anything else: killed by a signal, no JSON, hung past the limit
          (duration + grace), lost connection, could not be started,
          exited early, exit 2 (usage).  Never counted as passed.

Thread contract: each Run is driven by exactly one worker thread
(Run.execute); the scheduler thread only reads the fields the worker
publishes (state, progress, verdict), each a single reference assignment.
"""

import json
import os
import re
import shutil
import sys
import threading
import time

import targets as targets_mod
import transports

PASS, FAILED, LOST = "PASS", "FAILED", "LOST"

PROGRESS_RE = re.compile(r"(\w+)=([-\d.]+)")


def parse_progress(line):
    return {k: float(v) for k, v in PROGRESS_RE.findall(line or "")}


class Run:
    def __init__(self, target, seed, duration, stress_flags, limit, opts, run_dir):
        self.target, self.seed, self.duration = target, seed, duration
        self.stress_flags = stress_flags  # list of --name=value, without duration/seed/json
        self.limit = limit                # seconds; the binary is killed after this
        self.opts, self.run_dir = opts, run_dir
        self.binary = None                # local path of the binary for target.config
        self.state = "pending"            # pending | starting | running | done
        self.verdict, self.reason = None, ""
        self.rc = None
        self.summary = None
        self.progress = {}
        self.started = self.ended = None
        self.violation_lines = []
        self.binary_repro = ""
        self.direct_repro = ""
        self.transport = None
        self.unreachable = ""             # set when the target failed its probe

    @property
    def id(self):
        return "%s__seed%d" % (self.target.slug, self.seed)

    def argv(self, with_json=True):
        a = ["--duration=%g" % self.duration, "--seed=%d" % self.seed] + self.stress_flags
        return a + (["--json=summary.json"] if with_json else [])

    def wall(self):
        if not self.started:
            return 0.0
        return (self.ended or time.time()) - self.started

    def hours(self):
        if self.summary and isinstance(self.summary.get("duration_s"), (int, float)):
            return self.summary["duration_s"] / 3600.0
        if self.progress.get("elapsed"):
            return self.progress["elapsed"] / 3600.0
        return self.wall() / 3600.0 if self.state == "running" else 0.0

    def ops(self):
        if self.summary and isinstance(self.summary.get("ops"), int):
            return self.summary["ops"]
        return int(self.progress.get("ops", 0))

    def violations(self):
        if self.summary and isinstance(self.summary.get("violations"), int):
            return self.summary["violations"]
        return int(self.progress.get("violations", 0)) + (1 if self.verdict == FAILED and
                                                           not self.progress else 0)

    def peak_rss_kb(self):
        if self.summary and isinstance(self.summary.get("peak_rss_kb"), int):
            return self.summary["peak_rss_kb"]
        return int(self.progress.get("rss_kb", 0)) or None

    def pool_reserved_kb(self):
        """The library's own count of the memory it holds (dq_pool_stats):
        the peak, or the last progress line's for a run without a summary."""
        if self.summary and isinstance(self.summary.get("pool_peak_reserved_kb"), int):
            return self.summary["pool_peak_reserved_kb"]
        return int(self.progress.get("pool_reserved_kb", 0)) or None

    # ------------------------------------------------------------------
    def execute(self):
        """Worker thread body: copy, run, poll, fetch, classify, clean up."""
        os.makedirs(self.run_dir, exist_ok=True)
        self.state = "starting"
        self.started = time.time()
        try:
            self._execute()
        except Exception as e:  # the launcher must never lose a run silently
            self.finish(LOST, "launcher error: %s: %s" % (type(e).__name__, e))
        finally:
            try:
                if self.transport and not self.opts.keep_remote:
                    self.transport.cleanup()
            except Exception as e:
                self.reason += " (cleanup failed: %s)" % e
            self.ended = self.ended or time.time()
            self.state = "done"
            self.write_record()

    def _execute(self):
        if self.unreachable:
            return self.finish(LOST, "target unreachable at start: %s" % self.unreachable)
        if not self.binary:
            return self.finish(LOST, "no binary for config %s (%s)" %
                               (self.target.config, self.opts.missing.get(self.target.config,
                                                                          "not built")))
        self.transport = transports.make(self.target, self.run_dir, self.opts)
        self.direct_repro = self.transport.direct_command(self.binary, self.argv(False))
        try:
            self.transport.copy(self.binary)
            self.transport.run(self.argv(), self.limit)
        except Exception as e:
            return self.finish(LOST, "could not start on %s: %s" % (self.target.name, e))
        self.started = time.time()
        self.state = "running"
        self.save_transport()
        remote = self.target.kind in ("ssh", "adb")
        interval = self.opts.poll_interval or (2.0 if remote else 0.5)
        unreachable_since = None
        backstop = self.started + self.limit + transports.KILL_GRACE_S + 10
        while True:
            time.sleep(interval)
            if self.opts.stop.is_set():
                self.transport.kill()
                self.fetch_quietly()
                return self.finish(LOST, "interrupted: the launcher was stopped")
            st = self.transport.poll()
            if st.progress:
                self.progress = parse_progress(st.progress)
            now = time.time()
            if st.state == "running":
                unreachable_since = None
                if now > backstop:
                    self.transport.kill()
                    return self.finish(LOST, "no exit status %ds after the %ds limit" %
                                       (now - self.started - self.limit, self.limit))
                continue
            if st.state == "unreachable":
                unreachable_since = unreachable_since or now
                if now - unreachable_since > self.opts.connection_grace or now > backstop + \
                        self.opts.connection_grace:
                    return self.finish(LOST, "connection lost: %s unreachable for %ds (%s)" %
                                       (self.target.name, now - unreachable_since, st.reason))
                continue
            if st.state == "lost":
                self.ended = now
                self.fetch_quietly()
                return self.finish(LOST, st.reason)
            self.ended = now
            self.rc = st.rc
            self.transport.fetch(self.run_dir)
            return self.classify()

    def fetch_quietly(self):
        try:
            self.transport.fetch(self.run_dir)
        except Exception:
            pass

    def save_transport(self):
        with open(os.path.join(self.run_dir, "transport.json"), "w") as f:
            json.dump(self.transport.describe(), f)

    def finish(self, verdict, reason=""):
        self.verdict, self.reason = verdict, reason
        self.ended = self.ended or time.time()
        self.scan_stderr()

    def read(self, name):
        try:
            with open(os.path.join(self.run_dir, name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def scan_stderr(self):
        text = self.read("stderr.log")
        self.violation_lines = [l for l in text.splitlines() if l.startswith("VIOLATION")][:20]
        for l in text.splitlines():
            if l.startswith("repro:"):
                self.binary_repro = l[len("repro:"):].strip()
        prog = [l for l in text.splitlines() if l.startswith("progress ")]
        if prog:
            self.progress = parse_progress(prog[-1])

    def load_summary(self):
        for text in (self.read("summary.json"), self.last_stdout_line()):
            text = text.strip()
            if not text:
                continue
            try:
                s = json.loads(text)
            except ValueError:
                continue
            if isinstance(s, dict) and "result" in s:
                return s
        return None

    def last_stdout_line(self):
        lines = [l for l in self.read("stdout.log").splitlines() if l.strip()]
        return lines[-1] if lines else ""

    def classify(self):
        rc = self.rc
        self.summary = self.load_summary()
        if self.summary and self.summary.get("repro"):
            self.binary_repro = self.summary["repro"]
        s = self.summary
        timed_out = rc in (124, 137) and self.wall() >= self.limit - 1
        if timed_out:
            return self.finish(LOST, "hung: still running at the %ds limit (duration %gs + "
                                     "grace), killed by timeout (exit %d)" %
                               (self.limit, self.duration, rc))
        if rc is not None and rc > 128 and rc < 160 and not (s and rc == 1):
            return self.finish(LOST, "killed by signal %d (exit status %d)%s" %
                               (rc - 128, rc, "" if s else ", no JSON summary"))
        if rc == 2:
            return self.finish(LOST, "the stress binary rejected its arguments (exit 2, usage)")
        if s is None:
            return self.finish(LOST, "exit %s without a JSON summary" % rc)
        viol = s.get("violations")
        if rc == 1 or s.get("result") == "fail" or (isinstance(viol, int) and viol > 0):
            self.finish(FAILED, "violation reported (exit %s, violations=%s)" % (rc, viol))
            if rc != 1:
                self.reason += "; inconsistent exit status %s" % rc
            return None
        if rc != 0 or s.get("result") != "pass":
            return self.finish(LOST, "inconsistent result: exit %s, result %r" %
                               (rc, s.get("result")))
        ran = s.get("duration_s")
        if isinstance(ran, (int, float)) and ran < 0.8 * self.duration - 2:
            return self.finish(LOST, "exited early: ran %.1fs of %gs" % (ran, self.duration))
        return self.finish(PASS, "")

    def record(self):
        return {
            "id": self.id, "target": self.target.name, "config": self.target.config,
            "target_spec": self.target.spec(), "kind": self.target.kind,
            "cpu": self.target.cpu, "arch": self.target.arch, "seed": self.seed,
            "duration": self.duration, "limit_s": self.limit, "stress_flags": self.stress_flags,
            "binary": self.binary, "verdict": self.verdict, "reason": self.reason,
            "exit_status": self.rc, "wall_s": round(self.wall(), 2),
            "hours": self.hours(), "ops": self.ops(), "violations": self.violations(),
            "peak_rss_kb": self.peak_rss_kb(), "pool_reserved_kb": self.pool_reserved_kb(),
            "run_dir": self.run_dir,
            "violation_lines": self.violation_lines, "binary_repro": self.binary_repro,
            "direct_repro": self.direct_repro, "launcher_repro": self.opts.launcher_repro(self),
            "summary": self.summary, "expected_atomics": targets_mod.expected_atomics(self.target),
        }

    def write_record(self):
        try:
            with open(os.path.join(self.run_dir, "run.json"), "w") as f:
                json.dump(self.record(), f, indent=1)
        except OSError:
            pass


# ----------------------------------------------------------------------
def human(n):
    n = float(n)
    for unit in ("", "k", "M", "G", "T"):
        if abs(n) < 1000:
            return ("%.0f%s" if unit == "" else "%.1f%s") % (n, unit)
        n /= 1000
    return "%.1fP" % n


class Scheduler:
    """Starts runs with at most `jobs` at a time (and one at a time per
    exclusive target: a remote machine is not made to run two soaks at once),
    and prints the live progress line."""

    def __init__(self, runs, jobs, stream=sys.stderr, status_every=10.0):
        self.runs, self.jobs, self.stream = runs, max(1, jobs), stream
        self.tty = stream.isatty()
        self.status_every = status_every
        self.t0 = time.time()
        self._last_line = 0.0
        self._width = 0

    def line(self):
        done = [r for r in self.runs if r.state == "done"]
        running = [r for r in self.runs if r.state in ("starting", "running")]
        hours = sum(r.hours() for r in self.runs)
        ops = sum(r.ops() for r in self.runs)
        viol = sum(r.violations() for r in self.runs)
        failed = sum(1 for r in done if r.verdict == FAILED)
        lost = sum(1 for r in done if r.verdict == LOST)
        keys = {}
        for r in self.runs:
            keys.setdefault(r.target.key, []).append(r.state == "done")
        tdone = sum(1 for v in keys.values() if all(v))
        el = time.time() - self.t0
        # most important first: a narrow terminal cuts the end off
        return ("soak %02d:%02d  targets %d/%d done  %d violations  %d failed  %d lost  "
                "runs %d/%d (%d running)  %.3f h run  %s ops" %
                (el // 60, el % 60, tdone, len(keys), viol, failed, lost, len(done),
                 len(self.runs), len(running), hours, human(ops)))

    def show(self, force=False):
        text = self.line()
        if self.tty:  # one terminal row, or \r cannot redraw it
            text = text[:max(20, shutil.get_terminal_size((120, 24)).columns - 1)]
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self._width = len(text)
            self.stream.flush()
        elif force or time.time() - self._last_line >= self.status_every:
            self.stream.write(text + "\n")
            self.stream.flush()
            self._last_line = time.time()

    def note(self, text):
        if self.tty:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        self.stream.write(text + "\n")
        self.stream.flush()

    def run_all(self):
        pending = list(self.runs)
        threads = {}
        busy = set()
        self.show(force=True)
        while pending or threads:
            for r, th in list(threads.items()):
                if not th.is_alive():
                    th.join()
                    del threads[r]
                    busy.discard(r.target.name)
                    if r.verdict != PASS:
                        self.note("%s %s seed %d: %s%s" % (r.verdict, r.target.name + " " +
                                                           r.target.config, r.seed,
                                                           r.reason, "\n  repro: " +
                                                           r.opts.launcher_repro(r)
                                                           if r.verdict == FAILED else ""))
            for r in list(pending):
                if len(threads) >= self.jobs:
                    break
                if r.target.kind in ("ssh", "adb") and r.target.name in busy:
                    continue
                pending.remove(r)
                busy.add(r.target.name)
                th = threading.Thread(target=r.execute, name=r.id, daemon=True)
                threads[r] = th
                th.start()
            self.show()
            time.sleep(0.5)
        self.show(force=True)
        if self.tty:
            self.stream.write("\n")
