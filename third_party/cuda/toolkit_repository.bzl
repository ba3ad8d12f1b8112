"""cuda_toolkit_repository: the CUDA toolkit at /usr/local/cuda (or $TOWER_CUDA_PATH) as the
repository @cuda, or, where there is none, the same targets with nothing in them.

Without a toolkit, everything but --config=cuda builds: the plain build skips the CUDA
targets as incompatible (Bazel still analyses their dependencies, so @cuda must exist), and
--config=cudaemu maps @cuda's libraries to the emulation. Under --config=cuda the build stops
at the first toolkit target with one line saying what is missing and what to do instead.

The repository is re-read when Bazel's server starts (`local = True`), so a toolkit installed
later is seen after `bazel shutdown`.
"""

def _cuda_toolkit_repository_impl(ctx):
    path = ctx.os.environ.get("TOWER_CUDA_PATH", ctx.attr.path)
    toolkit = ctx.path(path)
    found = toolkit.exists and toolkit.get_child("include").exists
    if found:
        ctx.symlink(toolkit.get_child("include"), "include")
    missing = ("error: --config=cuda needs the CUDA toolkit (12 or newer, with cuBLAS and NCCL) " +
               "at %s, which is not there: install it there or set TOWER_CUDA_PATH, or run " +
               "the GPU code on the emulation with --config=cudaemu") % path
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
