"""cuda_library: .cu files compiled by nvcc (a genrule each) into a cc_library.

Bazel 4 has no CUDA rules offline, so each .cu file becomes one genrule running
/usr/local/cuda/bin/nvcc, and the objects go into a cc_library's srcs. The .cu files may
include only the headers listed in `hdrs` (they are the genrule's inputs); keep them small
and free of the project's C++-only headers: host-side glue belongs in ordinary .cc files.

Targets for: sm_80 (A100), sm_90 (H100, H200), and compute_90 PTX for newer GPUs.
Only meant for targets behind --config=cuda (see //:cuda).
"""

NVCC = "/usr/local/cuda/bin/nvcc"

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

def cuda_library(name, srcs, hdrs = [], nvcc_headers = [], deps = [], **kwargs):
    """srcs: .cu files; hdrs: this package's headers; nvcc_headers: other exported headers
    (labels) the .cu files include."""
    objects = []
    for src in srcs:
        stem = src.replace("/", "_").replace(".cu", "")
        obj = "_" + name + "_" + stem + ".o"
        native.genrule(
            name = "_" + name + "_" + stem + "_nvcc",
            srcs = [src] + hdrs + nvcc_headers,
            outs = [obj],
            cmd = "%s %s -I. -c $(location %s) -o $@" % (NVCC, NVCC_FLAGS, src),
            target_compatible_with = kwargs.get("target_compatible_with", []),
        )
        objects.append(obj)
    native.cc_library(
        name = name,
        srcs = objects,
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart"],
        **kwargs
    )
