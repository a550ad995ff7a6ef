"""Compiler options for translation units that use Concurrency Kit.

ck_stack_pop_mpmc (0.7.1) computes `generation + 1` on a NULL `char *`,
which UBSan's pointer-overflow check reports under --config=asan/fuzz (where
every UBSan report is fatal). Add `copts = CK_UBSAN_COPTS` to a target whose
sources include ck headers; it turns off only that one check, only there.
"""

CK_UBSAN_COPTS = select({
    "//bazel/defs:is_clang": ["-fno-sanitize=pointer-overflow"],
    "//conditions:default": [],
})
