"""Offline stand-in for @rules_shell//shell:sh_library.bzl (Bazel 4.2.3).

The native rule of the same name, so BUILD files that load sh_library from
rules_shell, as the Bazel Central Registry's presubmit requires, build
unchanged here and with a current Bazel and the real rules_shell.
"""

def sh_library(**attrs):
    native.sh_library(**attrs)
