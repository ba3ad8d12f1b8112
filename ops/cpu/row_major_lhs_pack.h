// Packs a row-major block into the layout Eigen's GEMM kernel reads its left operand in, byte
// for byte what Eigen's own packing writes (gemm_pack_lhs, RowMajor, no panel mode).
//
// Why: the weight that a layer's input gradient multiplies by transposed (dx = dy · wᵀ) is
// Eigen's row-major lhs, and Eigen packs it reading a whole panel's rows at once: 48 rows on
// AVX-512, 48 concurrent read streams, which the hardware prefetchers do not follow. Once a
// step has pushed the weight out of the caches, that pack ran at 4-5 GB/s and took 4.7 % of an
// `mlp` step with 2 replicas. This one transposes one group of a vector's width of rows at a
// time (16 streams), at twice the speed from memory and 1.5x from cache (a 1024 × 1024
// weight: 434-455 µs against 834-900 µs, and 193-202 µs against 300-320 µs; docs/BENCHMARKS.md).
#ifndef TOWER_OPS_CPU_ROW_MAJOR_LHS_PACK_H_
#define TOWER_OPS_CPU_ROW_MAJOR_LHS_PACK_H_

#include <cstdint>

namespace tower::cpu {

// lhs: rows × depth floats, row r at lhs + r * stride (stride ≥ depth). packed: rows × depth
// floats, 64-byte aligned (as for Eigen's own packing): full panels of Eigen's kernel rows (mr:
// 48 floats on AVX-512), each depth-major (for each k, the panel's mr values); the remaining
// rows are packed by Eigen's own routine.
void PackRowMajorLhs(const float* lhs, int64_t stride, int64_t rows, int64_t depth,
                     float* packed);

}  // namespace tower::cpu

#endif  // TOWER_OPS_CPU_ROW_MAJOR_LHS_PACK_H_
