#!/bin/bash
# Prints deliqueue's version, MAJOR.MINOR.PATCH: the `version` of
# MODULE.bazel's module() call, the one place it is written.  tools/install
# lays out the library and its pkg-config file with it; //:version_test
# holds the header's macros, dq_version() and the soname to it.
#
# usage: module_version.sh MODULE.bazel
set -euo pipefail
if (($# != 1)); then
  echo "usage: module_version.sh MODULE.bazel" >&2
  exit 2
fi
# Only inside module(...): a bazel_dep's version is another module's.
version=$(sed -n '/^module(/,/^)/s/^ *version = "\([^"]*\)",\{0,1\} *$/\1/p' "$1")
if [[ ! $version =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; then
  echo "module_version.sh: $1: module(version = ...) is '${version//$'\n'/', '}'," \
    "not one MAJOR.MINOR.PATCH" >&2
  exit 1
fi
echo "$version"
