#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tool_flags_doc_test: docs/farm.md's flag tables name exactly the flags
that `tools/farm --help` and `tools/soak --help` print.

    docs/tool_flags_doc_test.py [DOC]   # DOC: default docs/farm.md

For each tool, the flags of the doc are the `--name`s in the first column
of the first table after the heading "`tools/X` flags"; the flags of the
tool are the `--name`s of the option lines of its --help (the lines that
start with two spaces and a dash: the option column, not the help text).
Each tool prints one `ok` or `FAIL` line (with what only the doc or only
the tool has); exit 0 only if every tool matched. It runs the tools from
the source tree, found through this file's real path."""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(HERE)
TOOLS = ["tools/farm", "tools/soak"]
FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")


def doc_flags(text, tool):
    """The flags in the first table after the heading "`tool` flags", or
    None if there is no such heading or no table after it."""
    lines = text.splitlines()
    want = "%s flags" % tool
    for i, line in enumerate(lines):
        if line.startswith("#") and line.lstrip("#").strip().replace("`", "") == want:
            break
    else:
        return None
    flags, in_table = set(), False
    for line in lines[i + 1:]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            in_table = True
            # the first cell; an escaped pipe (`local\|URL`) is part of it
            first = line.replace("\\|", "/").strip().strip("|").split("|")[0]
            flags.update(FLAG.findall(first))
        elif in_table:
            break
    return flags if in_table else None


def help_flags(tool):
    """(flags, output) of `tool --help`; flags None if it failed."""
    env = dict(os.environ, COLUMNS="100")
    p = subprocess.run([os.path.join(ROOT, tool), "--help"], cwd=ROOT, env=env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
    if p.returncode != 0:
        return None, p.stdout
    flags = set()
    for line in p.stdout.splitlines():
        if re.match(r"  -", line):
            option_column = re.split(r"\s{2,}", line.strip())[0]
            flags.update(FLAG.findall(option_column))
    return flags, p.stdout


def main():
    doc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "farm.md")
    with open(doc) as f:
        text = f.read()
    failed = 0
    for tool in TOOLS:
        documented = doc_flags(text, tool)
        actual, out = help_flags(tool)
        if documented is None:
            print("FAIL %s: %s has no table after a heading \"`%s` flags\"" % (tool, doc, tool))
        elif actual is None:
            print("FAIL %s: `%s --help` failed:\n%s" % (tool, tool, out))
        elif not actual:
            print("FAIL %s: `%s --help` printed no option lines:\n%s" % (tool, tool, out))
        elif documented != actual:
            print("FAIL %s: the flags in %s differ from `%s --help`" % (tool, doc, tool))
            for flag in sorted(actual - documented):
                print("    only in --help: %s" % flag)
            for flag in sorted(documented - actual):
                print("    only in the doc: %s" % flag)
        else:
            print("ok   %s: %d flags, the same in the doc and in --help" % (tool, len(actual)))
            continue
        failed += 1
    print("%d passed, %d failed" % (len(TOOLS) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
