#!/usr/bin/env python3
"""The manual pages against the header and the exported symbols.

    man_pages_test.py HEADER SYMBOLS_BZL MAN7_PAGE

MAN7_PAGE is man7/deliqueue.7; its grandparent is the man root.  Checks:

  - every function of PUBLIC_SYMBOLS (SYMBOLS_BZL) is declared in HEADER and
    has a page man3/NAME.3: a page of its own or a `.so man3/OTHER.3` link to
    the page of its family, whose NAME line lists it; every man3 file is
    named after a public function;
  - each man3 page's SYNOPSIS, as groff renders it, declares exactly the
    functions its NAME line lists, each exactly as HEADER declares it
    (whitespace normalised), and includes <deliqueue/deliqueue.h>;
  - `groff -man -ww -z` prints nothing for every page and link;
  - every dq_*(3) and deliqueue(7) reference names a page that exists,
    deliqueue(7)'s SEE ALSO names every man3 page, and every man3 page's
    SEE ALSO names deliqueue(7).

Exit status: 0 all hold, 1 some do not (each is printed), 2 bad usage or no
groff.
"""

import ast
import os
import re
import shutil
import subprocess
import sys

problems = []


def problem(msg):
    problems.append(msg)


def public_symbols(path):
    with open(path) as f:
        m = re.search(r"^PUBLIC_SYMBOLS = (\[.*?\])", f.read(), re.M | re.S)
    if not m:
        sys.exit("man_pages_test: no PUBLIC_SYMBOLS list in %s" % path)
    return ast.literal_eval(m.group(1))


def normalise(decl):
    decl = re.sub(r"\s+", " ", decl).strip()
    decl = re.sub(r"\( ", "(", decl)
    decl = re.sub(r" ([),])", r"\1", decl)
    return decl


def declarations(text):
    """Function declarations in C text without comments or preprocessor
    lines: {name: normalised declaration}."""
    # Bodies of structs: their members are not declarations of functions.
    while True:
        stripped = re.sub(r"\{[^{}]*\}", " ", text)
        if stripped == text:
            break
        text = stripped
    found = {}
    for stmt in text.split(";"):
        stmt = normalise(stmt)
        if not stmt or stmt.startswith(("typedef ", "struct ")):
            continue
        m = re.match(r"^[A-Za-z_][\w ]*?[ *]([A-Za-z_]\w*)\((.*)\)$", stmt)
        if m:
            found.setdefault(m.group(1), []).append(stmt)
    return found


def header_declarations(path):
    """The header as a C compiler (not C++) reads it, comments and
    preprocessor lines removed."""
    with open(path) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = text.replace("\\\n", " ")
    kept, stack = [], []
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("#"):
            d = s[1:].split()
            if not d:
                continue
            # Only __cplusplus is taken as undefined; the include guard
            # and anything else as the header is first read.
            if d[0] == "ifdef":
                stack.append(d[1:2] != ["__cplusplus"])
            elif d[0] in ("ifndef", "if"):
                stack.append(True)
            elif d[0] == "elif":
                problem("%s: #elif is not understood here" % path)
            elif d[0] == "else":
                stack[-1] = not stack[-1]
            elif d[0] == "endif":
                stack.pop()
            continue
        if all(stack):
            kept.append(line)
    decls = declarations("\n".join(kept))
    for name, ds in decls.items():
        if len(set(ds)) > 1:
            problem("%s: %s is declared differently twice: %s" % (path, name, ds))
    return {n: ds[0] for n, ds in decls.items()}


def run_groff(args, cwd):
    p = subprocess.run(["groff"] + args, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    return p.returncode, p.stdout.decode(errors="replace")


def rendered_section(text, heading):
    """The lines under a section heading of groff's plain-text output."""
    text = re.sub(r".\x08", "", text)
    out, inside = [], False
    for line in text.split("\n"):
        if line and not line[0].isspace():
            inside = line.strip() == heading
            continue
        if inside:
            out.append(line)
    return out


def synopsis_declarations(rendered):
    lines, continued = [], False
    for line in rendered:
        s = line.strip()
        # Preprocessor lines (with their continuations) are not prototypes.
        if continued or s.startswith("#"):
            continued = s.endswith("\\")
            continue
        lines.append(s)
    return declarations(" ".join(lines))


def name_line(source):
    m = re.search(r"^\.SH NAME\n(.*?)\n\.", source, re.M | re.S)
    if not m or "\\-" not in m.group(1):
        return None
    names = m.group(1).split("\\-", 1)[0]
    return [n.strip() for n in names.replace("\n", " ").split(",") if n.strip()]


def references(source):
    return set(re.findall(r"\b(dq_\w+|deliqueue) \(([37])\)", source))


def see_also(source):
    m = re.search(r"^\.SH SEE ALSO\n(.*?)(?:^\.SH |\Z)", source, re.M | re.S)
    return references(m.group(1)) if m else set()


def main(argv):
    if len(argv) != 4:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    header, symbols_bzl, man7_page = argv[1:]
    if not shutil.which("groff"):
        print("man_pages_test: no groff on PATH: tools/bootstrap.sh installs groff-base",
              file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.abspath(man7_page)))
    symbols = public_symbols(symbols_bzl)
    declared = header_declarations(header)
    for s in symbols:
        if s not in declared:
            problem("%s is in PUBLIC_SYMBOLS but %s does not declare it" % (s, header))
    for s in sorted(set(declared) - set(symbols)):
        problem("%s declares %s, which PUBLIC_SYMBOLS does not list" % (header, s))

    files = {}
    for section in ("3", "7"):
        d = os.path.join(root, "man" + section)
        for f in sorted(os.listdir(d)):
            if not f.endswith("." + section):
                problem("man%s/%s: not a section %s page" % (section, f, section))
                continue
            with open(os.path.join(d, f)) as fh:
                files["man%s/%s" % (section, f)] = fh.read()

    pages, links = {}, {}
    for rel, source in files.items():
        m = re.fullmatch(r"\.so (man[37]/[\w.]+)\n", source)
        if m:
            links[rel] = m.group(1)
        else:
            pages[rel] = source

    # groff accepts every file without a warning (links from the man root,
    # where `.so man3/...` resolves).
    for rel in sorted(files):
        rc, out = run_groff(["-man", "-ww", "-z", rel], root)
        if rc != 0 or out:
            problem("groff -man -ww -z %s: exit %d%s" % (rel, rc, (":\n" + out) if out else ""))

    names_of = {}
    for rel, source in sorted(pages.items()):
        stem, section = os.path.splitext(os.path.basename(rel))
        section = section[1:]
        th = re.match(r"\.TH (\S+) (\S+) ", source)
        if not th or th.group(1) != stem or th.group(2) != section:
            problem("%s: .TH does not name %s %s" % (rel, stem, section))
        names = name_line(source)
        if not names:
            problem("%s: no NAME line (names \\- description)" % rel)
            continue
        if names[0] != stem:
            problem("%s: the NAME line starts with %s, not %s" % (rel, names[0], stem))
        names_of[rel] = names
        if section != "3":
            continue
        _, text = run_groff(["-man", "-Tascii", "-P-cbou", "-rLL=200n", rel], root)
        synopsis = rendered_section(text, "SYNOPSIS")
        if not any(l.strip() == "#include <deliqueue/deliqueue.h>" for l in synopsis):
            problem("%s: SYNOPSIS does not include <deliqueue/deliqueue.h>" % rel)
        shown = synopsis_declarations(synopsis)
        if set(shown) != set(names):
            problem("%s: NAME lists %s, SYNOPSIS declares %s" %
                    (rel, ", ".join(names), ", ".join(sorted(shown)) or "nothing"))
        for name, decls in sorted(shown.items()):
            if name not in declared:
                problem("%s: SYNOPSIS declares %s, which the header does not" % (rel, name))
                continue
            for d in decls:
                if d != declared[name]:
                    problem("%s: SYNOPSIS says\n    %s\n  the header says\n    %s" %
                            (rel, d, declared[name]))
        if ("deliqueue", "7") not in see_also(source):
            problem("%s: SEE ALSO does not name deliqueue(7)" % rel)

    for s in symbols:
        rel = "man3/%s.3" % s
        if rel in pages:
            if s not in names_of.get(rel, []):
                problem("%s: its NAME line does not list %s" % (rel, s))
        elif rel in links:
            target = links[rel]
            if target in pages and s not in names_of.get(target, []):
                problem("%s: .so %s, whose NAME line does not list %s" % (rel, target, s))
        else:
            problem("%s has no page: add %s or a `.so` link to its family's page" % (s, rel))
    for rel, target in sorted(links.items()):
        if target not in pages:
            problem("%s: .so %s, which is not a page of this manual" % (rel, target))
    for rel in sorted(files):
        stem = os.path.splitext(os.path.basename(rel))[0]
        if rel.startswith("man3/") and stem not in symbols:
            problem("%s: %s is not a public function (PUBLIC_SYMBOLS)" % (rel, stem))

    for rel, source in sorted(pages.items()):
        for name, section in sorted(references(source)):
            if "man%s/%s.%s" % (section, name, section) not in files:
                problem("%s: refers to %s(%s), which has no page" % (rel, name, section))
    index = see_also(pages.get("man7/deliqueue.7", ""))
    for rel in sorted(pages):
        stem = os.path.splitext(os.path.basename(rel))[0]
        if rel.startswith("man3/") and (stem, "3") not in index:
            problem("man7/deliqueue.7: SEE ALSO does not name %s(3)" % stem)

    for p in problems:
        print("FAIL: " + p)
    if problems:
        return 1
    print("PASS: %d functions, each with a page (%d pages, %d .so links) whose SYNOPSIS "
          "matches the header; groff -man -ww is silent on all %d files" %
          (len(symbols), len(pages), len(links), len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
