"""One C toolchain config rule for every deliqueue toolchain.

The compilers are Debian's system packages (gcc-12, clang-14,
gcc-aarch64-linux-gnu), installed by tools/bootstrap.sh; this rule only
describes them to Bazel. Everything is linked statically against our own
libraries (no `supports_dynamic_linker`), so a test binary is one file that
runs as-is under qemu-user or a sanitizer runtime.

Flags common to all toolchains live here; per-config flags (-march, the
sanitizers) live in //:.bazelrc so one can read the whole matrix there.
"""

load("@bazel_tools//tools/build_defs/cc:action_names.bzl", "ACTION_NAMES")
load(
    "@bazel_tools//tools/cpp:cc_toolchain_config_lib.bzl",
    "feature",
    "flag_group",
    "flag_set",
    "tool_path",
    "with_feature_set",
)

_C_COMPILE = [
    ACTION_NAMES.c_compile,
]

_ALL_COMPILE = [
    ACTION_NAMES.assemble,
    ACTION_NAMES.preprocess_assemble,
    ACTION_NAMES.c_compile,
    ACTION_NAMES.cpp_compile,
    ACTION_NAMES.cpp_header_parsing,
    ACTION_NAMES.linkstamp_compile,
]

_ALL_LINK = [
    ACTION_NAMES.cpp_link_executable,
    ACTION_NAMES.cpp_link_dynamic_library,
    ACTION_NAMES.cpp_link_nodeps_dynamic_library,
]

def _flags(actions, flags, features = None):
    return flag_set(
        actions = actions,
        flag_groups = [flag_group(flags = flags)],
        with_features = [with_feature_set(features = features)] if features else [],
    )

def _impl(ctx):
    tools = {
        "gcc": ctx.attr.cc,
        "cpp": ctx.attr.cc,
        "ar": ctx.attr.ar,
        "ld": ctx.attr.ld,
        "nm": ctx.attr.nm,
        "objcopy": ctx.attr.objcopy,
        "objdump": ctx.attr.objdump,
        "strip": ctx.attr.strip,
        "gcov": "/bin/false",
        "dwp": "/bin/false",
    }
    features = [
        feature(name = "dbg"),
        feature(name = "opt"),
        feature(name = "fastbuild"),
        feature(name = "supports_pic", enabled = True),
        feature(name = "supports_start_end_lib", enabled = False),
        # C11 is the project's language. A BUILD file that needs
        # GNU extensions adds `copts = ["-std=gnu11"]` (later flags win).
        feature(
            name = "c11",
            enabled = True,
            flag_sets = [_flags(_C_COMPILE, ["-std=c11"])],
        ),
        feature(
            name = "default_compile_flags",
            enabled = True,
            flag_sets = [
                _flags(_ALL_COMPILE, [
                    "-Wall",
                    "-fno-omit-frame-pointer",
                    "-pthread",
                    # Reproducible: no timestamps or absolute paths in outputs.
                    "-Wno-builtin-macro-redefined",
                    "-D__DATE__=\"redacted\"",
                    "-D__TIMESTAMP__=\"redacted\"",
                    "-D__TIME__=\"redacted\"",
                ] + ctx.attr.compile_flags),
                _flags(_ALL_COMPILE, ["-g", "-O2"], ["fastbuild"]),
                _flags(_ALL_COMPILE, ["-g3", "-O0"], ["dbg"]),
                _flags(_ALL_COMPILE, [
                    "-g",
                    "-O2",
                    "-DNDEBUG",
                    "-ffunction-sections",
                    "-fdata-sections",
                ], ["opt"]),
            ],
        ),
        feature(
            name = "default_link_flags",
            enabled = True,
            flag_sets = [
                _flags(_ALL_LINK, ["-pthread", "-lm"] + ctx.attr.link_flags),
                _flags(_ALL_LINK, ["-Wl,--gc-sections"], ["opt"]),
            ],
        ),
    ]
    return cc_common.create_cc_toolchain_config_info(
        ctx = ctx,
        features = features,
        cxx_builtin_include_directories = ctx.attr.builtin_include_directories,
        toolchain_identifier = ctx.attr.name,
        host_system_name = "x86_64-unknown-linux-gnu",
        target_system_name = ctx.attr.target_system_name,
        target_cpu = ctx.attr.target_cpu,
        target_libc = "glibc",
        compiler = ctx.attr.compiler,
        abi_version = "local",
        abi_libc_version = "local",
        tool_paths = [tool_path(name = k, path = v) for k, v in tools.items()],
    )

dq_cc_toolchain_config = rule(
    implementation = _impl,
    attrs = {
        "cc": attr.string(mandatory = True),
        "ar": attr.string(default = "/usr/bin/ar"),
        "ld": attr.string(default = "/usr/bin/ld"),
        "nm": attr.string(default = "/usr/bin/nm"),
        "objcopy": attr.string(default = "/usr/bin/objcopy"),
        "objdump": attr.string(default = "/usr/bin/objdump"),
        "strip": attr.string(default = "/usr/bin/strip"),
        "compiler": attr.string(mandatory = True),
        "target_cpu": attr.string(mandatory = True),
        "target_system_name": attr.string(mandatory = True),
        "builtin_include_directories": attr.string_list(),
        "compile_flags": attr.string_list(),
        "link_flags": attr.string_list(),
    },
    provides = [CcToolchainConfigInfo],
)
