"""Transports: how the soak launcher reaches a target.

One interface, five operations, so that a new kind of target (adb phones,
a board behind a serial console, ...) is a new class and not a rewrite:

    probe()           -> the target's `uname -m` (called once per target)
    copy(binary)      -> put the stress binary where the target can run it
    run(argv, limit)  -> start it detached under `timeout LIMIT`, return at once
    poll()            -> Status: running / exited(rc) / lost(reason), plus the
                         last progress line the binary wrote
    fetch(local_dir)  -> bring back stdout.log, stderr.log, summary.json
    cleanup()         -> remove everything copy() and run() left on the target
    kill()            -> stop the run (used when the launcher gives up on it)
    direct_command(binary, argv) -> a shell command that repeats the run by
                         hand, without the launcher (printed as the repro)

Every transport starts the binary the same way: a small POSIX sh wrapper,
`run.sh`, in a per-run work directory, which records the wrapper's and the
binary's pids, runs the binary under `timeout -k GRACE LIMIT`, and writes
the exit status to `rc` only when the binary is gone.  "rc present" is the
one signal that a run ended; a missing rc with no live wrapper means the run
was killed from outside (lost).

Thread contract: one transport object belongs to one run and is used by one
launcher thread; `probe()` results are cached per target by the caller.
"""

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

KILL_GRACE_S = 5  # timeout -k: SIGKILL this long after the SIGTERM at the limit

# The wrapper run on every target.  $1 = time limit in seconds; the rest is
# the command.  Written with `echo $$` + `exec` so stress.pid is the binary.
RUN_SH = r"""#!/bin/sh
# soak run wrapper: records pids, enforces the time limit, records the status
cd "$(dirname "$0")" || exit 99
echo $$ > wrapper.pid
limit=$1; shift
timeout -k {grace} "$limit" sh -c 'echo $$ > stress.pid; exec "$@"' sh "$@" \
    > stdout.log 2> stderr.log < /dev/null
echo $? > rc.tmp && mv rc.tmp rc
""".format(grace=KILL_GRACE_S)

# Shell snippet run on the target by poll(): prints one status word, then
# the last line of stderr (the latest progress line).
POLL_SH = r"""cd {wd} 2>/dev/null || {{ echo gone; exit 0; }}
if [ -f rc ]; then echo "rc=$(cat rc)";
elif [ -f wrapper.pid ] && kill -0 "$(cat wrapper.pid)" 2>/dev/null; then echo running;
elif [ -f wrapper.pid ]; then echo vanished;
else echo starting; fi
tail -n 1 stderr.log 2>/dev/null; echo"""


class Status:
    """What poll() saw.  state: 'running' | 'exited' | 'lost' | 'unreachable'."""

    def __init__(self, state, rc=None, progress="", reason=""):
        self.state, self.rc, self.progress, self.reason = state, rc, progress, reason

    def __repr__(self):
        return "Status(%s, rc=%r, reason=%r)" % (self.state, self.rc, self.reason)


def parse_poll_output(text):
    lines = text.splitlines()
    word = lines[0].strip() if lines else ""
    progress = next((l for l in reversed(lines[1:]) if l.startswith("progress ")), "")
    if word.startswith("rc="):
        try:
            return Status("exited", rc=int(word[3:]), progress=progress)
        except ValueError:
            return Status("lost", reason="unreadable exit status %r" % word)
    if word in ("running", "starting"):
        return Status("running", progress=progress)
    if word == "vanished":
        return Status("lost", progress=progress,
                      reason="the run's processes vanished without an exit status "
                             "(killed from outside?)")
    if word == "gone":
        return Status("lost", reason="the run's work directory disappeared")
    return Status("unreachable", reason="unexpected poll output %r" % text[:200])


class Transport:
    """Base class; see the module docstring for the contract."""

    kind = "?"
    exclusive = False  # True: one run at a time on this target

    def __init__(self, target, run_dir, opts):
        self.target, self.run_dir, self.opts = target, run_dir, opts

    def probe(self):
        raise NotImplementedError

    def copy(self, binary):
        raise NotImplementedError

    def run(self, argv, limit_s):
        raise NotImplementedError

    def poll(self):
        raise NotImplementedError

    def fetch(self, local_dir):
        raise NotImplementedError

    def cleanup(self):
        pass

    def kill(self):
        pass

    def direct_command(self, binary, argv):
        raise NotImplementedError

    def close(self):
        """Release per-target resources after the last run (optional)."""

    def describe(self):
        """Facts worth keeping in the run's transport.json (work dir, pids)."""
        return {"kind": self.kind}


# --------------------------------------------------------------------------
# local: the host itself, and arm64 under qemu-user on the host

class LocalTransport(Transport):
    """Runs on this machine, in the run's own directory under --out."""

    kind = "host"

    def __init__(self, target, run_dir, opts):
        super().__init__(target, run_dir, opts)
        self.proc = None
        self.binary = None

    def probe(self):
        return os.uname().machine

    def prefix(self):
        """argv words put before the binary (an emulator, for instance)."""
        return []

    def env(self):
        return dict(os.environ)

    def copy(self, binary):
        # Nothing to copy: the launcher keeps each config's binary under
        # OUT/bin/, which is what the repro command names too.
        self.binary = os.path.abspath(binary)
        return self.binary

    def run(self, argv, limit_s):
        wrapper = os.path.join(self.run_dir, "run.sh")
        with open(wrapper, "w") as f:
            f.write(RUN_SH)
        cmd = ["sh", wrapper, str(int(limit_s))] + self.prefix() + [self.binary] + list(argv)
        self.proc = subprocess.Popen(cmd, cwd=self.run_dir, env=self.env(),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)

    def poll(self):
        rcfile = os.path.join(self.run_dir, "rc")
        progress = last_progress_line(os.path.join(self.run_dir, "stderr.log"))
        if self.proc.poll() is None:
            return Status("running", progress=progress)
        if os.path.exists(rcfile):
            with open(rcfile) as f:
                text = f.read().strip()
            try:
                return Status("exited", rc=int(text), progress=progress)
            except ValueError:
                return Status("lost", reason="unreadable exit status %r" % text)
        return Status("lost", progress=progress,
                      reason="the run's wrapper died (exit %s) without an exit status"
                             % self.proc.returncode)

    def fetch(self, local_dir):
        return  # the run already wrote into its own directory

    def kill(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def cleanup(self):
        self.kill()

    def direct_command(self, binary, argv):
        return " ".join(shlex.quote(w) for w in self.prefix() + [binary] + list(argv))

    def describe(self):
        return {"kind": self.kind, "work_dir": self.run_dir,
                "wrapper_pid": self.proc.pid if self.proc else None}


class QemuTransport(LocalTransport):
    """arm64 binaries on this machine under qemu-aarch64 with a chosen CPU model.

    The CPU model and sysroot are given both as flags and as QEMU_CPU /
    QEMU_LD_PREFIX so that a binary that re-executes itself (through
    binfmt_misc) keeps them."""

    kind = "qemu"

    def probe(self):
        if not shutil.which(self.opts.qemu):
            raise RuntimeError("%s not found (install qemu-user)" % self.opts.qemu)
        return "aarch64"

    def prefix(self):
        words = [self.opts.qemu, "-cpu", self.target.cpu]
        if self.opts.sysroot and os.path.isdir(self.opts.sysroot):
            words += ["-L", self.opts.sysroot]
        return words

    def env(self):
        env = dict(os.environ)
        env["QEMU_CPU"] = self.target.cpu
        if self.opts.sysroot and os.path.isdir(self.opts.sysroot):
            env["QEMU_LD_PREFIX"] = self.opts.sysroot
        return env


def last_progress_line(path, chunk=4096):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - chunk))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    for line in reversed(tail.splitlines()):
        if line.startswith("progress "):
            return line
    return ""


# --------------------------------------------------------------------------
# remote: anything reached through a command that runs a shell command there

class RemoteShellTransport(Transport):
    """A target reached by running shell commands on it (ssh, adb shell).

    Subclasses say how to run a command there (`remote_argv`) and how to send
    a file (`send_file`); everything else — the work directory, the wrapper,
    polling, fetching, cleanup — is shared."""

    exclusive = True
    remote_tmp = "/tmp"

    def __init__(self, target, run_dir, opts):
        super().__init__(target, run_dir, opts)
        self.wd = None
        self.remote_binary = None

    # -- to be provided by subclasses
    def remote_argv(self, command):
        """argv that runs the shell `command` on the target."""
        raise NotImplementedError

    def send_file(self, local, remote):
        raise NotImplementedError

    # -- shared
    def sh(self, command, timeout=60, input_bytes=None, stdin_file=None):
        """Run `command` on the target; returns (rc, stdout text, stderr text).
        rc 255 (ssh's own failure) or a local timeout mean unreachable."""
        try:
            p = subprocess.run(self.remote_argv(command), input=input_bytes,
                               stdin=stdin_file if input_bytes is None else None,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            return 255, "", "timed out after %ss" % timeout
        return (p.returncode, p.stdout.decode("utf-8", "replace"),
                p.stderr.decode("utf-8", "replace"))

    def probe(self):
        rc, out, err = self.sh("uname -m")
        if rc != 0 or not out.strip():
            raise RuntimeError("cannot reach %s: %s" % (self.target.name,
                                                          (err or out).strip()[-300:]))
        return out.strip()

    def copy(self, binary):
        rc, out, err = self.sh("mktemp -d %s/dq-soak.XXXXXX" % self.remote_tmp)
        if rc != 0 or not out.strip():
            raise RuntimeError("mktemp on target failed: %s" % (err or out).strip())
        self.wd = out.strip().splitlines()[-1]
        self.remote_binary = self.wd + "/dq_stress"
        self.send_file(binary, self.remote_binary)
        rc, out, err = self.sh("chmod +x %s" % shlex.quote(self.remote_binary))
        if rc != 0:
            raise RuntimeError("chmod on target failed: %s" % err.strip())
        self.send_bytes(RUN_SH.encode(), self.wd + "/run.sh")
        return self.remote_binary

    def send_bytes(self, data, remote):
        with tempfile.NamedTemporaryFile(dir=self.run_dir, delete=False) as f:
            f.write(data)
        try:
            self.send_file(f.name, remote)
        finally:
            os.unlink(f.name)

    def run(self, argv, limit_s):
        words = [self.remote_binary] + list(argv)
        command = ("nohup sh %s %d %s > /dev/null 2>&1 < /dev/null &" %
                   (shlex.quote(self.wd + "/run.sh"), int(limit_s),
                    " ".join(shlex.quote(w) for w in words)))
        rc, out, err = self.sh(command)
        if rc != 0:
            raise RuntimeError("starting the run failed (%d): %s" % (rc, err.strip()))

    def poll(self):
        rc, out, err = self.sh(POLL_SH.format(wd=shlex.quote(self.wd)), timeout=30)
        if rc != 0:
            return Status("unreachable", reason=(err or out).strip()[-300:] or "rc %d" % rc)
        return parse_poll_output(out)

    def fetch(self, local_dir):
        for name in ("stdout.log", "stderr.log", "summary.json"):
            rc, out, err = self.sh("cat %s/%s" % (shlex.quote(self.wd), name), timeout=120)
            if rc == 0:
                with open(os.path.join(local_dir, name), "w") as f:
                    f.write(out)

    def kill(self):
        if not self.wd:
            return
        wd = shlex.quote(self.wd)
        self.sh("for p in $(cat %s/stress.pid %s/wrapper.pid 2>/dev/null); do "
                "kill -9 $p 2>/dev/null; done; true" % (wd, wd), timeout=30)

    def cleanup(self):
        if self.wd:
            self.kill()
            self.sh("rm -rf %s" % shlex.quote(self.wd), timeout=30)

    def describe(self):
        return {"kind": self.kind, "target": self.target.name, "work_dir": self.wd,
                "stress_pid_file": self.wd and self.wd + "/stress.pid"}


class SshTransport(RemoteShellTransport):
    """ssh:[user@]host[:port] — OpenSSH client, batch mode, one multiplexed
    connection per target (ControlMaster) so that polling is cheap."""

    kind = "ssh"

    def base_argv(self):
        t = self.target
        argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "-o", "StrictHostKeyChecking=accept-new",
                "-o", "ControlMaster=auto", "-o", "ControlPersist=60",
                "-o", "ControlPath=%s/%%C" % self.opts.control_dir]
        if self.opts.ssh_config:
            argv += ["-F", self.opts.ssh_config]
        for o in self.opts.ssh_options:
            argv += ["-o", o]
        if t.port:
            argv += ["-p", str(t.port)]
        return argv

    def dest(self):
        t = self.target
        return "%s@%s" % (t.user, t.host) if t.user else t.host

    def remote_argv(self, command):
        return self.base_argv() + [self.dest(), command]

    def send_file(self, local, remote):
        # cat over ssh rather than scp: no sftp subsystem needed on the target
        with open(local, "rb") as f:
            rc, out, err = self.sh("cat > %s" % shlex.quote(remote), timeout=600, stdin_file=f)
        if rc != 0:
            raise RuntimeError("copy to %s:%s failed: %s" % (self.target.name, remote,
                                                             err.strip()[-300:]))

    def direct_command(self, binary, argv):
        remote = ('f=$(mktemp) && cat > "$f" && chmod +x "$f" && "$f" %s; rc=$?; '
                  'rm -f "$f"; exit $rc' % " ".join(shlex.quote(a) for a in argv))
        return "%s %s %s < %s" % (" ".join(shlex.quote(w) for w in self.repro_ssh_argv()),
                                  shlex.quote(self.dest()), shlex.quote(remote),
                                  shlex.quote(binary))

    def close(self):
        """End the multiplexed master connection (called once per target)."""
        try:
            subprocess.run(self.base_argv() + ["-O", "exit", self.dest()], timeout=10,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pass

    def repro_ssh_argv(self):
        """ssh argv for a human: the same options minus the multiplexing."""
        argv, out, skip = self.base_argv(), [], False
        for i, w in enumerate(argv):
            if skip:
                skip = False
                continue
            if w == "-o" and i + 1 < len(argv) and argv[i + 1].startswith("Control"):
                skip = True
                continue
            out.append(w)
        return out


class AdbTransport(RemoteShellTransport):
    """adb:SERIAL — an Android device over adb (`adb -s SERIAL shell/push`).

    Never run against a real device (there is none on the build machine);
    the selftest drives it through a stand-in `adb` (fake_adb) that runs
    `shell` commands with the local sh and `push` with cp.  On the device
    it needs only the shared wrapper and toybox's `timeout`, `mktemp`,
    `nohup` and `tail`, which Android 7+ ships.  The work directories are
    under --adb-tmp (default /data/local/tmp)."""

    kind = "adb"

    @property
    def remote_tmp(self):
        return self.opts.adb_tmp

    def base(self):
        return [self.opts.adb] + (["-s", self.target.host] if self.target.host else [])

    def remote_argv(self, command):
        # adb shell returns the remote exit status since Android 7 (shell v2)
        return self.base() + ["shell", command]

    def sh(self, command, timeout=60, input_bytes=None, stdin_file=None):
        rc, out, err = super().sh(command, timeout, input_bytes, stdin_file)
        if rc != 0 and ("no devices" in err or "not found" in err or "offline" in err):
            rc = 255  # the device is gone: unreachable, not a command failure
        return rc, out, err

    def send_file(self, local, remote):
        p = subprocess.run(self.base() + ["push", local, remote], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=600)
        if p.returncode != 0:
            raise RuntimeError("adb push failed: %s" % p.stdout.decode()[-300:])

    def direct_command(self, binary, argv):
        base = " ".join(shlex.quote(w) for w in self.base())
        dst = self.remote_tmp + "/dq_stress"
        return ("%s push %s %s && %s shell %s" %
                (base, shlex.quote(binary), dst, base,
                 shlex.quote("chmod +x %s && %s " % (dst, dst) +
                             " ".join(shlex.quote(a) for a in argv))))


TRANSPORTS = {"host": LocalTransport, "qemu": QemuTransport, "ssh": SshTransport,
              "adb": AdbTransport}


def make(target, run_dir, opts):
    return TRANSPORTS[target.kind](target, run_dir, opts)
