# SPDX-License-Identifier: Apache-2.0
"""tools/farm --remote: the farm's configs through the Remote Execution API.

    tools/farm --remote=grpcs://HOST[:PORT] ...   # a cluster
    tools/farm --remote=local ...                 # proof on this machine

With a URL, each config runs once with --config=remote against that
executor (instance name and credentials come from the user's own bazelrc).

With `local`, bazel/remote/local.py starts Bazel's reference remote worker
and nginx (an HTTP cache) on 127.0.0.1, and every chosen config runs in
four passes, each after `bazel clean` so that nothing comes from this
machine's output tree (and with no disk cache, so nothing comes from it):

  1. local      --config=remote-cache (nginx): executed here, results uploaded
  2. remote     --config=remote (the worker): executed remotely
  3. remote     again: the worker's action cache answers
  4. local      --config=remote-cache again: nginx answers

Each pass prints one line per config, from Bazel's own process summary:
`remote CONFIG: N executed remotely, M remote cache hits` (passes 2 and 3)
or `remote-cache CONFIG: N executed locally, M remote cache hits` (1, 4).
A config fails if any pass fails a test, if a pass's test outcomes differ
from pass 1's (remote execution must not lose a test), or if pass 3 or 4
gets no cache hit where the pass before it had cacheable work. The servers
stop when the farm ends, ^C included.
"""

import os
import re
import subprocess
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import local  # noqa: E402  (bazel/remote/local.py)

SUMMARY = re.compile(r"^INFO: (\d+) process(?:es)?(?:: (.*?))?\.$")
# Kinds in Bazel's summary that ran nothing here or remotely.
NOT_LOCAL = {"internal", "remote", "remote cache hit", "disk cache hit"}


def check_url(value):
    """Returns an error message for a --remote value, or None if it is
    usable: `local`, or grpc:// / grpcs:// with a host and an optional port
    (Bazel 4 executes remotely over gRPC only)."""
    if value == "local":
        return None
    try:
        url = urllib.parse.urlsplit(value)
        port = url.port  # raises ValueError when out of range or not a number
    except ValueError as e:
        return "--remote=%r is not a valid URL (%s)" % (value, e)
    if url.scheme not in ("grpc", "grpcs"):
        return ("--remote=%r: expected `local` or a gRPC endpoint, grpc://HOST[:PORT] or "
                "grpcs://HOST[:PORT]" % value)
    if not url.hostname or url.path not in ("", "/") or url.query or url.fragment \
            or url.username or url.password:
        return ("--remote=%r: expected grpc://HOST[:PORT] or grpcs://HOST[:PORT], with no "
                "path, query or credentials (put credentials in your bazelrc)" % value)
    if port is not None and port == 0:
        return "--remote=%r: port 0 is not a TCP port" % value
    return None


def process_counts(log):
    """{kind: count} from the last process summary in a Bazel log, e.g.
    "INFO: 19 processes: 9 internal, 10 remote." -> {"internal": 9, ...}."""
    counts = None
    try:
        with open(log, errors="replace") as f:
            for line in f:
                m = SUMMARY.match(line.strip())
                if m:
                    counts = {}
                    for part in (m.group(2) or "").split(", "):
                        n, _, kind = part.partition(" ")
                        if n.isdigit():
                            counts[kind] = counts.get(kind, 0) + int(n)
    except OSError:
        pass
    return counts


def clean(root):
    return subprocess.call(["bazel", "clean"], cwd=root, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(args, chosen, logs, run_config, passed_states, root):
    """The --remote mode of tools/farm; returns its exit status."""
    try:
        if args.remote != "local":
            return run_passes(args, chosen, logs, run_config, passed_states, root, None)
        try:
            with local.LocalServers(args.remote_worker_port, args.remote_cache_port,
                                    log=sys.stdout) as servers:
                return run_passes(args, chosen, logs, run_config, passed_states, root, servers)
        except local.ServerError as e:
            print("farm: --remote=local: %s" % e, file=sys.stderr)
            print("0 passed, 1 failed")
            return 1
    except KeyboardInterrupt:
        # The servers are stopped by now (LocalServers.__exit__), and the
        # Bazel client was killed by subprocess.call on its way out.
        print("farm: interrupted" + ("; local servers stopped" if args.remote == "local" else ""),
              file=sys.stderr)
        return 130


def run_passes(args, chosen, logs, run_config, passed_states, root, servers):
    if servers:
        remote = ["--config=remote", "--remote_executor=" + servers.executor]
        cache = ["--config=remote-cache", "--remote_cache=" + servers.http_cache,
                 "--disk_cache="]
        passes = [("remote-cache", "1-cache", cache, False),
                  ("remote", "2-exec", remote, False),
                  ("remote", "3-exec-again", remote, True),
                  ("remote-cache", "4-cache-again", cache, True)]
    else:
        passes = [("remote", "exec", ["--config=remote", "--remote_executor=" + args.remote],
                   False)]

    failures, first, previous = [], {}, {}
    total_passed = 0
    for kind, tag, flags, want_hits in passes:
        if servers and clean(root) != 0:
            failures.append("bazel clean failed before pass %s" % tag)
            break
        print("farm: pass %s (%s)" % (tag, " ".join(flags)), flush=True)
        for name, config in chosen:
            rc, results, seconds, log = run_config(
                name + "." + tag, config, args.targets, flags + args.bazel_arg, logs,
                args.fuzz_time)
            counts = process_counts(log) or {}
            here = sum(n for k, n in counts.items() if k not in NOT_LOCAL)
            hits = counts.get("remote cache hit", 0)
            if kind == "remote":
                line = "remote %s: %d executed remotely, %d remote cache hits" % (
                    name, counts.get("remote", 0), hits)
            else:
                line = "remote-cache %s: %d executed locally, %d remote cache hits" % (
                    name, here, hits)
            ok = {t for t, s in results.items() if s in passed_states}
            bad = sorted(t for t, s in results.items()
                         if s not in passed_states and s != "SKIPPED")
            skipped = sum(1 for s in results.values() if s == "SKIPPED")
            line += "; tests %d passed, %d failed, %d skipped, %.0f s" % (
                len(ok), len(bad), skipped, seconds)
            problems = ["%s %s" % (t, results[t]) for t in bad]
            if rc not in (0, 3, 4) or (rc == 3 and not bad):
                problems.append("bazel exited %d (build or analysis error)" % rc)
            if not counts:
                problems.append("no process summary in the Bazel output")
            # A second pass must be answered by the cache wherever the pass
            # before it had cacheable work: pass 3 after pass 2 executed
            # remotely, pass 4 (HTTP cache) wherever pass 3 got hits. Tests
            # tagged "local" (never cached) alone leave nothing to hit.
            if want_hits and hits == 0 and previous.get(name, 0) > 0:
                problems.append("no remote cache hit on a second pass")
            previous[name] = counts.get("remote", 0) + hits
            outcome = {t: (s if s == "SKIPPED" else s in passed_states)
                       for t, s in results.items()}
            if name not in first:
                first[name] = outcome
            elif outcome != first[name]:
                lost = sorted(t for t in set(first[name]) | set(outcome)
                              if first[name].get(t) != outcome.get(t))
                problems.append("test outcomes differ from pass %s: %s"
                                % (passes[0][1], ", ".join(lost[:5])))
            if problems:
                line += "   <- FAILED, see " + log
                failures += ["%s (pass %s): %s" % (name, tag, p) for p in problems]
            print(line, flush=True)
            if tag in ("2-exec", "exec"):
                total_passed += len(ok)
    if failures:
        print()
        print("failures:")
        for f in failures:
            print("  " + f)
    # Every failure line counts (a failed test in any pass, a lost test, a
    # second pass without cache hits), so the closing line never reads clean
    # over a problem. "passed" counts the remote execution pass.
    print("%d passed, %d failed" % (total_passed, len(failures)))
    return 1 if failures else 0
