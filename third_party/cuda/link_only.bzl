"""link_only: a library's objects and link flags, without its headers and include paths.

The CPU layers (ops, device, strategy) take their CUDA implementations through select() under
--config=cuda and --config=cudaemu, and call them only through their own headers. A plain
dependency would also hand every file above them the CUDA headers' include paths
(`-isystem external/cuda/include`, or cudaemu's): a different compile command, so switching
configs in one output directory (CI's CPU, CUDA and emulated builds) recompiled some 125
files that contain no CUDA code (445 s of compiling on this 2-core machine, 2026-11-26).
Through link_only their commands stay those of the CPU build.
"""

def _link_only_impl(ctx):
    merged = cc_common.merge_cc_infos(cc_infos = [dep[CcInfo] for dep in ctx.attr.deps])
    return [CcInfo(linking_context = merged.linking_context)]

link_only = rule(
    implementation = _link_only_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
    doc = "Links `deps` into whatever depends on this, without their compilation context.",
)
