// Products whose right operand is a weight that several replicas multiply by in the same
// step: the weight is packed into Eigen's kernel layout once per step for the whole process.
// Threads that multiply by it at the same time pack its blocks together (each claims the
// next block nobody packs yet, and reads the others' blocks once they are ready); replicas
// that multiply later reuse every block.
//
// Why: each replica's product covers 1/R of the batch's rows but packs the whole weight, as a
// product of the full batch would. With R replicas on T < R threads, packing was 15-21 % of
// an `mlp` step at 4 and 8 replicas on 2 threads; with 2 replicas on 2 cores, each core
// packed every weight that the other packed too (docs/BENCHMARKS.md).
//
// What stays: the bits. The loop is Eigen's own sequential GEMM (general_matrix_matrix_product,
// GeneralMatrixMatrix.h) with its blocking, packing routines and kernel, as Tower runs it
// (ops/cpu/gemm.h); only where the packed weight blocks live, and which thread packs each,
// changes (a process-wide cache
// instead of an L2-sized scratch block per product). A packed block is the same bytes
// whoever packs it.
//
// The caller's promise: `version` is non-zero and belongs to one step of one model, and every
// call with the same weight pointer and `version`, on any thread, sees the same values in it.
// A model's training step gives each step a new version (model/sequential.cc).
#ifndef TOWER_OPS_CPU_SHARED_PACKING_H_
#define TOWER_OPS_CPU_SHARED_PACKING_H_

#include <cstdint>

#include "ops/cpu/gemm.h"

namespace tower::cpu {

// out[m, n] (row-major) = a[m, depth] · w, where w is the row-major weight [depth, n], or,
// with `transpose_w`, the transpose of the row-major weight [n, depth]. a is row-major.
// Returns false, having done nothing, where the packing is not worth keeping (a product too
// small, a weight whose packing would not fit the cache) or there is no room for it (every
// entry holds another weight of this version, or another model's step is using it); the
// caller then multiplies as usual.
// `epilogue` as GemmOperands' (ops/cpu/gemm.h).
bool ProductWithSharedPacking(const float* a, int64_t m, int64_t depth, const float* w,
                              int64_t n, bool transpose_w, uint64_t version, float* out,
                              const GemmEpilogue& epilogue = {});

// The process keeps at most this many packed weights, and none larger than kMaxPackedBytes.
// One copy for the process, not one per thread: a 4-hidden-layer `mlp` keeps its 7 weights
// worth packing (28 MiB), 19-26 % faster at 4 and 8 replicas than keeping 4 of them
// (docs/BENCHMARKS.md). A copy of every weight per thread, measured before gradient folding,
// was slower than none: reading packed copies back from memory cost what packing saved.
inline constexpr int kMaxPackedWeights = 8;
inline constexpr int64_t kMaxPackedBytes = int64_t{6} << 20;
// Below this many weight elements packing is cheap, and the product stays on Eigen's path.
inline constexpr int64_t kMinPackedElements = 64 * 1024;

// The products that packed a weight (the first of its version: the products running beside it
// pack some of its blocks, and count as reuses) and that reused a packing, in this process so
// far (for tests and benchmarks).
struct SharedPackingCounts {
  int64_t packed = 0;
  int64_t reused = 0;
};
SharedPackingCounts SharedPackingCountsSoFar();

// For tests: functions a product calls, where set, right after it has claimed its entry, and
// before it packs each block it claimed (Eigen's block number in the weight). A test holds a
// product there to reach what only overlapping products do: a new version refused while an
// older one is in use, a thread packing the blocks of a product that has not started, and a
// thread waiting for a block another is packing. Null (the default) calls nothing.
struct SharedPackingTestHooks {
  void (*after_claim)() = nullptr;
  void (*before_packing_block)(int64_t block) = nullptr;
};
void SetSharedPackingTestHooks(const SharedPackingTestHooks& hooks);

}  // namespace tower::cpu

#endif  // TOWER_OPS_CPU_SHARED_PACKING_H_
