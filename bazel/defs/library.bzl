"""deliqueue_library: one build of the library, the way every variant is built.

The release library and the test builds differ only in a few defines (the
test hooks, the portable wait, a small pool); everything else (sources,
warnings, the optimized build's frame pointer, the arm64 dispatch) is the
same, so it is said once, here.
"""

load("//arch:dispatch.bzl", "dq_dispatchable_library")

# The sources of every variant: the whole of deliqueue/src.
LIBRARY_SRCS_GLOB = [
    "src/*.c",
    "src/*.h",
]

LIBRARY_COPTS = [
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Wpedantic",
    "-Werror=incompatible-pointer-types",
]

def deliqueue_library(name, testonly = False, local_defines = [], defines = [], hdrs = [], **kwargs):
    """Declares one variant of the library (in //deliqueue's package).

    An optimized build drops the frame pointer (Bazel keeps it in every
    mode): on x86 a post costs its locked CAS plus its instruction count,
    run without overlap, and the frame is 5 of the ~60 instructions of
    dq_post_at's path (bench/push_decomp: about 7% of a post).  Sanitizer
    and debug builds keep it for their stack traces.

    Args:
      name: the target.
      testonly: a test build (never linked into release code).
      local_defines: defines for the library's own sources only.
      defines: defines exported to what depends on the variant (a test
        that needs to know, e.g. DQ_INDEX_BITS).
      hdrs: public headers beyond <deliqueue/deliqueue.h> (testing.h).
      **kwargs: other cc_library attributes (visibility, ...).
    """
    dq_dispatchable_library(
        name = name,
        testonly = testonly,
        srcs = native.glob(LIBRARY_SRCS_GLOB),
        hdrs = hdrs,
        copts = LIBRARY_COPTS + ["-D" + d for d in local_defines],
        defines = defines,
        linkopts = ["-pthread"],
        opt_copts = select({
            "//bazel/defs:is_opt": ["-fomit-frame-pointer"],
            "//conditions:default": [],
        }),
        strip_include_prefix = "include" if hdrs else None,
        deps = [
            ":api",
            "//arch",
        ],
        **kwargs
    )
