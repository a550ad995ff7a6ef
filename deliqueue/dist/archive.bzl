"""dq_static_archive: one static library holding a cc_library and every
library it links (for //deliqueue: the queue and //arch), so that an
installed libdeliqueue.a is complete on its own.

The position-independent objects are used where Bazel built them, so the
archive links into executables (PIE or not) and into shared libraries.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _impl(ctx):
    cc = find_cpp_toolchain(ctx)
    archives = []
    for dep in ctx.attr.deps:
        for linker_input in dep[CcInfo].linking_context.linker_inputs.to_list():
            for lib in linker_input.libraries:
                archive = lib.pic_static_library or lib.static_library
                if archive and archive not in archives:
                    archives.append(archive)
    if not archives:
        fail("%s: the deps link no static library" % ctx.label)
    out = ctx.outputs.out

    # GNU ar's MRI script copies every member of every archive, even
    # members with the same file name (two libraries may both have cpu.o).
    script = ctx.actions.declare_file(ctx.attr.name + ".mri")
    ctx.actions.write(script, "\n".join(
        ["CREATE " + out.path] +
        ["ADDLIB " + a.path for a in archives] +
        ["SAVE", "END", ""],
    ))
    ctx.actions.run_shell(
        inputs = archives + [script],
        outputs = [out],
        tools = cc.all_files,
        command = '"$1" -M < "$2"',
        arguments = [cc.ar_executable, script.path],
        mnemonic = "DqArchive",
        progress_message = "Archiving %s" % out.short_path,
    )
    return [DefaultInfo(
        files = depset([out]),
        runfiles = ctx.runfiles(files = [out]),
    )]

dq_static_archive = rule(
    implementation = _impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo], mandatory = True),
        "out": attr.output(mandatory = True),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)
