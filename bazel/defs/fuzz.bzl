"""dq_fuzz_test: one libFuzzer target, meaningful in every config.

    load("//bazel/defs:fuzz.bzl", "dq_fuzz_test")

    dq_fuzz_test(
        name = "queue_ops_fuzz_test",
        srcs = ["queue_ops_fuzz.c"],        # defines only LLVMFuzzerTestOneInput
        deps = ["//deliqueue"],              #   (LLVMFuzzerInitialize optional)
        corpus = glob(["corpus/queue_ops/*"]),
        max_total_time = 60,
    )

Under --config=fuzz the binary is a libFuzzer fuzzer (-fsanitize=fuzzer on
top of the config's fuzzer-no-link,address,undefined) and the test fuzzes
for `max_total_time` seconds, starting from a writable copy of `corpus`,
each input limited to `timeout_per_input` seconds; crash, leak, timeout and
OOM reproducers go to $TEST_UNDECLARED_OUTPUTS_DIR (bazel-testlogs/<pkg>/
<name>/test.outputs/outputs.zip). Any finding fails the test.
`--test_env=DQ_FUZZ_MAX_TOTAL_TIME=N` sets the time of every fuzz test to
N seconds, longer or shorter (`tools/farm --fuzz-time N`; a longer time
needs a longer --test_timeout, which the farm sets); an expect_crash
canary keeps at least its own max_total_time.

Under every other config (host, tsan, asan, arm64-*) the same source is
linked with //bazel/defs:fuzz_replay_main.c, which runs each corpus
file once (and the empty input): the corpus becomes a regression suite
that also runs under TSan and on arm64.

Targets made: NAME (the test), NAME_bin (the fuzzer / replayer binary, to
run by hand: `bazel run --config=fuzz //pkg:NAME_bin -- -help=1`),
NAME_corpus (the corpus files).
"""

load("@rules_cc//cc:defs.bzl", "cc_binary")
load("@rules_shell//shell:sh_test.bzl", "sh_test")

def dq_fuzz_test(
        name,
        srcs,
        deps = [],
        corpus = [],
        max_total_time = 60,
        timeout_per_input = 10,
        copts = [],
        size = "medium",
        tags = [],
        expect_crash = False,
        **kwargs):
    """A fuzz test; see the file comment.

    Args:
      name: the test's name; NAME_bin and NAME_corpus are made as well.
      srcs: the fuzzer's sources; they define LLVMFuzzerTestOneInput.
      deps: libraries the fuzzer needs.
      corpus: seed inputs (files), e.g. glob(["corpus/NAME/*"]).
      max_total_time: seconds of fuzzing under --config=fuzz.
      timeout_per_input: seconds one input may take before it is a finding.
      copts: extra compiler options for srcs.
      size: test size; "medium" (300 s) fits max_total_time up to ~240.
      tags: test tags.
      expect_crash: for canaries only: under --config=fuzz the test passes
        only if libFuzzer finds a crash (a planted bug).
      **kwargs: passed to the sh_test (e.g. visibility, flaky).
    """
    bin_name = name + "_bin"
    corpus_name = name + "_corpus"
    cc_binary(
        name = bin_name,
        srcs = srcs,
        copts = copts,
        deps = deps + select({
            "//bazel/defs:is_fuzz": [],
            "//conditions:default": ["//bazel/defs:fuzz_replay_main"],
        }),
        linkopts = select({
            "//bazel/defs:is_fuzz": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        testonly = True,
        tags = tags,
        visibility = kwargs.get("visibility"),
    )
    native.filegroup(
        name = corpus_name,
        srcs = corpus,
        testonly = True,
    )
    sh_test(
        name = name,
        srcs = ["//bazel/defs:fuzz_run.sh"],
        args = select({
            "//bazel/defs:is_fuzz": ["fuzz"],
            "//conditions:default": ["replay"],
        }) + [
            "$(rootpath :%s)" % bin_name,
            str(max_total_time),
            str(timeout_per_input),
            "1" if expect_crash else "0",
            "$(rootpaths :%s)" % corpus_name,
        ],
        data = [":" + bin_name, ":" + corpus_name],
        size = size,
        tags = tags + ["fuzz"],
        **kwargs
    )
