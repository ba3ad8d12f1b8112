"""GPU tests.

gpu_test: a cc_test of CUDA code, built with --config=cuda (the real toolkit) or
--config=cudaemu (the host emulation; then it runs here), incompatible, hence skipped,
otherwise, and tagged `gpu`, so a GPU machine can run exactly these:
    bazel test --config=cuda --test_tag_filters=gpu //tests/...
Without a GPU its cases skip, unless TOWER_REQUIRE_GPU=1 (tests/testing/gpu.h).

emulation_deps: what a test adds under --config=cudaemu only: the emulation's testing headers
(cudaemu/testing.h: contexts created, copies through the host, kernel launches held;
cudaemu/nccl_testing.h, cudaemu/cublas_testing.h: communicators, handles, injected faults),
which the real toolkit has no counterpart of. The cases that use them are compiled only
under the emulation and skip on a real card, naming what they need
(tests/testing/emulation.h).

CPU_TEST_ENV: the env of a CPU test whose binary links the emulation under --config=cudaemu.
"""

load("//:copts.bzl", "TOWER_COPTS")

# A CPU test whose binary links cudaemu under --config=cudaemu (through //tools:tower or the
# ops) asks it for no GPUs: its 2 default GPUs would take the ops the test expects on CPUs
# (default placement prefers a GPU). Per target, not one --test_env in .bazelrc: --test_env
# overrides a target's env, so it would also take the GPU tests' GPUs away.
CPU_TEST_ENV = {"CUDAEMU_GPUS": "0"}

def gpu_test(name, srcs, deps, emulation_deps = [], size = "medium", env = {}, tags = [], **kwargs):
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs,
        copts = TOWER_COPTS,
        env = env,
        tags = ["gpu"] + tags,
        target_compatible_with = select({
            "//:cuda": [],
            "//conditions:default": ["//:incompatible"],
        }),
        deps = deps + select({
            "//:cudaemu": emulation_deps,
            "//conditions:default": [],
        }) + [
            "//tests/testing:gpu",
            "@gtest//:gtest_main",
        ],
        **kwargs
    )
