"""cuda_library: .cu files compiled for the GPU by nvcc (--config=cuda) or, under
--config=cudaemu, compiled as C++ by the host compiler against cudaemu's cuda_runtime.h, so
that the very same kernels run on the host.

Bazel 4 has no CUDA rules offline, so under --config=cuda each .cu file becomes one genrule
running the toolkit's nvcc (/usr/local/cuda/bin/nvcc, or under $TOWER_CUDA_PATH: @cuda's
toolkit.bzl), and the objects go into a cc_library's srcs. Under
--config=cudaemu each .cu file is copied to a .cc file and compiled like any C++ source.
The .cu files may include only the headers listed in `hdrs` and `nvcc_headers`; keep them
small and free of the project's C++-only headers: host-side glue belongs in ordinary .cc
files. Kernels are launched through TOWER_LAUNCH_KERNEL (device/cuda/kernel_launch.h), the
one launch form that both compilers accept.

Targets for nvcc: sm_80 (A100), sm_90 (H100, H200), and compute_90 PTX for newer GPUs.
Only meant for targets behind --config=cuda or --config=cudaemu.
"""

load("@cuda//:toolkit.bzl", "NO_TOOLKIT_COMMAND", "TOOLKIT_FOUND", "TOOLKIT_PATH")
load("//:copts.bzl", "TOWER_COPTS")

NVCC = TOOLKIT_PATH + "/bin/nvcc"

NVCC_FLAGS = " ".join([
    "-O3",
    "-std=c++17",
    "-Xcompiler -fPIC",
    "-Xcompiler -Wall",
    "--expt-relaxed-constexpr",
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
])

# nvcc runs only for the real toolkit; the copies only for the emulation.
_TOOLKIT_ONLY = select({
    "//:cudaemu": ["//:incompatible"],
    "//:cuda": [],
    "//conditions:default": ["//:incompatible"],
})

_EMULATION_ONLY = select({
    "//:cudaemu": [],
    "//conditions:default": ["//:incompatible"],
})

def cuda_library(name, srcs, hdrs = [], nvcc_headers = [], deps = [], **kwargs):
    """srcs: .cu files; hdrs: this package's headers; nvcc_headers: other headers (labels)
    the .cu files include, such as .cuh files and //device/cuda:kernel_launch.h."""
    objects = []
    emulated = []
    for src in srcs:
        stem = src.replace("/", "_").replace(".cu", "")
        obj = "_" + name + "_" + stem + ".o"
        native.genrule(
            name = "_" + name + "_" + stem + "_nvcc",
            srcs = [src] + hdrs + nvcc_headers,
            outs = [obj],
            cmd = ("%s %s -I. -c $(location %s) -o $@" % (NVCC, NVCC_FLAGS, src)
                   if TOOLKIT_FOUND else NO_TOOLKIT_COMMAND),
            target_compatible_with = _TOOLKIT_ONLY,
        )
        objects.append(obj)
        copy = "_" + name + "_" + stem + "_emulated.cc"
        native.genrule(
            name = "_" + name + "_" + stem + "_copy",
            srcs = [src],
            outs = [copy],
            cmd = "cp $< $@",
            target_compatible_with = _EMULATION_ONLY,
        )
        emulated.append(copy)
    native.cc_library(
        name = name,
        srcs = select({
            "//:cudaemu": emulated,
            "//conditions:default": objects,
        }),
        hdrs = hdrs,
        textual_hdrs = select({
            "//:cudaemu": nvcc_headers,
            "//conditions:default": [],
        }),
        copts = TOWER_COPTS,  # for the emulated build's C++ compile
        deps = deps + ["@cuda//:cudart"],
        **kwargs
    )
