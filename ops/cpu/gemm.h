// Tower's float32 GEMM loop: Eigen's own sequential GEMM (general_matrix_matrix_product::run,
// GeneralMatrixMatrix.h) with its blocking, packing routines and kernel, so the same bits as
// `out.noalias() = a * b` on the same block, driven by Tower for what Eigen's loop cannot do:
//   - the first depth block's products are written, not added to zeros: Eigen's evalTo zeroes
//     the result (memset: 3.3 % of a one-batch `mlp` step, perf 2026-11-28), then its kernel
//     reads those zeros back. 0 + x is x, so the bits do not change;
//   - an operand's packed blocks can be shared: the weight's by every replica's product of a
//     step (ops/cpu/shared_packing.h), the activations' by the chunks of one product split by
//     output columns over intra-op threads (ops/cpu/math_kernels.cc), where each chunk packed
//     all of them. A packed block is the same bytes whoever packs it.
#ifndef TOWER_OPS_CPU_GEMM_H_
#define TOWER_OPS_CPU_GEMM_H_

#include <atomic>
#include <cstdint>

namespace tower::cpu {

// What a product's output gets once its sum is complete (ops::FusedMatMul): out[r, c] =
// f(out[r, c] + bias[c]), f = Relu where `relu`; the bits of BiasAdd's and Relu's kernels.
struct GemmEpilogue {
  const float* bias = nullptr;  // [n], or none
  bool relu = false;
  bool empty() const { return bias == nullptr && !relu; }
};

// Applies `epilogue` to out[r0:r1, c0:c1] of a row-major out with rows `stride` floats apart.
void ApplyEpilogue(const GemmEpilogue& epilogue, float* out, int64_t stride, int64_t r0,
                   int64_t r1, int64_t c0, int64_t c1);

// out[m, n] = op(a)[m, k] · op(b)[k, n] (or +=, accumulating), every matrix row-major; op
// transposes where asked: a is [k, m] with transpose_a, b is [n, k] with transpose_b. Then
// the epilogue, on each block of out right after its last depth block, while it is in cache.
struct GemmOperands {
  const float* a = nullptr;
  const float* b = nullptr;
  float* out = nullptr;
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false;
  bool transpose_b = false;
  bool accumulate = false;
  GemmEpilogue epilogue = {};  // not with accumulate
};

// Eigen's block sizes for a row-major result of rows × cols (gemm_blocking_space<RowMajor>:
// its mc is our cols, its nc our rows), capped to the product as its loop caps them.
struct GemmBlockSizes {
  int64_t kc;  // depth
  int64_t mc;  // result columns: the side of op(b), Eigen's lhs (the weight's)
  int64_t nc;  // result rows: the side of op(a), Eigen's rhs (the activations')
};
GemmBlockSizes EigenBlockSizes(int64_t rows, int64_t depth, int64_t cols);

// One operand's packed blocks, shared by the threads or products that read them. Before a
// reader uses a block it packs the next blocks nobody has claimed (`next_block`) until that
// block is ready, then waits for the thread that claimed it, which is packing it now.
// Blocks are numbered in the loop's order: op(b)'s (weight) by row block of Eigen's lhs, then
// depth block; op(a)'s (activations) by depth block, then column block of Eigen's rhs.
struct SharedBlocks {
  float* blocks = nullptr;                   // `count` blocks, `block_floats` apart
  std::atomic<uint64_t>* ready = nullptr;    // per block: `ticket` once it is packed
  std::atomic<int64_t>* next_block = nullptr;
  uint64_t ticket = 0;  // non-zero: the packing's version or product
  int64_t count = 0;
  int64_t block_floats = 0;
  GemmBlockSizes sizes{};  // the blocking they were packed for
  // For tests: called, where set, before this thread packs block b.
  void (*before_packing)(int64_t block) = nullptr;
};

// `floats` rounded up to whole 64-byte lines: where packed blocks start apart.
inline int64_t RoundUpToCacheLine(int64_t floats) { return (floats + 15) / 16 * 16; }

// Sets up `shared` for the chunks of `g` split by output columns, the first `chunk_columns`
// wide, to pack op(a) once for all of them. Returns false where that is not to be had (a
// packing over kMaxSharedActivationBytes, or chunks Eigen would not multiply with its GEMM):
// each chunk then packs its own. The blocks live in the calling thread's buffer, for this
// product only (its next product reuses them).
bool PrepareSharedActivations(const GemmOperands& g, int64_t chunk_columns, SharedBlocks* shared);
inline constexpr int64_t kMaxSharedActivationBytes = int64_t{16} << 20;

// The blocks a product reads from shared packings, where it has them (null: its own).
struct GemmSharing {
  SharedBlocks* weight = nullptr;       // all of op(b), for blocks of every column
  SharedBlocks* activations = nullptr;  // all of op(a), for blocks of every row
};

// Eigen computes out[r0:r1, c0:c1] of `g` with its GEMM (not as a matrix-vector product: one
// row or column; not coefficient by coefficient: a tiny block; something to compute).
bool EigenUsesGemm(const GemmOperands& g, int64_t r0, int64_t r1, int64_t c0, int64_t c1);

// out[r0:r1, c0:c1] of `g`, reading a shared packing where `sharing` has one that covers the
// block with its blocking (a weight's: c0 = 0, c1 = n; activations': r0 = 0, r1 = m).
// Returns false, having done nothing, where !EigenUsesGemm: the caller asks Eigen.
bool GemmBlock(const GemmOperands& g, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
               const GemmSharing& sharing = {});

}  // namespace tower::cpu

#endif  // TOWER_OPS_CPU_GEMM_H_
