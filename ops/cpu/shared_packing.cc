#include "ops/cpu/shared_packing.h"

#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

namespace tower::cpu {
namespace {

using Index = Eigen::Index;

// One weight's packing: every (row block, depth block) of Eigen's lhs, each at its own
// 64-byte aligned offset, for one blocking. The packing depends on the blocking's depth and
// weight-row block sizes, not on the product's m (its batch rows), so products of other row
// counts with the same blocking (uneven shards: 63 and 62 rows) share it.
struct PackedWeight {
  const float* weight = nullptr;
  uint64_t version = 0;
  bool transposed = false;
  Index rows = 0;  // Eigen's lhs rows: the product's n
  Index depth = 0;
  Index kc = 0, mc = 0;  // the blocking it was packed for
  std::vector<float, Eigen::aligned_allocator<float>> blocks;
};

// A thread's cache (shared by the replicas, fibers, that run on it: a fiber yields only in a
// wait, never inside a product, so one product at a time uses it).
struct ThreadCache {
  PackedWeight entries[kMaxPackedWeights];
  std::vector<float, Eigen::aligned_allocator<float>> rhs_block;
};

std::atomic<int64_t> packed_count{0};
std::atomic<int64_t> reused_count{0};

ThreadCache& Cache() {
  static thread_local ThreadCache cache;
  return cache;
}

constexpr Index kAlignFloats = 16;

// Eigen's blocking of one product, and where each packed (row block, depth block) of the
// weight lives in a PackedWeight's buffer.
struct Blocking {
  Index kc, mc, nc;      // depth, weight-row (the product's n) and batch-row block sizes
  Index depth_blocks;    // blocks along the depth
  Index block_floats;    // one packed block, rounded up to 64 bytes
  Index packed_floats;   // every block of the weight
};

// As Eigen computes it for a row-major result (gemm_blocking_space<RowMajor>(m, n, depth):
// its mc is our n, its nc our m).
Blocking EigensBlocking(Index m, Index depth, Index n) {
  Index kc = depth, mc = n, nc = m;
  Eigen::internal::computeProductBlockingSizes<float, float, 1>(kc, mc, nc, Index{1});
  Blocking b;
  b.kc = kc;
  b.mc = std::min(n, mc);
  b.nc = std::min(m, nc);
  b.depth_blocks = (depth + b.kc - 1) / b.kc;
  b.block_floats = (b.mc * b.kc + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  b.packed_floats = (n + b.mc - 1) / b.mc * b.depth_blocks * b.block_floats;
  return b;
}

// The column-major problem Eigen solves for a row-major product: out[m, n] row-major is
// outᵀ[n, m] column-major = wᵀ[n, depth] · aᵀ[depth, m]. Eigen's lhs is wᵀ: column-major with
// stride n when w is [depth, n] row-major; row-major with stride depth when w is [n, depth]
// row-major and transposed. Its rhs is aᵀ, column-major with stride depth; its result outᵀ,
// column-major with stride n. With `pack`, the weight's blocks are packed into `packed` as
// the loop reaches them; else they are read from it.
template <int LhsOrder>
void Multiply(const float* a, Index m, Index depth, const float* w, Index n, float* out,
              const Blocking& blocking, bool pack, float* packed, ThreadCache& cache) {
  using namespace Eigen::internal;
  typedef gebp_traits<float, float> Traits;
  typedef const_blas_data_mapper<float, Index, LhsOrder> LhsMapper;
  typedef const_blas_data_mapper<float, Index, Eigen::ColMajor> RhsMapper;
  typedef blas_data_mapper<float, Index, Eigen::ColMajor, Eigen::Unaligned, 1> ResMapper;
  const LhsMapper lhs(w, LhsOrder == Eigen::RowMajor ? depth : n);
  const RhsMapper rhs(a, depth);
  const ResMapper res(out, n);
  gemm_pack_lhs<float, Index, LhsMapper, Traits::mr, Traits::LhsProgress,
                typename Traits::LhsPacket4Packing, LhsOrder>
      pack_lhs;
  gemm_pack_rhs<float, Index, RhsMapper, Traits::nr, Eigen::ColMajor> pack_rhs;
  gebp_kernel<float, float, Index, ResMapper, Traits::mr, Traits::nr, false, false> gebp;
  const Index kc = blocking.kc, mc = blocking.mc, nc = blocking.nc;
  cache.rhs_block.resize(std::max<size_t>(cache.rhs_block.size(), static_cast<size_t>(kc * nc)));
  float* const rhs_block = cache.rhs_block.data();
  // Eigen's sequential loop (general_matrix_matrix_product::run), the lhs blocks kept.
  for (Index i2 = 0; i2 < n; i2 += mc) {
    const Index actual_mc = std::min(i2 + mc, n) - i2;
    for (Index k2 = 0; k2 < depth; k2 += kc) {
      const Index actual_kc = std::min(k2 + kc, depth) - k2;
      float* const lhs_block =
          packed + ((i2 / mc) * blocking.depth_blocks + k2 / kc) * blocking.block_floats;
      if (pack) pack_lhs(lhs_block, lhs.getSubMapper(i2, k2), actual_kc, actual_mc);
      for (Index j2 = 0; j2 < m; j2 += nc) {
        const Index actual_nc = std::min(j2 + nc, m) - j2;
        pack_rhs(rhs_block, rhs.getSubMapper(k2, j2), actual_kc, actual_nc);
        gebp(res.getSubMapper(i2, j2), lhs_block, rhs_block, actual_mc, actual_kc, actual_nc,
             1.0f);
      }
    }
  }
}

}  // namespace

bool ProductWithSharedPacking(const float* a, int64_t m, int64_t depth, const float* w,
                              int64_t n, bool transpose_w, uint64_t version, float* out) {
  // Version 0 promises nothing: a plain product. A single row or column: Eigen multiplies it
  // as a matrix-vector product, with other bits (and no rows: nothing to compute).
  if (version == 0 || m < 2 || n < 2 || depth < 1 || n * depth < kMinPackedElements) {
    return false;
  }
  const Blocking blocking = EigensBlocking(m, depth, n);
  if (blocking.packed_floats * Index{sizeof(float)} > kMaxPackedBytes) return false;

  // The entry of this weight, layout and blocking; else one that no product of this version
  // uses (empty, or packed under an earlier version). A step multiplies by its weights in the
  // same order on every replica, so replacing a weight this version still needs would evict
  // each packing before its reuse once a step has more weights than entries (a 4-hidden-layer
  // `mlp`: 7 of 4, every product repacked, 6 % slower than no sharing): the weights past
  // the first kMaxPackedWeights take Eigen's path instead.
  ThreadCache& cache = Cache();
  PackedWeight* entry = nullptr;
  PackedWeight* unused = nullptr;
  for (PackedWeight& candidate : cache.entries) {
    if (candidate.weight == w && candidate.transposed == transpose_w &&
        candidate.kc == blocking.kc && candidate.mc == blocking.mc) {
      entry = &candidate;
    } else if (unused == nullptr && (candidate.weight == nullptr || candidate.version != version)) {
      unused = &candidate;
    }
  }
  if (entry == nullptr) {
    if (unused == nullptr) return false;
    entry = unused;
    entry->weight = nullptr;
  }
  // (A matched entry has this blocking; a replaced one has no weight.)
  const bool pack = !(entry->weight == w && entry->version == version && entry->rows == n &&
                      entry->depth == depth);
  if (pack) {
    entry->weight = nullptr;  // incomplete until every block is packed
    entry->blocks.resize(static_cast<size_t>(blocking.packed_floats));
    packed_count.fetch_add(1, std::memory_order_relaxed);
  } else {
    reused_count.fetch_add(1, std::memory_order_relaxed);
  }
  // Eigen's kernel adds to the result (Eigen's evalTo zeroes it first).
  std::memset(out, 0, static_cast<size_t>(m * n) * sizeof(float));
  if (transpose_w) {
    Multiply<Eigen::RowMajor>(a, m, depth, w, n, out, blocking, pack, entry->blocks.data(),
                              cache);
  } else {
    Multiply<Eigen::ColMajor>(a, m, depth, w, n, out, blocking, pack, entry->blocks.data(),
                              cache);
  }
  if (pack) {
    entry->weight = w;
    entry->version = version;
    entry->transposed = transpose_w;
    entry->rows = n;
    entry->depth = depth;
    entry->kc = blocking.kc;
    entry->mc = blocking.mc;
  }
  return true;
}

SharedPackingCounts SharedPackingCountsSoFar() {
  return {packed_count.load(std::memory_order_relaxed),
          reused_count.load(std::memory_order_relaxed)};
}

}  // namespace tower::cpu
