"""Compiler flags shared by every Tower target.

Optimised builds (the default, see .bazelrc) use -O3 -march=native: the CPU kernels are
Eigen, and Eigen's speed depends on the vector ISA it is compiled for. --config=portable
swaps -march=native for x86-64-v3 (AVX2 + FMA) for binaries that run on another machine.
"""

TOWER_WARNINGS = [
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Wno-sign-compare",
]

_TOWER_OPTIMIZATION = select({
    "//:portable": ["-O3", "-march=x86-64-v3"],
    "//:opt": ["-O3", "-march=native"],
    "//conditions:default": [],
})

TOWER_COPTS = TOWER_WARNINGS + _TOWER_OPTIMIZATION

# Code written by a generator (protoc's .pb.cc): optimised like ours, its warnings silenced
# (-w); they are the generator's to fix, not ours.
TOWER_GENERATED_COPTS = ["-w"] + _TOWER_OPTIMIZATION
