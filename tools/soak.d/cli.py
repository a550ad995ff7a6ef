"""tools/soak: run the stress binary on many targets, write a report.

See `tools/soak --help` and docs/farm.md, "Soak runs"; EXIT_STATUS below
is the exit status."""

import argparse
import datetime
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import report
import runner
import targets as targets_mod
import transports

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LAUNCHER = os.path.join(REPO, "tools", "soak")
STRESS_LABEL = "//stress:dq_stress"
OWNED_FLAGS = ("--duration", "--seed", "--json")
DEFAULT_STRESS = [("--producers", "2"), ("--removers", "1"), ("--cancellers", "1"),
                  ("--barriers", "1")]
ELF_MACHINES = {62: "x86_64", 183: "aarch64"}
# What qemu-aarch64 loads first for a dynamically linked arm64 binary: the
# loader its PT_INTERP names, under the sysroot (qemu -L).  A sysroot
# without it was never unpacked, and every QEMU run would be LOST.
SYSROOT_LOADER = os.path.join("lib", "ld-linux-aarch64.so.1")
PT_INTERP = 3
EXIT_STATUS = """Exit status: 0 every run passed; 1 a run FAILED or was LOST; 2 bad usage,
nothing was run; 3 setup error, nothing was run: tools/bootstrap.sh failed,
the arm64 sysroot that the QEMU targets need is missing, or no run could be
set up."""


class UsageError(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="tools/soak", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Soak-test the deliqueue stress binary on many targets in parallel "
                    "and write report.md / report.html (and results.json, junit.xml).",
        epilog=targets_mod.__doc__ + "\n" + EXIT_STATUS)
    p.add_argument("--targets", default=targets_mod.DEFAULT_TARGETS,
                   help="comma-separated target specs (default: %(default)s)")
    p.add_argument("--duration", type=float, default=20.0,
                   help="seconds per run (default: %(default)s)")
    p.add_argument("--runs", type=int, default=1,
                   help="runs per target, each with its own random seed (default: 1)")
    p.add_argument("--seed", action="append", default=[], metavar="N[,N...]",
                   help="run with exactly this seed (repeatable, or a comma-separated "
                        "list; instead of --runs)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="runs at once (default: nproc = %(default)s)")
    p.add_argument("--out", help="output directory (default: soak-results/<UTC time>)")
    p.add_argument("--stress-flags", default="",
                   help="extra flags for the stress binary, e.g. '--producers=4 "
                        "--scenario=NAME' (the launcher owns --duration/--seed/--json)")
    p.add_argument("--binary", action="append", default=[], metavar="CONFIG=PATH",
                   help="use this binary for CONFIG instead of building it (repeatable)")
    p.add_argument("--no-build", action="store_true",
                   help="do not run bazel: every config needs --binary")
    p.add_argument("--no-bootstrap", action="store_true",
                   help="do not run tools/bootstrap.sh first (it runs unless --no-build)")
    p.add_argument("--bazel", default="bazel", help="bazel command (default: %(default)s)")
    p.add_argument("--stress-target", default=STRESS_LABEL,
                   help="Bazel label of the stress binary (default: %(default)s)")
    p.add_argument("--bazel-flags", default="",
                   help="extra bazel build flags, e.g. '--copt=-O1'")
    p.add_argument("--mutant", metavar="RULE",
                   help="build from a copy of the tree rewritten by this named rule of "
                        "tools/mutants/rules.py, e.g. DELIVER_NO_CAS (a planted bug the "
                        "soak must catch)")
    p.add_argument("--grace", type=float,
                   help="seconds past --duration before a run counts as hung "
                        "(default: 30 + 5%% of the duration)")
    p.add_argument("--connection-grace", type=float, default=60.0,
                   help="seconds a remote target may be unreachable before its run is "
                        "LOST (default: %(default)s)")
    p.add_argument("--remote-config", action="append", default=[], metavar="ARCH=CONFIG",
                   help="config for remote targets by `uname -m` (default: x86_64=host, "
                        "aarch64=arm64-dispatch)")
    p.add_argument("--ssh-config", help="ssh -F file for ssh targets")
    p.add_argument("--ssh-option", action="append", default=[], metavar="OPT",
                   help="ssh -o option for ssh targets (repeatable)")
    p.add_argument("--adb", default="adb", help="adb command for adb targets")
    p.add_argument("--adb-tmp", default="/data/local/tmp",
                   help="directory on adb targets for the runs (default: %(default)s)")
    p.add_argument("--qemu", default="qemu-aarch64", help="qemu-user binary for arm64")
    p.add_argument("--sysroot", default=os.path.join(REPO, ".sysroot", "arm64"),
                   help="arm64 sysroot for qemu -L (default: %(default)s)")
    p.add_argument("--keep-remote", action="store_true",
                   help="leave the remote work directories in place")
    p.add_argument("--poll-interval", type=float, help="seconds between polls")
    p.add_argument("--screenshot", action="store_true",
                   help="save report.png of report.html with headless chromium")
    p.add_argument("--quiet", action="store_true", help="no live progress line")
    p.add_argument("--rerender", metavar="OUT_DIR",
                   help="only rewrite the reports of a finished soak from its results.json")
    a = p.parse_args(argv)
    if a.duration <= 0 or a.jobs <= 0 or a.runs <= 0:
        p.error("--duration, --jobs and --runs must be positive")
    return a


def seed_list(a):
    """The seed of every run per target: --seed's values, or --runs random ones."""
    if a.seed:
        out = []
        for text in a.seed:
            for word in text.split(","):
                try:
                    value = int(word)
                except ValueError:
                    raise UsageError("--seed: not an integer: %r" % word)
                if value < 0:
                    raise UsageError("--seed: must not be negative: %d" % value)
                if value in out:
                    raise UsageError("--seed: %d given twice" % value)
                out.append(value)
        return out
    rng = random.SystemRandom()
    return [rng.randrange(1, 2 ** 31) for _ in range(a.runs)]


def stress_flags(a):
    flags = dict(DEFAULT_STRESS)
    interval = min(60.0, max(1.0, a.duration / 100.0))
    flags["--progress-interval"] = "%g" % interval
    for w in shlex.split(a.stress_flags):
        name, eq, value = w.partition("=")
        if not name.startswith("--") or not eq:
            raise UsageError("--stress-flags: %r is not --name=value" % w)
        if name in OWNED_FLAGS:
            raise UsageError("--stress-flags: %s is set by the launcher" % name)
        flags[name] = value
    return ["%s=%s" % kv for kv in flags.items()]


def parse_pairs(items, what):
    out = {}
    for item in items:
        k, eq, v = item.partition("=")
        if not eq or not k or not v:
            raise UsageError("%s: expected KEY=VALUE, got %r" % (what, item))
        out[k] = v
    return out


def elf_machine(path):
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if head[:4] != b"\x7fELF" or len(head) < 20:
        return None
    return ELF_MACHINES.get(int.from_bytes(head[18:20], "little" if head[5] == 1 else "big"),
                            "elf-machine-%d" % int.from_bytes(head[18:20], "little"))


def elf_interpreted(path):
    """True when the ELF file at path names a program interpreter (a
    PT_INTERP program header), i.e. is dynamically linked."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or len(head) < 64 or head[4] not in (1, 2):
                return False
            order = "little" if head[5] == 1 else "big"

            def field(offset, size):
                return int.from_bytes(head[offset:offset + size], order)
            if head[4] == 2:  # ELFCLASS64
                phoff, phentsize, phnum = field(32, 8), field(54, 2), field(56, 2)
            else:
                phoff, phentsize, phnum = field(28, 4), field(42, 2), field(44, 2)
            if phentsize < 4:
                return False
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return False
    return any(int.from_bytes(table[i:i + 4], order) == PT_INTERP
               for i in range(0, len(table) - 3, phentsize))


def sysroot_problem(tlist, a, overrides):
    """Why the QEMU targets cannot run: the arm64 sysroot they load their
    libraries from lacks its loader.  None when it has it, or when no QEMU
    target needs it (a --binary that is statically linked, or none at all
    under --no-build, which is reported on its own)."""
    needing = []
    for t in tlist:
        if t.kind != "qemu":
            continue
        given = overrides.get(t.config)
        if given is None and a.no_build:
            continue
        if given is not None and not elf_interpreted(given):
            continue
        needing.append(t.spec())
    if not needing or os.path.exists(os.path.join(a.sysroot, SYSROOT_LOADER)):
        return None
    return ("the arm64 sysroot %s has no %s, which %s need%s under qemu: run "
            "tools/bootstrap.sh (it unpacks the sysroot), or give --sysroot DIR" %
            (a.sysroot, SYSROOT_LOADER, ", ".join(needing), "s" if len(needing) == 1 else ""))


# ----------------------------------------------------------------------
class Options:
    """Settings the transports and runs read (one object, shared read-only)."""

    def __init__(self, a, out_dir):
        self.a = a
        self.qemu, self.sysroot, self.adb, self.adb_tmp = a.qemu, a.sysroot, a.adb, a.adb_tmp
        self.ssh_config, self.ssh_options = a.ssh_config, a.ssh_option
        self.keep_remote, self.poll_interval = a.keep_remote, a.poll_interval
        self.connection_grace = a.connection_grace
        self.control_dir = tempfile.mkdtemp(prefix="soak-ssh-")  # short: socket path limit
        self.out_dir = out_dir
        self.missing = {}
        self.binaries = {}
        self.stop = threading.Event()  # set on ^C: every run stops and is LOST

    def launcher_repro(self, run):
        a = self.a
        words = [LAUNCHER, "--targets=" + run.target.spec(), "--seed=%d" % run.seed,
                 "--duration=%g" % run.duration,
                 "--stress-flags=" + " ".join(run.stress_flags)]
        if run.binary:
            words += ["--no-build", "--binary", "%s=%s" % (run.target.config, run.binary)]
        if a.grace is not None:
            words.append("--grace=%g" % a.grace)
        if run.target.kind == "ssh":
            if a.ssh_config:
                words += ["--ssh-config", a.ssh_config]
            for o in a.ssh_option:
                words += ["--ssh-option", o]
        if run.target.kind == "adb":
            words += ["--adb", a.adb, "--adb-tmp", a.adb_tmp]
        if run.target.kind == "qemu" and a.sysroot != parse_args([]).sysroot:
            words += ["--sysroot", a.sysroot]
        return " ".join(shlex.quote(w) for w in words)


def log(msg):
    sys.stderr.write("soak: %s\n" % msg)
    sys.stderr.flush()


def probe_all(tlist, opts, remote_config):
    """uname -m of every target (in parallel: remote probes can be slow)."""
    errors = {}

    def one(t):
        try:
            tr = transports.make(t, opts.out_dir, opts)
            arch = tr.probe()
            if t.kind in ("ssh", "adb"):
                targets_mod.resolve_config(t, arch, remote_config)
            else:
                t.arch = arch
        except Exception as e:
            errors[t] = str(e)
            if t.config is None:
                t.config = "unknown"
    threads = [threading.Thread(target=one, args=(t,)) for t in tlist]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


def bazel_config_flags(config):
    if config != "host":
        return ["--config=" + config]
    try:
        with open(os.path.join(REPO, ".bazelrc")) as f:
            if any(l.startswith("build:host ") for l in f):
                return ["--config=host"]
    except OSError:
        pass
    return []


def mutant_tree(rule):
    """A copy of the working tree (kept between soaks, so Bazel rebuilds
    only what the rule touches) rewritten by the named rule."""
    tree = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                        "deliqueue-mutants", "soak", "tree")
    p = subprocess.run([sys.executable, os.path.join(REPO, "tools", "mutants", "run"),
                        "--apply=" + rule, "--to=" + tree],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        raise RuntimeError("mutant %s: %s" % (rule, p.stdout.decode(errors="replace").strip()))
    return tree


def build(config, a, out_dir):
    """bazel build one config and copy the binary to OUT/bin/CONFIG/dq_stress
    (so the repro command keeps working after the next build).

    The workspace's Bazel server is shared: another command may rebuild the
    same output file (say, with other --copt) between our build and our
    copy.  So the output path is asked for first (cquery), and the copy
    happens the moment the build returns; a vanished file is built again."""
    logpath = os.path.join(out_dir, "build", config + ".log")
    os.makedirs(os.path.dirname(logpath), exist_ok=True)
    flags = bazel_config_flags(config) + shlex.split(a.bazel_flags)
    t0 = time.time()
    tree = mutant_tree(a.mutant) if a.mutant else REPO
    dst = os.path.join(out_dir, "bin", config, "dq_stress")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(logpath, "w") as lf:
        def bazel(cmd, **kw):
            lf.write("$ %s\n" % " ".join(shlex.quote(w) for w in cmd))
            lf.flush()
            return subprocess.run(cmd, cwd=tree, stderr=lf, **kw)
        # Bazel 4.2 has no --output=files; starlark output gives the same paths
        q = bazel([a.bazel, "cquery"] + flags + [
            "--output=starlark",
            "--starlark:expr=\"\\n\".join([f.path for f in target.files.to_list()])",
            a.stress_target], stdout=subprocess.PIPE)
        files = [l.strip() for l in q.stdout.decode().splitlines() if l.strip()]
        if q.returncode != 0 or not files:
            raise RuntimeError("bazel cquery found no output, see %s" % logpath)
        src = os.path.join(tree, files[0])
        for attempt in range(3):
            p = bazel([a.bazel, "build"] + flags + [a.stress_target], stdout=lf)
            if p.returncode != 0:
                raise RuntimeError("bazel build failed (exit %d), see %s" %
                                   (p.returncode, logpath))
            try:
                shutil.copy2(src, dst)
                break
            except FileNotFoundError:
                lf.write("soak: %s vanished after the build (another bazel command?); "
                         "building again\n" % src)
        else:
            raise RuntimeError("%s kept vanishing after the build, see %s" % (src, logpath))
    os.chmod(dst, 0o755)
    return dst, time.time() - t0


def default_out():
    root = os.path.join(REPO, "soak-results")
    os.makedirs(root, exist_ok=True)
    ign = os.path.join(root, ".gitignore")
    if not os.path.exists(ign):
        with open(ign, "w") as f:
            f.write("# soak launcher output, never committed\n*\n")
    out = os.path.join(root, datetime.datetime.utcnow().strftime("%Y%m%d-%H%M%S"))
    return out if not os.path.exists(out) else "%s-%d" % (out, os.getpid())


def screenshot(html_path, png_path):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        log("no chromium: skipped the screenshot")
        return False
    prof = tempfile.mkdtemp(prefix="soak-chromium-")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--user-data-dir=" + prof, "--screenshot=" + png_path,
           "--window-size=1280,1000", "file://" + os.path.abspath(html_path)]
    try:
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    except subprocess.TimeoutExpired:
        pass
    shutil.rmtree(prof, ignore_errors=True)
    return os.path.exists(png_path)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if a.rerender:
        with open(os.path.join(a.rerender, "results.json")) as f:
            data = json.load(f)
        verdict, _ = report.write_all(a.rerender, data["runs"], data["meta"])
        if a.screenshot:
            screenshot(os.path.join(a.rerender, "report.html"),
                       os.path.join(a.rerender, "report.png"))
        print("report: %s (%s)" % (os.path.join(a.rerender, "report.html"), verdict))
        return 0 if verdict == runner.PASS else 1
    try:
        seed_values = seed_list(a)
        flags = stress_flags(a)
        tlist = targets_mod.parse_targets(a.targets)
        # Before anything is built: a mistyped CPU model is a usage error.
        cpus_checked = targets_mod.check_qemu_cpus(tlist, a.qemu)
        overrides = parse_pairs(a.binary, "--binary")
        remote_config = dict(targets_mod.DEFAULT_REMOTE_CONFIG)
        remote_config.update(parse_pairs(a.remote_config, "--remote-config"))
    except (UsageError, targets_mod.TargetError) as e:
        print("tools/soak: %s" % e, file=sys.stderr)
        return 2
    for cfg, path in overrides.items():
        if not os.path.isfile(path):
            print("tools/soak: --binary %s=%s: no such file" % (cfg, path), file=sys.stderr)
            return 2
    bootstrap = os.path.join(REPO, "tools", "bootstrap.sh")
    run_bootstrap = not a.no_build and not a.no_bootstrap and os.path.exists(bootstrap)
    # Before anything is built: without the bootstrap to unpack it, a missing
    # sysroot would only show as every QEMU run LOST.
    problem = None if run_bootstrap else sysroot_problem(tlist, a, overrides)
    if problem:
        print("tools/soak: %s" % problem, file=sys.stderr)
        return 3
    out_dir = os.path.abspath(a.out or default_out())
    os.makedirs(out_dir, exist_ok=True)
    opts = Options(a, out_dir)
    started = datetime.datetime.utcnow()
    t0 = time.time()
    grace = a.grace if a.grace is not None else 30 + 0.05 * a.duration
    limit = int(a.duration + grace + 0.999)

    log("out dir %s" % out_dir)
    if run_bootstrap:
        # installs whatever is missing (packages, arm64 sysroot, binfmt); seconds when done
        rc = subprocess.call([bootstrap, "--quiet"])
        if rc != 0:
            log("tools/bootstrap.sh failed (exit %d); --no-bootstrap to skip it" % rc)
            return 3
        problem = sysroot_problem(tlist, a, overrides)  # a --sysroot of one's own
        if problem:
            log(problem)
            return 3
    if not cpus_checked:  # QEMU may be there now that the bootstrap ran
        try:
            targets_mod.check_qemu_cpus(tlist, a.qemu)
        except targets_mod.TargetError as e:
            print("tools/soak: %s" % e, file=sys.stderr)
            return 2
    probe_errors = probe_all(tlist, opts, remote_config)
    for t, err in probe_errors.items():
        log("%s: %s" % (t.name, err))

    # binaries: --binary overrides first, then bazel for the rest
    configs = []
    for t in tlist:
        if t not in probe_errors and t.config not in configs:
            configs.append(t.config)
    for cfg in configs:
        if cfg in overrides:
            dst = os.path.join(out_dir, "bin", cfg, "dq_stress")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.abspath(overrides[cfg]) != dst:
                shutil.copy2(overrides[cfg], dst)
            os.chmod(dst, 0o755)
            opts.binaries[cfg] = dst
        elif a.no_build:
            opts.missing[cfg] = "--no-build and no --binary %s=PATH" % cfg
        else:
            log("building %s (bazel build %s %s) ..." %
                (cfg, " ".join(bazel_config_flags(cfg) + shlex.split(a.bazel_flags)),
                 a.stress_target))
            try:
                opts.binaries[cfg], took = build(cfg, a, out_dir)
                log("built %s in %.0fs" % (cfg, took))
            except Exception as e:
                opts.missing[cfg] = str(e)
                log("build of %s failed: %s" % (cfg, e))

    runs = []
    for seed in seed_values:
        for t in tlist:
            r = runner.Run(t, seed, a.duration, flags, limit, opts,
                           os.path.join(out_dir, "runs", "%s__seed%d" % (t.slug, seed)))
            r.binary = opts.binaries.get(t.config)
            if t in probe_errors:
                r.binary = None
                r.unreachable = probe_errors[t]
            elif r.binary:
                have = elf_machine(r.binary)
                want = t.arch or targets_mod.config_arch(t.config)
                if have and want and have != want and not (have == "aarch64" and
                                                           want == "arm64"):
                    r.binary = None
                    opts.missing.setdefault(
                        t.config, "binary %s is %s but %s is %s" %
                        (opts.binaries[t.config], have, t.name, want))
            runs.append(r)
    if not runs:
        log("nothing to run")
        return 3

    log("%d runs (%d targets x %d seed values), %gs each, limit %ds, --jobs %d" %
        (len(runs), len(tlist), len(seed_values), a.duration, limit, a.jobs))
    sched = runner.Scheduler(runs, a.jobs, stream=sys.stderr if not a.quiet else
                             open(os.devnull, "w"))
    try:
        sched.run_all()
    except KeyboardInterrupt:
        log("interrupted: stopping the runs (they count as LOST)")
        opts.stop.set()
        for r in runs:
            if r.state == "pending":
                r.verdict, r.reason = runner.LOST, "interrupted before it started"
        deadline = time.time() + 60
        while any(r.state in ("starting", "running") for r in runs) and time.time() < deadline:
            time.sleep(0.2)
    for t in tlist:
        try:
            transports.make(t, out_dir, opts).close()
        except Exception:
            pass
    shutil.rmtree(opts.control_dir, ignore_errors=True)

    took = time.time() - t0
    meta = {"started": started.strftime("%Y-%m-%d %H:%M:%S UTC"),
            "took": "%dm%02ds" % (took // 60, took % 60), "duration": a.duration,
            "jobs": a.jobs, "seed": seed_values, "stress_flags": flags, "out_dir": out_dir,
            "command": " ".join(shlex.quote(w) for w in ["tools/soak"] + argv),
            "limit_s": limit}
    records = [r.record() for r in runs]
    verdict, table = report.write_all(out_dir, records, meta)
    for row in table:
        print("%-26s %-15s %2d runs %9s %10s ops %4d violations  %s" %
              (row["target"], row["config"], row["n"], report.run_time_text(row["hours"]),
               runner.human(row["ops"]), row["violations"], report.verdict_text(row)))
    if a.screenshot:
        if screenshot(os.path.join(out_dir, "report.html"), os.path.join(out_dir, "report.png")):
            print("screenshot: %s" % os.path.join(out_dir, "report.png"))
    print("soak %s: %d/%d runs passed" %
          (verdict, sum(1 for r in runs if r.verdict == runner.PASS), len(runs)))
    print("report: %s" % os.path.join(out_dir, "report.html"))
    print("        %s" % os.path.join(out_dir, "report.md"))
    return 0 if verdict == runner.PASS else 1
