"""dq_dispatchable_library: one arm64 binary that runs inline LSE atomics on
ARMv8.1+ and LL/SC loops on ARMv8.0, chosen once at load time.

Outside --config=arm64-dispatch it is exactly the cc_library it replaces.
Under it (//bazel/defs:dispatch, i.e. --define=dq_dispatch=1):

  1. the library's sources (dq_atomics() among them, so it names its own
     variant) are compiled twice, as
        llsc: -march=armv8-a -mno-outline-atomics
        lse:  -march=armv8.1-a
     (target copts come after the config's --copt, so they win; -fPIC so
     the objects fit both static and shared links);
  2. each copy's objects are merged (cc -r) and every global symbol it
     defines gets the suffix __llsc / __lse (nm --defined-only -g,
     objcopy --redefine-syms): arch/dispatch/rename_variant.sh;
  3. every function both copies define is exported under its own name as a
     GNU ifunc whose resolver returns the __lse copy when AT_HWCAP has
     HWCAP_ATOMICS, else the __llsc copy: arch/dispatch/gen_ifunc_stubs.sh.
     The loader runs each resolver once; calls into the library then go
     through the GOT with no check, and calls inside a copy stay inside it.

Global data is renamed too, so each copy keeps its own (every resolver picks
the same copy, so only one is ever used); a library that exported data to
its users would fail to link, loudly.  tools/check_atomics --expect=dispatch
proves the result: public symbols IFUNC, F__llsc LL/SC, F__lse LSE.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

DISPATCH = "//bazel/defs:dispatch"

# The genrules run on the exec platform and Bazel 4.2.3 hands them the exec
# (host) C toolchain's make variables, so the arm64 binutils are named here;
# the dispatched build exists only for arm64.
CROSS = "/usr/bin/aarch64-linux-gnu-"

DISPATCH_VARIANTS = {
    "llsc": ["-march=armv8-a", "-mno-outline-atomics"],
    "lse": ["-march=armv8.1-a"],
}

def dq_dispatchable_library(
        name,
        srcs,
        copts = [],
        opt_copts = [],
        hdrs = [],
        deps = [],
        testonly = False,
        visibility = None,
        **kwargs):
    """A cc_library that becomes ifunc-dispatched under arm64-dispatch.

    Args:
      name: the library; its name, hdrs, deps and other attributes are those
        of the cc_library it replaces.
      srcs: the sources (compiled once per variant when dispatched).
      copts: compiler options of every copy.
      opt_copts: more options of every copy, after copts; may be a select()
        (copts may not: it is itself the value of one).
      hdrs: public headers.
      deps: dependencies (shared by both copies).
      testonly: as cc_library.
      visibility: of the library (the variants are private).
      **kwargs: the other cc_library attributes (defines, linkopts,
        strip_include_prefix, ...), given to the library and both copies.
    """
    dispatched_srcs = [":%s_ifunc_stubs.c" % name]
    syms = []
    for variant, flags in DISPATCH_VARIANTS.items():
        copy = "%s__%s" % (name, variant)
        cc_library(
            name = copy,
            srcs = srcs,
            hdrs = hdrs,
            copts = copts + flags + ["-fPIC"] + opt_copts,
            deps = deps,
            linkstatic = True,
            testonly = testonly,
            tags = ["manual"],
            visibility = ["//visibility:private"],
            **{k: v for k, v in kwargs.items() if k not in ["linkopts"]}
        )
        native.genrule(
            name = copy + "_renamed",
            srcs = [":" + copy],
            outs = [copy + ".o", copy + ".syms"],
            cmd = ("$(location //arch:dispatch/rename_variant.sh) " +
                   "%s %snm %sobjcopy %sgcc $(location %s.o) " +
                   "$(location %s.syms) " +
                   "$$(for f in $(locations :%s); do case $$f in " +
                   "*.a) echo $$f;; esac; done)") % (
                variant,
                CROSS,
                CROSS,
                CROSS,
                copy,
                copy,
                copy,
            ),
            tools = ["//arch:dispatch/rename_variant.sh"],
            testonly = testonly,
            tags = ["manual"],
            visibility = ["//visibility:private"],
        )
        dispatched_srcs.append(":%s.o" % copy)
        syms.append(":%s.syms" % copy)

    native.genrule(
        name = name + "_ifunc_stubs",
        srcs = syms,
        outs = [name + "_ifunc_stubs.c"],
        cmd = "$(location //arch:dispatch/gen_ifunc_stubs.sh) $(SRCS) $@",
        tools = ["//arch:dispatch/gen_ifunc_stubs.sh"],
        testonly = testonly,
        tags = ["manual"],
        visibility = ["//visibility:private"],
    )

    cc_library(
        name = name,
        srcs = select({
            DISPATCH: dispatched_srcs,
            "//conditions:default": srcs,
        }),
        hdrs = hdrs,
        copts = select({
            DISPATCH: ["-std=c11"],
            "//conditions:default": copts,
        }) + opt_copts,
        deps = deps,
        testonly = testonly,
        visibility = visibility,
        **kwargs
    )
