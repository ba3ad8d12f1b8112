// Products whose right operand is a weight that several replicas of one thread multiply by in
// the same step: the weight is packed into Eigen's kernel layout once per thread and step, and
// the thread's later replicas reuse that packing.
//
// Why: with R replicas on T < R threads, each replica's product covers 1/R of the batch's
// rows but packs the whole weight, as a product of the full batch would. At 4 and 8 replicas
// of `mlp` on 2 threads, packing is 15-21 % of the step (docs/BENCHMARKS.md).
//
// What stays: the bits. The loop is Eigen's own sequential GEMM (general_matrix_matrix_product,
// GeneralMatrixMatrix.h) with its blocking, packing routines and kernel; only where the
// packed weight blocks live changes (a per-thread cache instead of an L2-sized scratch block).
//
// The caller's promise: `version` is non-zero, and on this thread every call with the same
// weight pointer and `version` sees the same values in it. A model's training step gives
// each step a new version (model/sequential.cc).
#ifndef TOWER_OPS_CPU_SHARED_PACKING_H_
#define TOWER_OPS_CPU_SHARED_PACKING_H_

#include <cstdint>

namespace tower::cpu {

// out[m, n] (row-major) = a[m, depth] · w, where w is the row-major weight [depth, n], or,
// with `transpose_w`, the transpose of the row-major weight [n, depth]. a is row-major.
// Returns false, having done nothing, where the packing is not worth keeping (a product too
// small, a weight whose packing would not fit the cache) or there is no room for it (every
// entry holds another weight of this version); the caller then multiplies as usual.
bool ProductWithSharedPacking(const float* a, int64_t m, int64_t depth, const float* w,
                              int64_t n, bool transpose_w, uint64_t version, float* out);

// Each thread keeps at most this many packed weights, and none larger than kMaxPackedBytes:
// the cache must stay well inside the last-level cache, or reading a packed copy back from
// memory costs what packing saves (a copy of every weight packed once per thread, measured
// before gradient folding, was slower: docs/BENCHMARKS.md).
inline constexpr int kMaxPackedWeights = 4;
inline constexpr int64_t kMaxPackedBytes = int64_t{6} << 20;
// Below this many weight elements packing is cheap, and the product stays on Eigen's path.
inline constexpr int64_t kMinPackedElements = 64 * 1024;

// The products that packed a weight and that reused a packing, in this process so far (for
// tests and benchmarks).
struct SharedPackingCounts {
  int64_t packed = 0;
  int64_t reused = 0;
};
SharedPackingCounts SharedPackingCountsSoFar();

}  // namespace tower::cpu

#endif  // TOWER_OPS_CPU_SHARED_PACKING_H_
