"""deliqueue_dependencies(): the repositories deliqueue needs, for a WORKSPACE.

In a consumer's WORKSPACE, after the repository that holds deliqueue:

    load("@deliqueue//:repositories.bzl", "deliqueue_dependencies")

    deliqueue_dependencies()

Every repository is declared with maybe(), so one the workspace declared
before the call wins. Nothing is downloaded, as Bazel 4.2.3 runs offline
here: the rule repositories are Debian's packages bazel-skylib,
bazel-platforms and bazel-rules-java (tools/bootstrap.sh installs them), and
the two that Debian has no 4.2.3 package for are deliqueue's own stand-ins
in third_party/bazel4_offline. With network access, declare the real ones
first. bzlmod (MODULE.bazel) does not use this file.
"""

load("@bazel_tools//tools/build_defs/repo:utils.bzl", "maybe")

# Where Debian's packages put the rule repositories.
_DEBIAN = {
    "bazel_skylib": "/usr/share/bazel/tools/skylib",
    "platforms": "/usr/share/bazel/tools/platforms",
    "rules_java": "/usr/share/bazel/rules/java",
}

# Repositories that @bazel_tools names and Debian has none for that loads in
# Bazel 4.2.3: folders of third_party/bazel4_offline (its README says why).
_STAND_INS = ["rules_cc", "rules_shell", "remote_coverage_tools"]

def _stand_in_impl(rctx):
    # The folder is found from this file's own label, so it is the checkout
    # that provides deliqueue, wherever that is; a path in a macro could only
    # be relative to the consumer's workspace.
    folder = rctx.path(Label("//:repositories.bzl")).dirname
    for part in ["third_party", "bazel4_offline", rctx.attr.folder]:
        folder = folder.get_child(part)
    if not folder.exists:
        fail("deliqueue: no offline stand-in at %s" % folder)
    for entry in folder.readdir():
        rctx.symlink(entry, entry.basename)

_stand_in = repository_rule(
    implementation = _stand_in_impl,
    attrs = {"folder": attr.string(mandatory = True)},
    local = True,
    doc = "A folder of deliqueue's third_party/bazel4_offline, as a repository.",
)

def deliqueue_dependencies():
    """Declares every repository deliqueue needs that is not declared yet."""
    for name, path in _DEBIAN.items():
        maybe(native.local_repository, name = name, path = path)
    for name in _STAND_INS:
        maybe(_stand_in, name = name, folder = name)
