"""Locating and applying mutants, and running the gates on a mutated copy.

A mutant is a list of (path, start, end, replacement) changes to the
pristine sources of a workspace, plus its site (file:line and the original
token) and its mutation (a name that stays the same when the code moves:
a rule's name, or the function, the token and its rewrite).
"""

import hashlib
import os
import re
import shutil
import struct
import subprocess
import time
from collections import namedtuple

# Where rules search and the generator scans: the library and its arch layer.
SEARCH_ROOTS = ("deliqueue", "arch")
SOURCE_SUFFIXES = (".c", ".h")

Change = namedtuple("Change", "path start end text")
Mutant = namedtuple("Mutant", "mutation site what changes")


class RuleError(Exception):
    """A rule's snippet matched nothing, or more than once."""


def source_files(root):
    """Every C source and header under the search roots, sorted."""
    out = []
    for top in SEARCH_ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(("bazel-", ".")))
            for f in sorted(filenames):
                if f.endswith(SOURCE_SUFFIXES):
                    out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(out)


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def snippet_regex(snippet):
    """The snippet's tokens (words and single punctuation characters) with
    any whitespace, or none, between them: a reformatted line still
    matches, and uniqueness is checked anyway."""
    parts = re.findall(r"\w+|\S", snippet)
    if not parts:
        raise RuleError("empty snippet")
    return re.compile(r"\s*".join(re.escape(p) for p in parts))


def locate(root, snippet, files=None, texts=None):
    """(path, start, end) of the snippet's one match; RuleError otherwise."""
    rx = snippet_regex(snippet)
    hits = []
    for path in files if files is not None else source_files(root):
        text = texts[path] if texts is not None else read(root, path)
        for m in rx.finditer(text):
            hits.append((path, m.start(), m.end(), text))
    first = snippet.strip().splitlines()[0]
    if not hits:
        raise RuleError("snippet matches nothing under %s: %r"
                        % ("/, ".join(SEARCH_ROOTS) + "/", first))
    if len(hits) > 1:
        where = ", ".join("%s:%d" % (p, t.count("\n", 0, s) + 1) for p, s, _, t in hits)
        raise RuleError("snippet matches %d times (%s): %r" % (len(hits), where, first))
    return hits[0][:3]


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def rule_mutant(root, rule, files=None, texts=None):
    """The Mutant for a named rule, located in the tree at root."""
    changes, site = [], None
    for e in rule.edits:
        try:
            path, start, end = locate(root, e.find, files, texts)
        except RuleError as err:
            raise RuleError("rule %s: %s" % (rule.name, err)) from None
        changes.append(Change(path, start, end, e.replace))
        if site is None:
            text = texts[path] if texts is not None else read(root, path)
            at = text.find(e.token, start, end)
            site = "%s:%d %s" % (path, line_of(text, at if at >= 0 else start), e.token)
    return Mutant("rule " + rule.name, site, rule.what, changes)


def apply_changes(root, changes):
    """Writes the mutated files; returns {path: pristine text} to restore."""
    by_path = {}
    for c in changes:
        by_path.setdefault(c.path, []).append(c)
    saved = {}
    for path, cs in by_path.items():
        text = read(root, path)
        saved[path] = text
        cs.sort(key=lambda c: c.start)
        for a, b in zip(cs, cs[1:]):
            if a.end > b.start:
                raise RuleError("overlapping edits in %s" % path)
        for c in reversed(cs):
            text = text[:c.start] + c.text + text[c.end:]
        write(root, path, text)
    return saved


def write(root, path, text):
    full = os.path.join(root, path)
    tmp = full + ".mutants-tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, full)


def restore(root, saved):
    for path, text in saved.items():
        write(root, path, text)


# ---- the workspace: one persistent copy of the tree, one output base ------

def tracked_files(repo, tree):
    if tree == "head":
        out = subprocess.check_output(["git", "ls-tree", "-r", "-z", "--name-only", "HEAD"],
                                      cwd=repo)
    else:
        out = subprocess.check_output(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo)
    return [p.decode() for p in out.split(b"\0") if p]


def sync_workspace(repo, ws, tree):
    """Makes ws a copy of the repository's working tree (or HEAD), writing
    only files whose content differs, so that Bazel's action cache in the
    workspace's output base keeps every unchanged action."""
    os.makedirs(ws, exist_ok=True)
    files = tracked_files(repo, tree)
    want = set(files)
    for path in files:
        if tree == "head":
            data = subprocess.check_output(["git", "show", "HEAD:" + path], cwd=repo)
        else:
            src = os.path.join(repo, path)
            if os.path.islink(src) or not os.path.isfile(src):
                continue  # deleted in the working tree, or a submodule
            with open(src, "rb") as f:
                data = f.read()
        dst = os.path.join(ws, path)
        try:
            with open(dst, "rb") as f:
                if f.read() == data:
                    continue
        except OSError:
            pass
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as f:
            f.write(data)
        if os.access(os.path.join(repo, path), os.X_OK):
            os.chmod(dst, 0o755)
    for dirpath, dirnames, filenames in os.walk(ws):
        rel = os.path.relpath(dirpath, ws)
        dirnames[:] = [d for d in dirnames
                       if not (rel == "." and (d.startswith("bazel-") or d == ".sysroot"))]
        for f in filenames:
            p = os.path.normpath(os.path.join(rel, f))
            if p not in want:
                os.remove(os.path.join(ws, p))
    # git-ignored but needed by the arm64 configs' bazelrc
    link = os.path.join(ws, ".sysroot")
    if os.path.exists(os.path.join(repo, ".sysroot")) and not os.path.lexists(link):
        os.symlink(os.path.realpath(os.path.join(repo, ".sysroot")), link)


# ---- gates ----------------------------------------------------------------

Gate = namedtuple("Gate", "name bound args")

GateResult = namedtuple("GateResult", "outcome seconds detail")  # pass|same|killed|timeout|build-error

FAIL_LINE = re.compile(r"^(//\S+)\s+(FAILED TO BUILD|FAILED|TIMEOUT|FLAKY)\b", re.M)


def bazel_startup(output_base):
    # the server stays warm from gate to gate and mutant to mutant, and goes
    # away soon after the last (the machine is shared)
    return ["bazel", "--output_base=" + output_base, "--max_idle_secs=300"]


def bazel(output_base, command, resources, args):
    return bazel_startup(output_base) + [command] + resources + [
            # the first failing test ends the gate: a mutant that hangs costs
            # one test's timeout, not every test's
            "--nokeep_going", "--notest_keep_going",
            "--nocache_test_results", "--test_output=errors",
            # a mutant's objects are of no use to anyone else's build
            "--noremote_upload_local_results",
        ] + args


def bounded(cmd, ws, bound, out):
    """Runs cmd in ws for at most `bound` seconds; Bazel cancels cleanly on
    SIGINT.  (exit status, seconds)"""
    out.write("$ " + " ".join(cmd) + "\n")
    out.flush()
    start = time.monotonic()
    rc = subprocess.call(["timeout", "-s", "INT", "--kill-after=60", str(max(1, int(bound)))] +
                         cmd, cwd=ws, stdout=out, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    return rc, time.monotonic() - start


# ---- identical code -------------------------------------------------------
#
# A mutant that compiles to the same object code as the pristine tree under
# a gate's build links test binaries that run the same instructions, so
# that gate's tests cannot tell it from the pristine tree (a flaky test
# aside): running them would only repeat the baseline.  Such a gate is
# recorded as "same" without running its tests, and a mutant that is
# "same" under every gate is equivalent at the machine level on every
# build the farm makes (the trivial-compiler-equivalence check of the
# mutation-testing literature).  The comparison is over every object in
# the gate's configuration, so a stale object, a header's reach and a file
# built twice (PIC and not) are all covered; debug sections are left out.

def code_digest(path):
    """sha256 of an ELF object's sections, debug information left out
    (clang's DWARF 5 line table carries an MD5 of each source file, so any
    edit changes it; what runs does not depend on it).  Anything that is
    not a 64-bit little-endian ELF file is hashed whole."""
    with open(path, "rb") as f:
        data = f.read()
    h = hashlib.sha256()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        h.update(data)
        return h.hexdigest()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    for name_off, kind, _flags, _addr, offset, size in headers:
        end = data.index(b"\0", names_at + name_off)
        name = data[names_at + name_off:end]
        if name.startswith((b".debug", b".rela.debug", b".rel.debug")):
            continue
        h.update(name + b"\0" + struct.pack("<IQ", kind, size))
        if kind != 8:  # SHT_NOBITS has no contents
            h.update(data[offset:offset + size])
    return h.hexdigest()


def object_digests(bin_dir):
    """{path under bin_dir: code_digest} of every object file Bazel built
    there."""
    out = {}
    for dirpath, _, filenames in os.walk(bin_dir):
        for f in filenames:
            if f.endswith(".o"):
                full = os.path.join(dirpath, f)
                out[os.path.relpath(full, bin_dir)] = code_digest(full)
    return out


def gate_bin_dir(ws, output_base, gate, resources):
    """Where the gate's configuration puts its outputs (bazel info bazel-bin)."""
    configs = [a for a in gate.args if a.startswith("--config=")]
    out = subprocess.check_output(
        bazel_startup(output_base) + ["info"] + resources + configs + ["bazel-bin"],
        cwd=ws, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return os.path.realpath(out.decode().strip())


Pristine = namedtuple("Pristine", "bin_dir digests")


def pristine_objects(ws, output_base, gate, log, resources):
    """Builds the gate's targets in the pristine tree; a Pristine, or None
    when the build fails (then the gate always runs its tests)."""
    with open(log, "w") as out:
        rc, _ = bounded(bazel(output_base, "build", resources, gate.args), ws, gate.bound, out)
    if rc != 0:
        return None
    bin_dir = gate_bin_dir(ws, output_base, gate, resources)
    return Pristine(bin_dir, object_digests(bin_dir))


def run_gate(ws, output_base, gate, log, resources, pristine=None):
    """Runs one gate in ws.  With the gate's Pristine objects, builds first
    and answers "same" without running a test when no object differs."""
    start = time.monotonic()
    with open(log, "w") as out:
        if pristine is not None:
            rc, _ = bounded(bazel(output_base, "build", resources, gate.args), ws, gate.bound, out)
            if rc == 0:
                now = object_digests(pristine.bin_dir)
                differ = sorted(p for p in set(now) | set(pristine.digests)
                                if now.get(p) != pristine.digests.get(p))
                out.write("objects that differ from the pristine tree's: %s\n"
                          % (" ".join(differ) or "none"))
                if not differ:
                    return GateResult("same", time.monotonic() - start, "")
        left = gate.bound - (time.monotonic() - start)
        rc, _ = bounded(bazel(output_base, "test", resources, gate.args), ws, left, out)
    seconds = time.monotonic() - start
    with open(log, errors="replace") as f:
        text = f.read()
    fails = ["%s %s" % m for m in FAIL_LINE.findall(text)]
    detail = ",".join(fails[:4])
    tests_failed = [f for f in fails if not f.endswith("FAILED TO BUILD")]
    compile_error = re.search(r"C\+\+ compilation of rule|Linking of rule .* failed|"
                              r"^ERROR: .*(Analysis|Loading) .*failed|^\S+:\d+:\d+: error: ",
                              text, re.M)
    if rc == 0:
        outcome = "pass"
    elif rc in (124, 137) or (rc == 8 and seconds >= gate.bound - 1):
        outcome = "timeout"
    elif tests_failed or rc == 3:
        outcome = "killed"
        if not detail:
            errs = re.findall(r"^ERROR: (.*)$", text, re.M)
            detail = (errs[0] if errs else "bazel exit %d" % rc)[:200]
    else:
        outcome = "build-error"
        errs = re.findall(r"^\S+:\d+:\d+: error: .*$|^ERROR: .*$", text, re.M)
        detail = (errs[0] if errs else "bazel exit %d" % rc)[:200]
    return GateResult(outcome, seconds, detail)
