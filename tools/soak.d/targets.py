"""Target specs: what `--targets` accepts, expanded into one Target per
(place, config) pair.

    host                         this machine, config `host`
    qemu                         every QEMU arm64 variant below
    qemu:arm64-llsc              LL/SC build on cortex-a53 (ARMv8.0: LSE would trap)
    qemu:arm64-lse               LSE build on max
    qemu:arm64-outline           outline-atomics build on cortex-a53 and on max
    qemu:arm64-dispatch          run-time dispatched build on cortex-a53 and on max
    qemu:CONFIG@CPU              one config on one CPU model
    ssh:[USER@]HOST[:PORT][/CONFIG]   a remote host; CONFIG defaults from its `uname -m`
    adb[:SERIAL][/CONFIG]        an Android device, through adb (--adb)
"""

import re
import shutil
import subprocess

QEMU_CPUS = {
    "arm64-llsc": ["cortex-a53"],
    "arm64-lse": ["max"],
    "arm64-outline": ["cortex-a53", "max"],
    "arm64-dispatch": ["cortex-a53", "max"],
}
DEFAULT_TARGETS = "host,qemu"
# which config a remote machine gets, by its `uname -m`
DEFAULT_REMOTE_CONFIG = {"x86_64": "host", "aarch64": "arm64-dispatch", "arm64": "arm64-dispatch"}


class TargetError(ValueError):
    pass


class Target:
    """One place to run one config.  `config` is None for a remote target
    until its architecture is known (see resolve_config)."""

    def __init__(self, kind, name, config=None, cpu=None, user=None, host=None, port=None):
        self.kind, self.name, self.config, self.cpu = kind, name, config, cpu
        self.user, self.host, self.port = user, host, port
        self.config_forced = config is not None
        self.arch = None

    @property
    def key(self):
        return (self.name, self.config)

    @property
    def slug(self):
        s = "%s__%s" % (self.name, self.config)
        return re.sub(r"[^A-Za-z0-9._-]+", "_", s)

    def spec(self):
        """A --targets word that names exactly this target and config."""
        if self.kind == "host":
            return "host"
        if self.kind == "qemu":
            return "qemu:%s@%s" % (self.config, self.cpu)
        return "%s/%s" % (self.name, self.config)

    def __repr__(self):
        return "Target(%s, %s)" % (self.name, self.config)


def parse_targets(text):
    out = []
    for word in [w.strip() for w in text.split(",") if w.strip()]:
        out.extend(parse_one(word))
    if not out:
        raise TargetError("no targets given")
    seen = set()
    for t in out:
        ident = (t.name, t.config)
        if ident in seen:
            raise TargetError("target %s given twice" % t.spec())
        seen.add(ident)
    return out


def parse_one(word):
    if word == "host":
        return [Target("host", "host", config="host")]
    if word == "qemu":
        return [t for cfg in QEMU_CPUS for t in parse_one("qemu:" + cfg)]
    if word.startswith("qemu:"):
        rest = word[5:]
        config, _, cpu = rest.partition("@")
        if config not in QEMU_CPUS:
            raise TargetError("unknown qemu config %r (one of %s)" %
                              (config, ", ".join(QEMU_CPUS)))
        cpus = [cpu] if cpu else QEMU_CPUS[config]
        return [Target("qemu", "qemu:" + c, config=config, cpu=c) for c in cpus]
    if word.startswith("ssh:"):
        m = re.fullmatch(r"ssh:(?:([^@/:]+)@)?([^@/:]+)(?::(\d+))?(?:/([\w.-]+))?", word)
        if not m:
            raise TargetError("bad ssh target %r (ssh:[USER@]HOST[:PORT][/CONFIG])" % word)
        user, host, port, config = m.groups()
        name = "ssh:%s%s%s" % (user + "@" if user else "", host, ":" + port if port else "")
        return [Target("ssh", name, config=config, user=user, host=host,
                       port=int(port) if port else None)]
    if word == "adb" or word.startswith("adb:") or word.startswith("adb/"):
        m = re.fullmatch(r"adb(?::([^/]+))?(?:/([\w.-]+))?", word)
        if not m:
            raise TargetError("bad adb target %r (adb[:SERIAL][/CONFIG])" % word)
        serial, config = m.groups()
        return [Target("adb", "adb:%s" % (serial or "default"), config=config, host=serial)]
    raise TargetError("unknown target %r (host, qemu[:CONFIG[@CPU]], ssh:..., adb:...)" % word)


def qemu_cpu_models(qemu):
    """The CPU models `QEMU -cpu help` lists, or None when QEMU cannot be run."""
    if not shutil.which(qemu):
        return None
    try:
        p = subprocess.run([qemu, "-cpu", "help"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    models = [l.split()[0] for l in p.stdout.decode(errors="replace").splitlines()[1:]
              if l.startswith(" ") and l.split()]
    return models or None


def check_qemu_cpus(tlist, qemu):
    """Raises TargetError for a QEMU target whose CPU model QEMU does not
    know, so a typo is an error before anything is built, not a lost run.
    True when checked, False when QEMU could not be asked (its probe then
    reports why)."""
    wanted = [t for t in tlist if t.kind == "qemu"]
    if not wanted:
        return True
    models = qemu_cpu_models(qemu)
    if models is None:
        return False
    bad = sorted({t.cpu for t in wanted if t.cpu not in models})
    if bad:
        raise TargetError("unknown QEMU CPU model%s %s (%s -cpu help lists: %s)" %
                          ("s" if len(bad) > 1 else "", ", ".join(repr(c) for c in bad),
                           qemu, ", ".join(models)))
    return True


def resolve_config(target, arch, remote_config):
    """Pick the config for a remote target from its `uname -m`."""
    target.arch = arch
    if target.config:
        return target.config
    if arch not in remote_config:
        raise TargetError("%s is %s: no config for that architecture (use %s/CONFIG or "
                          "--remote-config %s=CONFIG)" % (target.name, arch, target.name, arch))
    target.config = remote_config[arch]
    return target.config


def expected_atomics(target):
    """What dq_atomics() should report for this config on this CPU (None: any)."""
    c = target.config
    if c == "host":
        return "x86_64" if (target.arch or "x86_64") == "x86_64" else None
    if c in ("arm64-llsc", "arm64-lse", "arm64-outline"):
        return c
    if c == "arm64-dispatch" and target.kind == "qemu":
        return "arm64-lse" if target.cpu == "max" else "arm64-llsc"
    return None


def config_arch(config):
    return "aarch64" if config.startswith("arm64") else "x86_64"
