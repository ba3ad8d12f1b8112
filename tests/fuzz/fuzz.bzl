"""tower_fuzz_target: a libFuzzer target that is also a regression test over its corpus.

For a target `name` with sources `srcs` (defining LLVMFuzzerTestOneInput) this makes:
  name          a cc_binary. With --config=fuzz it links libFuzzer (-fsanitize=fuzzer), so
                `bazel-bin/tests/fuzz/name corpus/name -max_total_time=20` fuzzes. Otherwise
                it links fuzz_driver.cc, which runs the target once on each file or directory
                given: a way to replay one crash input under any config.
  name_test     a cc_test that runs the driver over every file of corpus/<corpus>, so the
                default `bazel test //...` (and every sanitizer config) replays the corpus.
"""

load("//:copts.bzl", "TOWER_COPTS")

def tower_fuzz_target(name, srcs, deps = [], corpus = None, size = "small"):
    corpus = corpus or name.replace("_fuzzer", "")
    corpus_dir = "corpus/" + corpus
    corpus_files = native.glob([corpus_dir + "/**"])
    native.cc_library(
        name = name + "_lib",
        testonly = True,
        srcs = srcs,
        copts = TOWER_COPTS,
        deps = deps,
        alwayslink = True,
    )
    native.cc_binary(
        name = name,
        testonly = True,
        copts = TOWER_COPTS,
        linkopts = select({
            "//tests/fuzz:fuzz": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = [":" + name + "_lib"] + select({
            "//tests/fuzz:fuzz": [],
            "//conditions:default": [":fuzz_driver"],
        }),
    )
    native.cc_test(
        name = name + "_test",
        size = size,
        copts = TOWER_COPTS,
        args = ["tests/fuzz/" + corpus_dir],
        data = corpus_files,
        deps = [
            ":" + name + "_lib",
            ":fuzz_driver",
        ],
    )
