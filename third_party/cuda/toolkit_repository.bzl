"""cuda_toolkit_repository: the CUDA toolkit at /usr/local/cuda (or $TOWER_CUDA_PATH) as the
repository @cuda, or, where there is none (or one older than CUDA 12, or without nvcc), the
same targets with nothing in them.

Without a toolkit, everything but --config=cuda builds: the plain build skips the CUDA
targets as incompatible (Bazel still analyses their dependencies, so @cuda must exist), and
--config=cudaemu maps @cuda's libraries to the emulation. Under --config=cuda the build stops
at the first toolkit target with one line saying what is missing and what to do instead.

The repository is re-read when Bazel's server starts (`local = True`), so a toolkit installed
later is seen after `bazel shutdown`.
"""

# Tower's CUDA code needs 12 or newer: cuBLAS's 64-bit (`_64`) entry points and
# cudaGetDriverEntryPointByVersion came with CUDA 12.0.
MIN_CUDA_VERSION = 12000

def _cuda_version(ctx, toolkit):
    """CUDA_VERSION of the toolkit's include/cuda.h (12000 for 12.0), or None."""
    cuda_h = toolkit.get_child("include").get_child("cuda.h")
    if not cuda_h.exists:
        return None
    for line in ctx.read(cuda_h).splitlines():
        words = [word for word in line.replace("\t", " ").split(" ") if word]
        if len(words) == 3 and words[0] == "#define" and words[1] == "CUDA_VERSION" and words[2].isdigit():
            return int(words[2])
    return None

def _toolkit_problem(ctx, toolkit, path):
    """Why the toolkit at `path` cannot build Tower's CUDA code (the end of a sentence), or
    None where it can."""
    if not (toolkit.exists and toolkit.get_child("include").exists):
        return "at %s, which is not there" % path
    version = _cuda_version(ctx, toolkit)
    if version == None:
        return "at %s, whose include/cuda.h is missing or gives no CUDA_VERSION" % path
    if version < MIN_CUDA_VERSION:
        # (No apostrophe in these sentences: they are echoed in single quotes.)
        return ("at %s, which is CUDA %d.%d (Tower calls the 64-bit cuBLAS entry points and " +
                "cudaGetDriverEntryPointByVersion, both new in 12.0)") % (path, version // 1000, version % 1000 // 10)
    if not toolkit.get_child("bin").get_child("nvcc").exists:
        return "at %s, which has no bin/nvcc" % path
    return None

def _cuda_toolkit_repository_impl(ctx):
    path = ctx.os.environ.get("TOWER_CUDA_PATH", ctx.attr.path)
    toolkit = ctx.path(path)
    problem = _toolkit_problem(ctx, toolkit, path)
    found = problem == None
    if found:
        ctx.symlink(toolkit.get_child("include"), "include")
    missing = ("error: --config=cuda needs the CUDA toolkit (12 or newer, with cuBLAS and NCCL) " +
               "%s: install it there or set TOWER_CUDA_PATH, or run the GPU code on the " +
               "emulation with --config=cudaemu") % (problem or "")
    ctx.file("toolkit.bzl", "\n".join([
        "TOOLKIT_FOUND = %s" % found,
        "TOOLKIT_PATH = %r" % path,
        "# A genrule command for what cannot be built without the toolkit.",
        "NO_TOOLKIT_COMMAND = %r" % ("echo '%s' >&2; exit 1" % missing),
        "",
    ]))
    ctx.symlink(ctx.attr.build_file, "BUILD.bazel")

cuda_toolkit_repository = repository_rule(
    implementation = _cuda_toolkit_repository_impl,
    attrs = {
        "path": attr.string(mandatory = True, doc = "where the toolkit is, unless TOWER_CUDA_PATH says"),
        "build_file": attr.label(mandatory = True, allow_single_file = True),
    },
    environ = ["TOWER_CUDA_PATH"],
    local = True,
)
