#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# extract_quickstart.sh README OUT: writes to OUT, verbatim, the first
# ```c block after README's `<!-- quickstart` marker line; exits 1 when
# there is none (no marker, no block after it, or a block left open).
set -eu
awk '
    /^<!-- quickstart/ { marked = 1; next }
    marked && !inside && /^```c[ \t]*$/ { inside = 1; next }
    inside && /^```[ \t]*$/ { closed = 1; exit }
    inside { print }
    END { exit closed ? 0 : 1 }
' "$1" >"$2" || {
    echo "extract_quickstart.sh: $1: no complete \`\`\`c block after the quickstart marker" >&2
    exit 1
}
