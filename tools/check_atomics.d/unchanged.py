#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_atomics --unchanged-from: prove two builds of the library emit the
same code, function by function.

  check_atomics --unchanged-from=REV [--config=X ...] [-v]
      builds the //deliqueue library targets at git revision REV (in a
      temporary git worktree, removed afterwards, with its own Bazel output
      base, expunged afterwards) and in the current tree (uncommitted edits
      included), in each config, and compares every object of the one with
      the same object of the other.  Default configs: the host build and
      arm64-llsc.
  check_atomics --compare OLD NEW [-v]
      the comparison alone, on two objects or two directories of objects
      (matched by relative path); no Bazel, no git.

Per object it prints `same` or `differs: functions f, g; data s`, then a
verdict.  Exit status: 0 every function (and every data section) of every
object is identical; 1 something differs, or an object is only on one side;
2 usage error, or a build could not be made.

What is compared: each function's instructions as `objdump -dr
--no-show-raw-insn` prints them, and each allocated data section's bytes and
relocations.  What is normalised, because it differs without the code
differing:
  - addresses: the address column is dropped; a branch inside a function
    reads as its offset in the function, a direct call as its callee's name;
  - relocations: the offset column is dropped; a target given as a section
    or a local label (.LC3, .rodata+0x40, .text.unlikely+0x10) is resolved
    to what it points at: the string literal's text for a mergeable string
    section, else the function or data object that holds it (and the offset
    in it), so a renumbered label or a moved literal reads the same;
  - GCC's numbering of local names (`x.0`, `f.constprop.1`,
    `__PRETTY_FUNCTION__.2`) is dropped;
  - the line-number argument of assert() (the third argument of
    __assert_fail, loaded just before the call) reads as __LINE__, so a line
    moved by an edit elsewhere in the file is no difference;
  - debug info, .eh_frame, symbol tables, section order and the object's
    file name are not compared (functions and data are matched by name).
A function moved to another section (.text vs .text.unlikely) differs.
"""

import argparse
import difflib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

DEFAULT_CONFIGS = ["host", "arm64-llsc"]
# How the builds run: the farm machine's 2 cores are shared.
BAZEL_FLAGS = ["--jobs=1", "--local_cpu_resources=1"]

SHF_ALLOC, SHF_EXECINSTR, SHF_STRINGS = 0x2, 0x4, 0x20
SHT_NOBITS, SHT_RELA, SHT_SYMTAB = 8, 4, 2
STT_OBJECT, STT_FUNC, STT_SECTION = 1, 2, 3
# x86_64 PC-relative relocations: the addend is the target minus the
# distance from the field to the end of the instruction (usually 4)
X86_PCREL = {2: "R_X86_64_PC32", 4: "R_X86_64_PLT32", 9: "R_X86_64_GOTPCREL",
             41: "R_X86_64_GOTPCRELX", 42: "R_X86_64_REX_GOTPCRELX",
             19: "R_X86_64_TLSGD", 20: "R_X86_64_TLSLD",
             22: "R_X86_64_GOTTPOFF"}

LOCAL_NUM_RE = re.compile(r"\.[0-9]+(?=$|[.+\-@])")


class ToolError(Exception):
    pass


class UsageError(Exception):
    pass


def run(cmd, cwd=None, quiet=False):
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        raise ToolError("cannot run %s" % cmd[0])
    if p.returncode != 0:
        err = p.stderr.strip().splitlines()
        raise ToolError("%s failed (exit %d)%s" % (
            " ".join(cmd), p.returncode,
            "" if quiet else ":\n  " + "\n  ".join(err[-15:])))
    return p.stdout


def strip_num(name):
    """GCC's numbering of a local name dropped: tls.3 -> tls,
    f.constprop.0 -> f.constprop, __PRETTY_FUNCTION__.2 -> ..."""
    return LOCAL_NUM_RE.sub("", name)


# ---- the ELF relocatable object, as far as the comparison needs it -------

class Elf:
    """Sections, symbols and relocations of an ELF64 little-endian object."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = data = f.read()
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ToolError("%s: not an ELF64 little-endian object" % path)
        self.machine = struct.unpack_from("<H", data, 18)[0]
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        self.sections = []
        for i in range(shnum):
            (name, typ, flags, _addr, off, size, link, info, _align,
             entsize) = struct.unpack_from("<IIQQQQIIQQ", data,
                                           shoff + i * shentsize)
            self.sections.append({"name": name, "type": typ, "flags": flags,
                                  "off": off, "size": size, "link": link,
                                  "info": info, "entsize": entsize})
        strtab = self.sections[shstrndx] if shnum else None
        for s in self.sections:
            s["name"] = self.cstr(strtab, s["name"])
        self.symbols = []
        for s in self.sections:
            if s["type"] != SHT_SYMTAB:
                continue
            names = self.sections[s["link"]]
            for k in range(s["size"] // 24):
                nm, info, _other, shndx, value, size = struct.unpack_from(
                    "<IBBHQQ", data, s["off"] + k * 24)
                self.symbols.append({"name": self.cstr(names, nm),
                                     "type": info & 0xF, "bind": info >> 4,
                                     "shndx": shndx, "value": value,
                                     "size": size})
        # per section index: its named functions and objects, by address
        self.holders = {}
        for sym in self.symbols:
            if sym["type"] in (STT_FUNC, STT_OBJECT) and sym["name"]:
                self.holders.setdefault(sym["shndx"], []).append(sym)

    def cstr(self, sec, off):
        if sec is None:
            return ""
        start = sec["off"] + off
        end = self.data.index(b"\0", start)
        return self.data[start:end].decode("utf-8", "replace")

    def contents(self, sec):
        if sec["type"] == SHT_NOBITS:
            return b""
        return self.data[sec["off"]:sec["off"] + sec["size"]]

    def relocations(self, shndx):
        """(offset, type, symbol, addend) of the relocations applied to
        section shndx."""
        out = []
        for s in self.sections:
            if s["type"] != SHT_RELA or s["info"] != shndx:
                continue
            for k in range(s["size"] // 24):
                off, info, addend = struct.unpack_from(
                    "<QQq", self.data, s["off"] + k * 24)
                out.append((off, info & 0xFFFFFFFF,
                            self.symbols[info >> 32], addend))
        return sorted(out, key=lambda r: r[0])

    def describe(self, sym, addend, pcrel_bias=0):
        """A relocation target (symbol + addend) as what it points at,
        independent of where the compiler laid it out."""
        if sym is None:
            return "?%+d" % addend
        named = sym["type"] in (STT_FUNC, STT_OBJECT) or (
            sym["name"] and not sym["name"].startswith(".L") and
            sym["type"] != STT_SECTION)
        if named or not 0 < sym["shndx"] < len(self.sections):
            return "%s%s" % (strip_num(sym["name"]),
                             "%+d" % addend if addend else "")
        sec = self.sections[sym["shndx"]]
        off = sym["value"] + addend
        where = off + pcrel_bias  # the byte the instruction reaches
        if sec["flags"] & SHF_STRINGS and sec["entsize"] == 1:
            body = self.contents(sec)
            if 0 <= where < len(body):
                start = body.rfind(b"\0", 0, where) + 1
                end = body.find(b"\0", where)
                text = body[start:end if end >= 0 else len(body)]
                return "%r%s" % (text.decode("latin-1"),
                                 "%+d" % (off - start) if off != start else "")
        for h in sorted(self.holders.get(sym["shndx"], []),
                        key=lambda h: h["value"]):
            if h["value"] <= where < h["value"] + max(h["size"], 1):
                d = off - h["value"]
                return "%s%s" % (strip_num(h["name"]), "%+d" % d if d else "")
        return "%s%+d" % (strip_num(sec["name"]), off)


# ---- an object's functions and data, normalised --------------------------

FUNC_HDR_RE = re.compile(r"^([0-9a-fA-F]+) <([^>]+)>:\s*$")
SECTION_RE = re.compile(r"^Disassembly of section (\S+):\s*$")
INSN_RE = re.compile(r"^\s*([0-9a-fA-F]+):\s*(.*)$")
RELOC_RE = re.compile(r"^\s*([0-9a-fA-F]+):\s+(R_[A-Z0-9_]+)\s+(\S+)?")
ADDR_SYM_RE = re.compile(r"\b(?:0x)?[0-9a-fA-F]+ <([^>]+)>")
SYM_OFF_RE = re.compile(r"^(.*?)(?:\+0x([0-9a-fA-F]+))?$")
PAD_RE = re.compile(r"^(?:(?:data16|cs|rex\.W) )*(?:nop[wl]?|xchg %ax,%ax)\b")
ASSERT_FAIL = ("__assert_fail", "__assert", "__assert2",
               "__assert_rtn")


def find_objdump(machine):
    names = {0xB7: ["aarch64-linux-gnu-objdump", "llvm-objdump-14",
                    "llvm-objdump", "objdump"],
             0x3E: ["objdump", "llvm-objdump-14", "llvm-objdump"]}.get(
        machine, ["objdump"])
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    raise ToolError("none of %s found" % ", ".join(names))


class Object:
    """One object file: {function: [normalised lines]}, {data section:
    (size, bytes, relocations)}."""

    def __init__(self, path):
        self.path = path
        self.elf = elf = Elf(path)
        self.machine = elf.machine
        self.funcs = {}
        self.names = {}  # the name objdump printed, by key in funcs
        self.line_args = 0  # assert() line arguments normalised
        self._disassemble(find_objdump(elf.machine))
        self.data = {}
        for i, s in enumerate(elf.sections):
            if not s["flags"] & SHF_ALLOC or s["flags"] & SHF_EXECINSTR:
                continue
            if s["name"] in (".eh_frame", ".note.GNU-stack") or \
                    s["name"].startswith(".note"):
                continue
            relocs = tuple((off, typ, elf.describe(sym, add))
                           for off, typ, sym, add in elf.relocations(i))
            body = elf.contents(s)
            if s["flags"] & SHF_STRINGS and not relocs:
                # mergeable literals: the linker dedups them, their order
                # is not code; the set of strings is what is compared
                body = tuple(sorted(set(body.split(b"\0"))))
                self.data[s["name"]] = (len(body), body, relocs)
                continue
            self.data[s["name"]] = (s["size"], body, relocs)

    def _disassemble(self, objdump):
        x86 = self.machine == 0x3E
        text = run([objdump, "-dr", "--no-show-raw-insn", self.path])
        section, name, lines, relocs = None, None, None, {}
        pcrel_types = set(X86_PCREL.values()) if x86 else set()

        def close():
            if name is not None:
                # the padding after the last instruction, up to the next
                # function's alignment, is not code
                while lines and PAD_RE.match(lines[-1]):
                    lines.pop()
                self._normalise_assert(lines, x86)
                key = strip_num(name)
                k = 2
                while key in self.funcs:  # two clones, numbered alike
                    key = "%s#%d" % (strip_num(name), k)
                    k += 1
                self.funcs[key] = [section] + [l for l in lines]
                self.names[key] = name

        for raw in text.splitlines():
            m = SECTION_RE.match(raw)
            if m:
                close()
                section, name, lines = m.group(1), None, None
                relocs = {}
                for i, sec in enumerate(self.elf.sections):
                    if sec["name"] == m.group(1) and \
                            sec["flags"] & SHF_EXECINSTR:
                        relocs = {off: (sym, add) for off, _t, sym, add
                                  in self.elf.relocations(i)}
                        break
                continue
            m = FUNC_HDR_RE.match(raw)
            if m:
                close()
                name, lines = m.group(2), []
                continue
            if name is None:
                continue
            m = RELOC_RE.match(raw)
            if m:
                rtype, target = m.group(2), m.group(3) or ""
                rel = relocs.get(int(m.group(1), 16))
                bias = 4 if rtype in pcrel_types else 0
                if rel is not None:
                    desc = self.elf.describe(rel[0], rel[1], bias)
                else:  # not found in the ELF: objdump's own words
                    desc = strip_num(target)
                if lines and not lines[-1].startswith("    R_"):
                    # the target objdump printed for the unrelocated field
                    # (0, or the next instruction) says nothing: the
                    # relocation does
                    lines[-1] = re.sub(r"\s*<[^>]*>", "", lines[-1])
                lines.append("    %s %s" % (rtype, desc))
                continue
            m = INSN_RE.match(raw)
            if not m:
                continue
            body = m.group(2).strip()
            if not body or body.startswith("..."):
                continue
            # comments: x86 "# 27 <f+0x27>", arm64 "// #241"
            body = re.split(r"\s+(?:#|//)\s", body, 1)[0].strip()
            body = re.sub(r"\s+", " ", body)

            def sym_ref(mm):
                target = mm.group(1)
                s = SYM_OFF_RE.match(target)
                if s.group(1) == name:  # a branch inside the function
                    return "<.+0x%s>" % (s.group(2) or "0")
                return "<%s>" % strip_num(target)
            body = ADDR_SYM_RE.sub(sym_ref, body)
            lines.append(body)
        close()

    def _normalise_assert(self, lines, x86):
        """The line-number argument of assert()'s failure call reads as
        __LINE__: the last load of the third argument register before the
        call, inside the same straight-line run."""
        for i, l in enumerate(lines):
            if not l.startswith("    R_") or \
                    l.split()[-1].split("+")[0].split("-")[0] not in \
                    ASSERT_FAIL:
                continue
            j = i - 1
            while j >= 0 and lines[j].startswith("    R_"):
                j -= 1  # the call itself
            j -= 1
            steps = 0
            while j >= 0 and steps < 12:
                l2 = lines[j]
                if not l2.startswith("    R_"):
                    steps += 1
                    mnem = l2.split(" ", 1)[0]
                    if mnem.startswith(("j", "call", "ret", "b", "cb", "tb")) \
                            and not mnem.startswith("bt"):
                        break
                    if x86:
                        mm = re.match(r"^(mov[lq]?) \$0x[0-9a-f]+,%(edx|rdx)$",
                                      l2)
                    else:
                        mm = re.match(r"^(mov[kz]?) (w2|x2), #0x[0-9a-f]+$",
                                      l2) or re.match(
                            r"^(mov) (w2|x2), #[0-9]+$", l2)
                    if mm:
                        lines[j] = "%s __LINE__ -> %s" % (mm.group(1),
                                                          mm.group(2))
                        self.line_args += 1
                        break
                j -= 1


def compare_objects(old, new, verbose, out, label_old="old",
                    label_new="new"):
    """(differing function names, differing data sections); prints the
    differences when verbose."""
    funcs, data = [], []
    for f in sorted(set(old.funcs) | set(new.funcs)):
        a, b = old.funcs.get(f), new.funcs.get(f)
        if a == b:
            continue
        shown = new.names.get(f) or old.names.get(f) or f
        if a is None:
            funcs.append("%s (only in %s)" % (shown, label_new))
        elif b is None:
            funcs.append("%s (only in %s)" % (shown, label_old))
        else:
            funcs.append(shown)
        if verbose and a is not None and b is not None:
            for l in difflib.unified_diff(a, b, "%s %s" % (label_old, f),
                                          "%s %s" % (label_new, f),
                                          lineterm="", n=2):
                out.write("      " + l + "\n")
    for s in sorted(set(old.data) | set(new.data)):
        a, b = old.data.get(s), new.data.get(s)
        if a == b:
            continue
        what = s
        if a is None or b is None:
            what += " (only in %s)" % (label_new if a is None else label_old)
        data.append(what)
        if verbose and a is not None and b is not None:
            out.write("      data %s: size %d -> %d, bytes %s, relocations "
                      "%s\n" % (s, a[0], b[0],
                                "same" if a[1] == b[1] else "differ",
                                "same" if a[2] == b[2] else "differ"))
    return funcs, data


def verdict_line(funcs, data):
    if not funcs and not data:
        return "same"
    parts = []
    if funcs:
        parts.append("functions " + ", ".join(funcs))
    if data:
        parts.append("data " + ", ".join(data))
    return "differs: " + "; ".join(parts)


def object_files(top):
    """{relative path: path} of the objects under top (or top itself)."""
    if os.path.isfile(top):
        return {os.path.basename(top): top}
    found = {}
    for d, _dirs, files in os.walk(top):
        for f in files:
            if f.endswith(".o"):
                p = os.path.join(d, f)
                found[os.path.relpath(p, top)] = p
    return found


def compare_trees(old_top, new_top, verbose, out, prefix="",
                  label_old="old", label_new="new"):
    """Compares the objects of two trees (or two objects); prints a line per
    object; returns (objects compared, objects that differ)."""
    if os.path.isfile(old_top) and os.path.isfile(new_top):
        pairs = {os.path.basename(new_top): (old_top, new_top)}
    else:
        a, b = object_files(old_top), object_files(new_top)
        pairs = {k: (a.get(k), b.get(k)) for k in set(a) | set(b)}
    if not pairs:
        raise ToolError("no objects under %s or %s" % (old_top, new_top))
    width = max(len(prefix + k) for k in pairs)
    bad = 0
    for k in sorted(pairs):
        pa, pb = pairs[k]
        if pa is None or pb is None:
            line = "differs: object only in %s" % (
                label_new if pa is None else label_old)
            out.write("%-*s  %s\n" % (width, prefix + k, line))
            bad += 1
            continue
        old, new = Object(pa), Object(pb)
        if old.machine != new.machine:
            raise ToolError("%s and %s are for different machines" % (pa, pb))
        buf = _Buf()
        funcs, data = compare_objects(old, new, verbose, buf,
                                      label_old, label_new)
        line = verdict_line(funcs, data)
        if verbose:
            line += "  (%d functions, %d data sections%s)" % (
                len(new.funcs), len(new.data),
                ", %d assert line arguments" % new.line_args
                if new.line_args else "")
        out.write("%-*s  %s\n" % (width, prefix + k, line))
        out.write(buf.text)
        bad += 1 if (funcs or data) else 0
    return len(pairs), bad


class _Buf:
    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s


# ---- the builds ----------------------------------------------------------

def config_flags(config):
    return [] if config == "host" else ["--config=" + config]


def bazel_objects(bazel, root, config, dest, output_base=None):
    """Builds the library targets of the tree at root in config and copies
    their objects to dest/<target>/<object>."""
    startup = ["--output_base=" + output_base] if output_base else []
    flags = config_flags(config)
    query = ('kind("cc_library", //deliqueue:*) except '
             'attr("tags", "manual", //deliqueue:*)')
    targets = run([bazel] + startup + ["query", "--noshow_progress", query],
                  cwd=root).split()
    if not targets:
        raise ToolError("%s: no library targets in //deliqueue" % root)
    run([bazel] + startup + ["build", "--noshow_progress"] + flags +
        BAZEL_FLAGS + targets, cwd=root)
    actions = run([bazel] + startup + [
        "aquery", "--noshow_progress", "--output=text"] + flags +
        ['mnemonic("CppCompile", deps(%s))' % " + ".join(targets)], cwd=root)
    execroot = run([bazel] + startup + ["info", "--noshow_progress"] +
                   flags + ["execution_root"], cwd=root).strip()
    n = 0
    for m in re.finditer(r"Outputs: \[([^\]]*)\]", actions):
        for p in m.group(1).split(","):
            p = p.strip()
            mm = re.search(r"/bin/deliqueue/_objs/(.+\.o)$", p)
            if not mm:
                continue
            to = os.path.join(dest, mm.group(1))
            os.makedirs(os.path.dirname(to), exist_ok=True)
            shutil.copyfile(os.path.join(execroot, p), to)
            n += 1
    if not n:
        raise ToolError("%s: the %s build compiled no //deliqueue objects"
                        % (root, config))


def rmtree(path):
    def onerror(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), 0o755)
            os.chmod(p, 0o755)
        except OSError:
            pass
        func(p)
    if os.path.lexists(path):
        shutil.rmtree(path, onerror=onerror)


def unchanged_from(args, out):
    root = run(["git", "-C", os.path.dirname(os.path.abspath(__file__)),
                "rev-parse", "--show-toplevel"]).strip()
    try:
        rev = run(["git", "-C", root, "rev-parse", "--verify", "--quiet",
                   args.unchanged_from + "^{commit}"], quiet=True).strip()
    except ToolError:
        raise UsageError("%s: not a revision" % args.unchanged_from)
    configs = args.config or DEFAULT_CONFIGS
    bazel = args.bazel or shutil.which("bazel") or "bazel"
    sysroot = None
    if any(c.startswith("arm64") for c in configs):
        sysroot = os.path.realpath(os.path.join(root, ".sysroot"))
        if not os.path.isdir(os.path.join(sysroot, "arm64")):
            raise ToolError("the arm64 configs need %s/.sysroot (made by "
                            "tools/bootstrap.sh)" % root)
    tmp = tempfile.mkdtemp(prefix="dq-unchanged-")
    tree = os.path.join(tmp, "tree")
    output_base = os.path.join(tmp, "output_base")
    objs = os.path.join(tmp, "objs")
    added = False
    try:
        run(["git", "-C", root, "worktree", "add", "--detach", tree, rev])
        added = True
        if sysroot:
            link = os.path.join(tree, ".sysroot")
            if not os.path.isdir(os.path.join(link, "arm64")):
                if os.path.lexists(link):
                    os.remove(link) if os.path.islink(link) or \
                        os.path.isfile(link) else rmtree(link)
                os.symlink(sysroot, link)
        total = bad = 0
        for config in configs:
            old = os.path.join(objs, "rev", config)
            new = os.path.join(objs, "tree", config)
            sys.stderr.write("check_atomics: building %s at %s and in the "
                             "current tree\n" % (config, rev[:12]))
            bazel_objects(bazel, tree, config, old, output_base)
            bazel_objects(bazel, root, config, new)
            n, b = compare_trees(old, new, args.verbose, out,
                                 prefix=config + "  ",
                                 label_old=args.unchanged_from,
                                 label_new="tree")
            total, bad = total + n, bad + b
    finally:
        if os.path.isdir(output_base):
            try:
                run([bazel, "--output_base=" + output_base, "clean",
                     "--expunge"], cwd=tree if os.path.isdir(tree) else tmp)
            except ToolError as e:
                sys.stderr.write("check_atomics: %s\n" % e)
            try:
                run([bazel, "--output_base=" + output_base, "shutdown"],
                    cwd=tree if os.path.isdir(tree) else tmp)
            except ToolError:
                pass
        if added:
            try:
                run(["git", "-C", root, "worktree", "remove", "--force",
                     tree])
            except ToolError:
                pass
        rmtree(tmp)
        if added:
            run(["git", "-C", root, "worktree", "prune"])
    return total, bad, "%s vs current tree, %s" % (
        args.unchanged_from, ", ".join(configs))


def main(argv, out=sys.stdout):
    ap = argparse.ArgumentParser(
        prog="check_atomics",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--unchanged-from", metavar="REV",
                      help="compare the build at git revision REV with the "
                      "current tree's")
    mode.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"),
                      help="compare two objects, or two directories of "
                      "objects")
    ap.add_argument("--config", action="append", metavar="X",
                    help="a Bazel config of .bazelrc, or `host` (repeat it "
                    "for several; default: %s)" % " ".join(DEFAULT_CONFIGS))
    ap.add_argument("--bazel", help="the bazel to run (default: on PATH)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print each differing function's normalised diff")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        if args.compare:
            if args.config:
                raise UsageError("--config goes with --unchanged-from")
            for p in args.compare:
                if not os.path.exists(p):
                    raise UsageError("%s: no such file or directory" % p)
            total, bad = compare_trees(args.compare[0], args.compare[1],
                                       args.verbose, out)
            what = "%s vs %s" % tuple(args.compare)
        else:
            total, bad, what = unchanged_from(args, out)
    except UsageError as e:
        sys.stderr.write("check_atomics: %s\n" % e)
        return 2
    except ToolError as e:
        sys.stderr.write("check_atomics: ERROR %s\n" % e)
        return 2
    if bad:
        out.write("check_atomics: DIFFERS %d of %d objects (%s)\n"
                  % (bad, total, what))
        return 1
    out.write("check_atomics: UNCHANGED all %d objects, every function "
              "identical (%s)\n" % (total, what))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
