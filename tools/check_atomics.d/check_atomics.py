#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_atomics: prove from the disassembly which atomics a build uses.

The hot paths must compile to the direct instruction for each target,
checked mechanically, not assumed.  This tool disassembles a built library
(archive, object, shared object or executable) and asserts, for every hot
function and everything it calls inside the library (its call closure), the
instruction families of one build variant:

  --expect=llsc     exclusive load/store retry loops (ldxr/ldaxr + stxr/stlxr
                    + a backward branch); no LSE instruction anywhere in the
                    library (an ARMv8.0 CPU would trap); no __aarch64_* call.
  --expect=lse      LSE atomics (cas*, swp*, ldadd*, ldset*, ldclr*, ldeor*,
                    stadd*...); no exclusive instruction in the hot closures;
                    no __aarch64_* call anywhere.
  --expect=outline  calls to the __aarch64_{cas,swp,ldadd,...}N_ORDER helpers;
                    no inline LSE and no exclusive loop in the hot closures.
  --expect=dispatch every hot function F is an IFUNC symbol, F__llsc passes
                    the llsc rules and F__lse the lse rules, and neither
                    copy calls into the other.
  --expect=x86_64   lock cmpxchg / xchg with memory / lock xadd (or another
                    lock-prefixed read-modify-write); no libatomic call.

Exit status: 0 the build is what was expected; 1 it is not (each violation
is printed); 2 the tool could not check (bad arguments, missing input or
hot function, wrong file format).  A negative test asserts status 1.

Usage: check_atomics --expect=VARIANT [--hot=f,g,...] [--allow-missing]
                     [--objdump=PATH] [--readelf=PATH] [-v] FILE...
       check_atomics --unchanged-from=REV [--config=X ...] [-v]
       check_atomics --compare OLD NEW [-v]
When several FILEs are given and some are archives (.a), the shared objects
(.so) among them are ignored (Bazel hands a cc_library's .a and .so).

The second mode, --unchanged-from=REV (and its Bazel-free core, --compare),
proves that two builds of the library emit the same code, function by
function: the library at git revision REV against the current tree, in the
host and arm64-llsc configs unless --config says otherwise.  It is
unchanged.py here; `check_atomics --unchanged-from=REV --help` describes it.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

# The queue's hot atomics: push CAS, cancel's state CAS and
# free-list push, the consumer's free-list exchange and delivery CAS.
DEFAULT_HOT = [
    "dq_post_at", "dq_post", "dq_post_delayed", "dq_post_at_front",
    "dq_cancel", "dq_remove", "dq_try_next", "dq_next_until",
]

LSE_RE = re.compile(
    r"^(casp?|swp|ld(add|clr|eor|set|smax|smin|umax|umin)|"
    r"st(add|clr|eor|set|smax|smin|umax|umin))(a|l|al)?(b|h)?$")
LOAD_EXCL_RE = re.compile(r"^ld(a)?xr(b|h)?$|^ld(a)?xp$")
STORE_EXCL_RE = re.compile(r"^st(l)?xr(b|h)?$|^st(l)?xp$")
HELPER_RE = re.compile(
    r"^__aarch64_(cas|swp|ldadd|ldclr|ldeor|ldset)(1|2|4|8|16)_"
    r"(relax|acq|rel|acq_rel|sync)$")
AARCH64_CALLS = ("bl", "b")  # b: tail call
X86_CALLS = ("call", "callq", "jmp", "jmpq")

FUNC_HDR_RE = re.compile(r"^([0-9a-fA-F]+) <([^>]+)>:\s*$")
# "  40:\tc8dffc20 \tldar\tx0, [x1]"  or with --no-show-raw-insn
INSN_RE = re.compile(r"^\s*([0-9a-fA-F]+):\s+(.*)$")
RELOC_RE = re.compile(r"^\s*[0-9a-fA-F]+:\s+(R_[A-Z0-9_]+)\s+(\S+)")
TARGET_RE = re.compile(r"<([^>+]+)(\+0x[0-9a-fA-F]+)?>")


class ToolError(Exception):
    pass


class Insn:
    __slots__ = ("addr", "mnem", "ops", "callee", "target")

    def __init__(self, addr, mnem, ops):
        self.addr = addr
        self.mnem = mnem
        self.ops = ops
        self.callee = None  # symbol called (from a relocation or <sym>)
        self.target = None  # numeric branch target inside the section


class Func:
    def __init__(self, name, member):
        self.name = name
        self.member = member
        self.insns = []


def run(cmd):
    try:
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        raise ToolError("cannot run %s" % cmd[0])
    except subprocess.CalledProcessError as e:
        raise ToolError("%s failed: %s" % (" ".join(cmd), e.stderr.strip()))
    return out.stdout


def elf_machine(path):
    """'aarch64' or 'x86_64' from the first ELF found in path."""
    with open(path, "rb") as f:
        data = f.read(1 << 20)
    off = data.find(b"\x7fELF")
    if off < 0:
        raise ToolError("%s: no ELF object inside" % path)
    machine = int.from_bytes(data[off + 18:off + 20], "little")
    return {0xB7: "aarch64", 0x3E: "x86_64"}.get(machine, "0x%x" % machine)


def find_tool(names, given):
    if given:
        return given
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    raise ToolError("none of %s found" % ", ".join(names))


def disassemble(path, objdump):
    """{name: Func} for every function symbol disassembled in path."""
    text = run([objdump, "-dr", "--no-show-raw-insn", path])
    funcs = {}
    cur = None
    member = os.path.basename(path)
    for line in text.splitlines():
        if line.endswith("file format elf64-littleaarch64") or \
                line.endswith("file format elf64-x86-64"):
            member = line.split(":")[0]
            continue
        m = FUNC_HDR_RE.match(line)
        if m:
            cur = Func(m.group(2), member)
            # static functions of the same name may sit in several members
            # (in the dispatched archive, one per variant): keep them all,
            # keyed by member too; calls resolve inside the caller's member
            # first (see resolve())
            funcs.setdefault(cur.name, cur)
            funcs.setdefault((member, cur.name), cur)
            continue
        if cur is None:
            continue
        m = RELOC_RE.match(line)
        if m:
            if cur.insns:
                # the relocation names the real callee of an unlinked call
                sym = re.sub(r"[-+]0x[0-9a-fA-F]+$", "", m.group(2))
                cur.insns[-1].callee = sym
            continue
        m = INSN_RE.match(line)
        if not m:
            continue
        body = m.group(2).strip()
        if not body or body.startswith("..."):
            continue
        parts = body.split(None, 1)
        mnem = parts[0]
        ops = parts[1] if len(parts) > 1 else ""
        if mnem in ("lock", "rep", "repz", "repnz", "notrack", "bnd") and ops:
            sub = ops.split(None, 1)
            mnem = mnem + " " + sub[0]
            ops = sub[1] if len(sub) > 1 else ""
        ins = Insn(int(m.group(1), 16), mnem, ops)
        t = TARGET_RE.search(ops)
        if t:
            # a branch inside the section: objdump prints the address first
            a = re.search(r"(?:^|[\s,])([0-9a-fA-F]+)\s+<[^>]+>", ops)
            if a:
                ins.target = int(a.group(1), 16)
            if t.group(2) is None:
                ins.callee = t.group(1)
        cur.insns.append(ins)
    return funcs


def ifunc_symbols(path, readelf):
    out = run([readelf, "-sW", path])
    names = set()
    for line in out.splitlines():
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) >= 8 and f[3] == "IFUNC" and f[6] != "UND":
            names.add(f[7].split("@")[0])
    return names


def calls(insn, arch):
    """The symbol insn transfers control to by call or tail call, else None."""
    if arch == "aarch64":
        if insn.mnem in AARCH64_CALLS:
            return insn.callee
        return None
    if insn.mnem in X86_CALLS:
        return insn.callee
    return None


def resolve(funcs, member, name):
    """The function `name` as a call from `member` reaches it: the member's
    own (a static function) first, else the library's global one."""
    return funcs.get((member, name)) or funcs.get(name)


def closure(root, funcs, arch):
    """Functions reached from root through calls inside the library (as Func
    objects), and the external symbols called from them."""
    seen, external, todo = [], set(), [funcs[root]]
    while todo:
        fn = todo.pop()
        if any(fn is s for s in seen):
            continue
        seen.append(fn)
        for ins in fn.insns:
            c = calls(ins, arch)
            if c is None:
                continue
            c = c.split("@")[0]
            callee = resolve(funcs, fn.member, c)
            if callee is not None:
                if callee is not fn:
                    todo.append(callee)  # defined in the library: follow it
            else:
                external.add(c)  # libc, a helper, a PLT stub
    return seen, external


def has_llsc_loop(func):
    """An exclusive load, a later exclusive store, and a branch after the
    store back to (or before) the load: the LL/SC retry loop."""
    loads = [i.addr for i in func.insns if LOAD_EXCL_RE.match(i.mnem)]
    if not loads:
        return False
    for idx, ins in enumerate(func.insns):
        if not STORE_EXCL_RE.match(ins.mnem):
            continue
        for br in func.insns[idx + 1:idx + 6]:
            if br.target is not None and br.mnem.split(".")[0] in (
                    "cbnz", "cbz", "b", "tbnz", "tbz"):
                if any(br.target <= l < ins.addr for l in loads):
                    return True
    return False


def families(fns, arch):
    """Each instruction family's occurrences over the functions `fns`."""
    fam = {"lse": [], "excl": [], "helper": [], "x86_rmw": [],
           "libatomic": []}
    for fn in fns:
        n = fn.name
        for ins in fn.insns:
            tag = "%s: %s %s" % (n, ins.mnem, ins.ops)
            if arch == "aarch64":
                if LSE_RE.match(ins.mnem):
                    fam["lse"].append(tag)
                if LOAD_EXCL_RE.match(ins.mnem) or \
                        STORE_EXCL_RE.match(ins.mnem):
                    fam["excl"].append(tag)
            else:
                if ins.mnem.startswith("lock ") or (
                        ins.mnem.startswith("xchg") and "(" in ins.ops):
                    fam["x86_rmw"].append(tag)
            c = calls(ins, arch)
            if c:
                c = c.split("@")[0]
                if c.startswith("__aarch64_"):
                    fam["helper"].append(tag)
                if c.startswith("__atomic_") or c.startswith("__sync_"):
                    fam["libatomic"].append(tag)
    return fam


def check_variant(variant, roots, funcs, arch, errors, notes, suffix=""):
    """Append to errors every way the functions roots (+suffix) and their
    closures differ from `variant`."""
    want_arch = "x86_64" if variant == "x86_64" else "aarch64"
    if arch != want_arch:
        errors.append("library is %s, --expect=%s needs %s"
                      % (arch, variant, want_arch))
        return
    # the whole library (in the dispatched archive: the members that hold
    # this variant's copy)
    members = set(fn.member for k, fn in funcs.items()
                  if isinstance(k, str) and (not suffix or k.endswith(suffix)))
    every = [fn for k, fn in funcs.items()
             if isinstance(k, tuple) and k[0] in members]
    whole = families(every, arch)
    if variant == "llsc" and whole["lse"]:
        errors.append("llsc: LSE instructions in the library (an ARMv8.0 "
                      "CPU traps on them): %s" % "; ".join(whole["lse"][:5]))
    if variant in ("llsc", "lse") and whole["helper"]:
        errors.append("%s: calls to outline helpers: %s"
                      % (variant, "; ".join(whole["helper"][:5])))
    if whole["libatomic"]:
        errors.append("%s: calls to libatomic: %s"
                      % (variant, "; ".join(whole["libatomic"][:5])))
    for root in roots:
        name = root + suffix
        seen, external = closure(name, funcs, arch)
        fam = families(seen, arch)
        where = name if len(seen) == 1 else "%s (+%s)" % (
            name, ",".join(fn.name for fn in seen[1:]))
        if variant == "llsc":
            if not any(has_llsc_loop(fn) for fn in seen):
                errors.append("llsc: %s has no LL/SC retry loop" % where)
        elif variant == "lse":
            if not fam["lse"]:
                errors.append("lse: %s has no LSE instruction" % where)
            if fam["excl"]:
                errors.append("lse: exclusive instructions in %s: %s"
                              % (where, "; ".join(fam["excl"][:5])))
        elif variant == "outline":
            helpers = [c for c in external if HELPER_RE.match(c)]
            if not helpers:
                errors.append("outline: %s calls no __aarch64_* helper"
                              % where)
            if fam["lse"] or fam["excl"]:
                errors.append("outline: inline atomics in %s: %s"
                              % (where, "; ".join((fam["lse"] +
                                                   fam["excl"])[:5])))
        elif variant == "x86_64":
            if not fam["x86_rmw"]:
                errors.append("x86_64: %s has no lock-prefixed or xchg "
                              "read-modify-write" % where)
        if suffix:
            # a copy must stay inside itself: a call into the other copy
            # would run the other variant's atomics
            other = [fn.name for fn in seen
                     if re.search(r"__(llsc|lse)$", fn.name)
                     and not fn.name.endswith(suffix)]
            if other:
                errors.append("dispatch: %s calls into the other copy: %s"
                              % (name, ", ".join(other)))
        summary = {k: len(v) for k, v in fam.items() if v}
        notes.append("%-8s %-40s %s%s" % (variant, where, summary,
                                         (" calls " + ",".join(sorted(
                                             c for c in external
                                             if c.startswith("__aarch64_"))))
                                         if any(c.startswith("__aarch64_")
                                                for c in external) else ""))


def main(argv):
    if any(a.split("=")[0] in ("--unchanged-from", "--compare")
           for a in argv):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import unchanged
        return unchanged.main(argv)
    ap = argparse.ArgumentParser(
        prog="check_atomics",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--expect", required=True,
                    choices=["llsc", "lse", "outline", "dispatch", "x86_64"])
    ap.add_argument("--hot", default=",".join(DEFAULT_HOT),
                    help="comma-separated hot functions (default: the queue's)")
    ap.add_argument("--allow-missing", action="store_true",
                    help="skip hot functions the library does not define")
    ap.add_argument("--objdump")
    ap.add_argument("--readelf")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)

    files = list(args.files)
    if any(f.endswith(".a") for f in files):
        files = [f for f in files if not f.endswith(".so")]
    for f in files:
        if not os.path.isfile(f):
            raise ToolError("%s: no such file" % f)
    arch = elf_machine(files[0])
    if arch == "aarch64":
        objdump = find_tool(["aarch64-linux-gnu-objdump", "llvm-objdump-14",
                             "llvm-objdump"], args.objdump)
        readelf = find_tool(["aarch64-linux-gnu-readelf", "readelf"],
                            args.readelf)
    else:
        objdump = find_tool(["objdump", "llvm-objdump"], args.objdump)
        readelf = find_tool(["readelf"], args.readelf)

    funcs, ifuncs = {}, set()
    for f in files:
        if elf_machine(f) != arch:
            raise ToolError("%s is %s, %s is %s"
                            % (f, elf_machine(f), files[0], arch))
        for key, fn in disassemble(f, objdump).items():
            funcs.setdefault(key, fn)
        ifuncs |= ifunc_symbols(f, readelf)

    # an IFUNC symbol names its resolver, which objdump labels with the
    # resolver's own name: the symbol's code is the resolver (no atomics)
    for name in ifuncs:
        if name not in funcs:
            funcs[name] = Func(name, "<ifunc resolver>")

    roots = [h for h in args.hot.split(",") if h]
    errors, notes = [], []
    suffixes = {"dispatch": ["__llsc", "__lse"]}.get(args.expect, [""])
    missing = [r + s for r in roots for s in suffixes if r + s not in funcs]
    if args.expect == "dispatch" and missing and not args.allow_missing and \
            all(r in funcs for r in roots):
        # the functions are there, but not as renamed copies: a build of the
        # wrong kind, which is a verdict, not a tool error
        for r in roots:
            print("VIOLATION dispatch: %s is not dispatched (no %s)"
                  % (r, " or ".join(r + s for s in suffixes
                                    if r + s not in funcs)))
        print("check_atomics: FAIL --expect=dispatch (%s) %s"
              % (arch, " ".join(os.path.basename(f) for f in files)))
        return 1
    if missing and not args.allow_missing:
        raise ToolError("hot functions not in %s: %s"
                        % (" ".join(files), ", ".join(missing)))
    roots = [r for r in roots if all(r + s in funcs for s in suffixes)]
    if not roots:
        raise ToolError("none of the hot functions is in the library")

    if args.expect == "dispatch":
        for r in roots:
            if r not in ifuncs:
                errors.append("dispatch: %s is not an IFUNC symbol" % r)
        check_variant("llsc", roots, funcs, arch, errors, notes, "__llsc")
        check_variant("lse", roots, funcs, arch, errors, notes, "__lse")
    else:
        check_variant(args.expect, roots, funcs, arch, errors, notes)

    if args.verbose or errors:
        for n in notes:
            print("  " + n)
    for e in errors:
        print("VIOLATION " + e)
    verdict = "FAIL" if errors else "PASS"
    print("check_atomics: %s --expect=%s (%s, %d hot functions%s) %s"
          % (verdict, args.expect, arch, len(roots),
             ", %d IFUNC" % len([r for r in roots if r in ifuncs])
             if args.expect == "dispatch" else "",
             " ".join(os.path.basename(f) for f in files)))
    return 1 if errors else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ToolError as e:
        print("check_atomics: ERROR %s" % e, file=sys.stderr)
        sys.exit(2)
