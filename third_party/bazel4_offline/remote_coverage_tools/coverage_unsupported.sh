#!/bin/sh
# Stand-in for Bazel's downloaded coverage tools: not available offline.
echo "deliqueue: coverage tools are not available offline (Bazel 4.2.3 stand-in)" >&2
exit 1
