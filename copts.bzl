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

TOWER_COPTS = TOWER_WARNINGS + select({
    "//:portable": ["-O3", "-march=x86-64-v3"],
    "//:opt": ["-O3", "-march=native"],
    "//conditions:default": [],
})
