"""gpu_test: a cc_test of CUDA code, built only with --config=cuda (incompatible, hence
skipped, otherwise) and tagged `gpu`, so a GPU machine can run exactly these:
    bazel test --config=cuda --test_tag_filters=gpu //tests/...
Its test cases skip (GTEST_SKIP) on a machine without a GPU."""

load("//:copts.bzl", "TOWER_COPTS")

def gpu_test(name, srcs, deps, size = "medium"):
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs,
        copts = TOWER_COPTS,
        tags = ["gpu"],
        target_compatible_with = select({
            "//:cuda": [],
            "//conditions:default": ["//:incompatible"],
        }),
        deps = deps + ["@gtest//:gtest_main"],
    )
