#include "ops/cpu/gemm.h"

#include <Eigen/Core>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "ops/cpu/eigen.h"

namespace tower::cpu {
namespace {

using Index = Eigen::Index;
namespace ei = Eigen::internal;
using Traits = ei::gebp_traits<float, float>;
using ResMapper = ei::blas_data_mapper<float, Index, Eigen::ColMajor, Eigen::Unaligned, 1>;
using FloatBuffer = std::vector<float, Eigen::aligned_allocator<float>>;

// ---- A result that the kernel writes instead of adding to.
// Eigen's kernel ends each tile with `res = res + alpha·tile` (vector loads and stores through
// the result's mapper, scalar `res(i, j) += …` at the edges). Through these mappers its reads
// are zeros, so it stores 0 + alpha·tile: what it stores on a zeroed result, without the
// zeroing or the reads.
class OverwritingLinearMapper {
 public:
  explicit OverwritingLinearMapper(const ResMapper::LinearMapper& base) : base_(base) {}
  void prefetch(int i) const { base_.prefetch(i); }
  template <typename Packet>
  Packet loadPacket(Index) const {
    return ei::pset1<Packet>(0.0f);
  }
  template <typename Packet>
  void storePacket(Index i, const Packet& p) const {
    base_.storePacket(i, p);
  }

 private:
  ResMapper::LinearMapper base_;
};

struct OverwrittenScalar {
  float* element;
  void operator+=(float value) const { *element = 0.0f + value; }
};

class OverwritingMapper {
 public:
  using LinearMapper = OverwritingLinearMapper;
  explicit OverwritingMapper(const ResMapper& base) : base_(base) {}
  LinearMapper getLinearMapper(Index i, Index j) const {
    return LinearMapper(base_.getLinearMapper(i, j));
  }
  OverwrittenScalar operator()(Index i, Index j) const { return {&base_(i, j)}; }
  template <typename Packet>
  Packet gatherPacket(Index, Index) const {
    return ei::pset1<Packet>(0.0f);
  }
  template <typename Packet>
  void scatterPacket(Index i, Index j, const Packet& p) const {
    base_.scatterPacket(i, j, p);
  }

 private:
  ResMapper base_;
};

// ---- Buffers, each thread its own, grown and never shrunk: no allocation once a step's
// largest product has run.
struct Scratch {
  FloatBuffer lhs;  // one packed weight block, mc × kc
  FloatBuffer rhs;  // one packed activation block, kc × nc
  // The shared activations of the products this thread splits.
  FloatBuffer shared;
  std::unique_ptr<std::atomic<uint64_t>[]> ready;
  size_t ready_size = 0;
  std::atomic<int64_t> next_block{0};
};

Scratch& ThreadScratch() {
  static thread_local Scratch scratch;
  return scratch;
}

float* AtLeast(FloatBuffer& buffer, Index floats) {
  if (buffer.size() < static_cast<size_t>(floats)) buffer.resize(static_cast<size_t>(floats));
  return buffer.data();
}

std::atomic<uint64_t> last_ticket{0};

// The threshold below which Eigen multiplies coefficient by coefficient
// (EIGEN_GEMM_TO_COEFFBASED_THRESHOLD).
constexpr Index kCoefficientBasedBelow = 20;

// The column-major problem Eigen solves for a row-major block: out[r0:r1, c0:c1] is
// outᵀ[c0:c1, r0:r1] = op(b)ᵀ[c0:c1, :] · op(a)ᵀ[:, r0:r1], column-major. Eigen's lhs, op(b)ᵀ,
// is column-major with stride n when b is [k, n]; row-major with stride k when b is [n, k]
// (transpose_b). Its rhs, op(a)ᵀ, is column-major with stride k when a is [m, k]; row-major
// with stride m when a is [k, m] (transpose_a). Its result is column-major with stride n.
struct EigenProblem {
  const float* lhs;
  Index lhs_stride;
  const float* rhs;
  Index rhs_stride;
  float* res;
  Index res_stride;
  Index rows, cols, depth;  // Eigen's: c1 - c0, r1 - r0, k
  GemmEpilogue epilogue;    // its bias from column c0 on
};

EigenProblem ProblemOf(const GemmOperands& g, Index r0, Index r1, Index c0, Index c1) {
  EigenProblem p;
  p.lhs = g.transpose_b ? g.b + c0 * g.k : g.b + c0;
  p.lhs_stride = g.transpose_b ? g.k : g.n;
  p.rhs = g.transpose_a ? g.a + r0 : g.a + r0 * g.k;
  p.rhs_stride = g.transpose_a ? g.m : g.k;
  p.res = g.out + r0 * g.n + c0;
  p.res_stride = g.n;
  p.rows = c1 - c0;
  p.cols = r1 - r0;
  p.depth = g.k;
  p.epilogue = g.epilogue;
  if (p.epilogue.bias != nullptr) p.epilogue.bias += c0;
  return p;
}

// Waits until `mark` holds `ticket`: for a block another thread claimed and is packing now
// (packing never waits), a few microseconds, unless the host took that thread's core away.
void AwaitTicket(const std::atomic<uint64_t>& mark, uint64_t ticket) {
  for (int spins = 0; mark.load(std::memory_order_acquire) != ticket; ++spins) {
    if (spins < 4096) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
}

// Block b of `shared`, packed: until it is ready this thread packs the next unclaimed block,
// b or one after it (while another thread packs b, this one packs a block both will need
// next instead of waiting), then it waits for the thread that claimed b.
template <typename Pack>
const float* ReadyBlock(const SharedBlocks& shared, Index b, const Pack& pack) {
  while (shared.ready[b].load(std::memory_order_acquire) != shared.ticket &&
         shared.next_block->load(std::memory_order_relaxed) < shared.count) {
    const Index claimed = shared.next_block->fetch_add(1, std::memory_order_relaxed);
    if (claimed >= shared.count) break;
    if (shared.before_packing != nullptr) shared.before_packing(claimed);
    pack(shared.blocks + claimed * shared.block_floats, claimed);
    shared.ready[claimed].store(shared.ticket, std::memory_order_release);
  }
  AwaitTicket(shared.ready[b], shared.ticket);
  return shared.blocks + b * shared.block_floats;
}

// Block b of an operand: read from its shared packing where there is one, else this
// thread's own block, packed into `own` first where `pack_own`.
template <typename Pack>
const float* PackedBlock(const SharedBlocks* shared, Index b, const Pack& pack, float* own,
                         bool pack_own) {
  if (shared != nullptr) return ReadyBlock(*shared, b, pack);
  if (pack_own) pack(own, b);
  return own;
}

// Eigen's sequential loop (general_matrix_matrix_product::run), with the first depth block
// written where the product is not accumulated, and the blocks of either operand read from
// a shared packing where the caller has one.
template <int LhsOrder, int RhsOrder>
void Loop(const EigenProblem& p, const GemmBlockSizes& sizes, bool accumulate,
          const SharedBlocks* shared_lhs, const SharedBlocks* shared_rhs) {
  using LhsMapper = ei::const_blas_data_mapper<float, Index, LhsOrder>;
  using RhsMapper = ei::const_blas_data_mapper<float, Index, RhsOrder>;
  const LhsMapper lhs(p.lhs, p.lhs_stride);
  const RhsMapper rhs(p.rhs, p.rhs_stride);
  const ResMapper res(p.res, p.res_stride, 1);
  ei::gemm_pack_lhs<float, Index, LhsMapper, Traits::mr, Traits::LhsProgress,
                    typename Traits::LhsPacket4Packing, LhsOrder>
      pack_lhs;
  ei::gemm_pack_rhs<float, Index, RhsMapper, Traits::nr, RhsOrder> pack_rhs;
  ei::gebp_kernel<float, float, Index, ResMapper, Traits::mr, Traits::nr, false, false> add;
  ei::gebp_kernel<float, float, Index, OverwritingMapper, Traits::mr, Traits::nr, false, false>
      write;
  const Index rows = p.rows, cols = p.cols, depth = p.depth;
  const Index kc = sizes.kc, mc = sizes.mc, nc = sizes.nc;
  const Index depth_blocks = (depth + kc - 1) / kc;
  const Index col_blocks = (cols + nc - 1) / nc;
  Scratch& scratch = ThreadScratch();
  float* const lhs_block = shared_lhs != nullptr ? nullptr : AtLeast(scratch.lhs, kc * mc);
  float* const rhs_block = shared_rhs != nullptr ? nullptr : AtLeast(scratch.rhs, kc * nc);
  // Eigen packs the whole rhs once where one depth block and one column block hold it and
  // the lhs takes several row blocks.
  const bool pack_rhs_once = mc != rows && kc == depth && nc == cols;
  const auto pack_lhs_block = [&](float* to, Index b) {
    const Index i2 = b / depth_blocks * mc, k2 = b % depth_blocks * kc;
    pack_lhs(to, lhs.getSubMapper(i2, k2), std::min(k2 + kc, depth) - k2,
             std::min(i2 + mc, rows) - i2);
  };
  const auto pack_rhs_block = [&](float* to, Index b) {
    const Index k2 = b / col_blocks * kc, j2 = b % col_blocks * nc;
    pack_rhs(to, rhs.getSubMapper(k2, j2), std::min(k2 + kc, depth) - k2,
             std::min(j2 + nc, cols) - j2);
  };
  for (Index i2 = 0; i2 < rows; i2 += mc) {
    const Index actual_mc = std::min(i2 + mc, rows) - i2;
    for (Index k2 = 0; k2 < depth; k2 += kc) {
      const Index actual_kc = std::min(k2 + kc, depth) - k2;
      const float* packed_lhs = PackedBlock(shared_lhs, i2 / mc * depth_blocks + k2 / kc,
                                            pack_lhs_block, lhs_block, /*pack_own=*/true);
      for (Index j2 = 0; j2 < cols; j2 += nc) {
        const Index actual_nc = std::min(j2 + nc, cols) - j2;
        const float* packed_rhs = PackedBlock(shared_rhs, k2 / kc * col_blocks + j2 / nc,
                                              pack_rhs_block, rhs_block, !pack_rhs_once || i2 == 0);
        if (k2 == 0 && !accumulate) {
          write(OverwritingMapper(res.getSubMapper(i2, j2)), packed_lhs, packed_rhs, actual_mc,
                actual_kc, actual_nc, 1.0f);
        } else {
          add(res.getSubMapper(i2, j2), packed_lhs, packed_rhs, actual_mc, actual_kc,
              actual_nc, 1.0f);
        }
        // The tile's sums are complete after the last depth block: its epilogue now, while
        // the tile (our rows j2.., columns i2..) is still in cache.
        if (k2 + actual_kc == depth) {
          ApplyEpilogue(p.epilogue, p.res, p.res_stride, j2, j2 + actual_nc, i2, i2 + actual_mc);
        }
      }
    }
  }
}

}  // namespace

void ApplyEpilogue(const GemmEpilogue& epilogue, float* out, int64_t stride, int64_t r0,
                   int64_t r1, int64_t c0, int64_t c1) {
  if (epilogue.empty() || c1 <= c0) return;
  const int64_t width = c1 - c0;
  for (int64_t r = r0; r < r1; ++r) {
    ArrayMap row(out + r * stride + c0, width);
    if (epilogue.bias == nullptr) {
      row = ReluOf(row);
      continue;
    }
    const ConstArrayMap bias(epilogue.bias + c0, width);
    if (epilogue.relu) {
      row = ReluOf(row + bias);  // the sum rounded, as BiasAdd rounds it, then Relu's max
    } else {
      row += bias;
    }
  }
}

GemmBlockSizes EigenBlockSizes(int64_t rows, int64_t depth, int64_t cols) {
  Index kc = depth, mc = cols, nc = rows;
  ei::computeProductBlockingSizes<float, float, 1>(kc, mc, nc, Index{1});
  return {kc, std::min<Index>(cols, mc), std::min<Index>(rows, nc)};
}

bool EigenUsesGemm(const GemmOperands& g, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const int64_t rows = r1 - r0, cols = c1 - c0;
  return rows >= 2 && cols >= 2 && g.k >= 1 && rows + cols + g.k >= kCoefficientBasedBelow;
}

bool PrepareSharedActivations(const GemmOperands& g, int64_t chunk_columns,
                              SharedBlocks* shared) {
  if (!EigenUsesGemm(g, 0, g.m, 0, chunk_columns)) return false;
  const GemmBlockSizes sizes = EigenBlockSizes(g.m, g.k, chunk_columns);
  const int64_t count = (g.k + sizes.kc - 1) / sizes.kc * ((g.m + sizes.nc - 1) / sizes.nc);
  const int64_t block_floats = RoundUpToCacheLine(sizes.kc * sizes.nc);
  if (count * block_floats * int64_t{sizeof(float)} > kMaxSharedActivationBytes) return false;
  Scratch& scratch = ThreadScratch();
  if (scratch.ready_size < static_cast<size_t>(count)) {
    // Value-initialised: 0, which no ticket is.
    scratch.ready = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(count));
    scratch.ready_size = static_cast<size_t>(count);
  }
  scratch.next_block.store(0, std::memory_order_relaxed);
  shared->blocks = AtLeast(scratch.shared, count * block_floats);
  shared->ready = scratch.ready.get();
  shared->next_block = &scratch.next_block;
  shared->ticket = last_ticket.fetch_add(1, std::memory_order_relaxed) + 1;
  shared->count = count;
  shared->block_floats = block_floats;
  shared->sizes = sizes;
  shared->before_packing = nullptr;
  return true;
}

bool GemmBlock(const GemmOperands& g, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
               const GemmSharing& sharing) {
  if (!EigenUsesGemm(g, r0, r1, c0, c1)) return false;
  const EigenProblem p = ProblemOf(g, r0, r1, c0, c1);
  const GemmBlockSizes sizes = EigenBlockSizes(r1 - r0, g.k, c1 - c0);
  // A shared packing serves the blocks it was packed for: a weight's, every column of the
  // product (its lhs rows); activations', every row (its rhs columns); both, this blocking.
  const SharedBlocks* lhs = sharing.weight;
  if (lhs != nullptr && (c0 != 0 || c1 != g.n || lhs->sizes.kc != sizes.kc ||
                         lhs->sizes.mc != sizes.mc)) {
    lhs = nullptr;
  }
  const SharedBlocks* rhs = sharing.activations;
  if (rhs != nullptr && (r0 != 0 || r1 != g.m || rhs->sizes.kc != sizes.kc ||
                         rhs->sizes.nc != sizes.nc)) {
    rhs = nullptr;
  }
  if (g.transpose_b) {
    if (g.transpose_a) {
      Loop<Eigen::RowMajor, Eigen::RowMajor>(p, sizes, g.accumulate, lhs, rhs);
    } else {
      Loop<Eigen::RowMajor, Eigen::ColMajor>(p, sizes, g.accumulate, lhs, rhs);
    }
  } else if (g.transpose_a) {
    Loop<Eigen::ColMajor, Eigen::RowMajor>(p, sizes, g.accumulate, lhs, rhs);
  } else {
    Loop<Eigen::ColMajor, Eigen::ColMajor>(p, sizes, g.accumulate, lhs, rhs);
  }
  return true;
}

}  // namespace tower::cpu
