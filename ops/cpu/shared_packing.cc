#include "ops/cpu/shared_packing.h"

#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace tower::cpu {
namespace {

using Index = Eigen::Index;

// One weight's packing: every (row block, depth block) of Eigen's lhs, each at its own
// 64-byte aligned offset, for one blocking. The packing depends on the blocking's depth and
// weight-row block sizes, not on the product's m (its batch rows), so products of other row
// counts with the same blocking (uneven shards: 63 and 62 rows) share it.
//
// Every thread of the process shares it: the products of one version pack its blocks
// together, each claiming the next block nobody packs yet (`next_block`), and each reads a
// block once the thread that packed it marked it ready (`ready[b]` holds the version packed
// into block b). Two replicas on two cores then pack half of the weight each, where each
// packed all of it; replicas that run later reuse every block.
struct PackedWeight {
  // Guarded by Cache::mutex.
  const float* weight = nullptr;  // null: the entry holds nothing
  uint64_t version = 0;
  bool transposed = false;
  Index rows = 0;  // Eigen's lhs rows: the product's n
  Index depth = 0;
  Index kc = 0, mc = 0;  // the blocking it was packed for
  int users = 0;         // products packing or reading it now: it is not replaced under them
  std::vector<float, Eigen::aligned_allocator<float>> blocks;
  std::vector<std::atomic<uint64_t>> ready;  // at least one mark per block
  // Claimed under `version` (reset, with the ready marks, only while nobody uses the entry).
  std::atomic<Index> next_block{0};
};

// The process's packings. A product holds the mutex only to find, claim or release its
// entry (two short critical sections per product of 0.1-10 ms); packing and reading the
// blocks run outside it.
struct Cache {
  std::mutex mutex;
  PackedWeight entries[kMaxPackedWeights];
};

std::atomic<int64_t> packed_count{0};
std::atomic<int64_t> reused_count{0};
std::atomic<void (*)()> after_claim_hook{nullptr};
std::atomic<void (*)(int64_t)> before_packing_block_hook{nullptr};

Cache& Packings() {
  static Cache* const cache = new Cache();  // never destroyed: threads may outlive statics
  return *cache;
}

// Eigen's scratch for the activations' blocks: each thread its own.
std::vector<float, Eigen::aligned_allocator<float>>& RhsScratch() {
  static thread_local std::vector<float, Eigen::aligned_allocator<float>> scratch;
  return scratch;
}

constexpr Index kAlignFloats = 16;

// Eigen's blocking of one product, and where each packed (row block, depth block) of the
// weight lives in a PackedWeight's buffer.
struct Blocking {
  Index kc, mc, nc;      // depth, weight-row (the product's n) and batch-row block sizes
  Index depth_blocks;    // blocks along the depth
  Index blocks;          // every block of the weight: row blocks × depth_blocks
  Index block_floats;    // one packed block, rounded up to 64 bytes
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
  b.blocks = (n + b.mc - 1) / b.mc * b.depth_blocks;
  b.block_floats = (b.mc * b.kc + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  return b;
}

// Waits for another thread to finish packing a block: it is packing it now (packing never
// waits), so this is a few microseconds, unless the host took that thread's core away.
void AwaitReady(const std::atomic<uint64_t>& mark, uint64_t version) {
  for (int spins = 0; mark.load(std::memory_order_acquire) != version; ++spins) {
    if (spins < 4096) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
}

// The column-major problem Eigen solves for a row-major product: out[m, n] row-major is
// outᵀ[n, m] column-major = wᵀ[n, depth] · aᵀ[depth, m]. Eigen's lhs is wᵀ: column-major with
// stride n when w is [depth, n] row-major; row-major with stride depth when w is [n, depth]
// row-major and transposed. Its rhs is aᵀ, column-major with stride depth; its result outᵀ,
// column-major with stride n. Before it reads a weight block it makes sure the block is
// packed under `version`: until it is, the thread packs the next unclaimed blocks itself,
// then waits for the thread that claimed it, if another did.
template <int LhsOrder>
void Multiply(const float* a, Index m, Index depth, const float* w, Index n, float* out,
              const Blocking& blocking, PackedWeight& entry, uint64_t version) {
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
  const Index depth_blocks = blocking.depth_blocks, blocks = blocking.blocks;
  float* const packed = entry.blocks.data();
  std::vector<float, Eigen::aligned_allocator<float>>& scratch = RhsScratch();
  scratch.resize(std::max<size_t>(scratch.size(), static_cast<size_t>(kc * nc)));
  float* const rhs_block = scratch.data();
  // Blocks are numbered in the loop's order: row block i2 / mc, then depth block k2 / kc.
  const auto pack_block = [&](Index b) {
    const Index i2 = b / depth_blocks * mc, k2 = b % depth_blocks * kc;
    if (auto* hook = before_packing_block_hook.load(std::memory_order_relaxed)) hook(b);
    pack_lhs(packed + b * blocking.block_floats, lhs.getSubMapper(i2, k2),
             std::min(k2 + kc, depth) - k2, std::min(i2 + mc, n) - i2);
    entry.ready[b].store(version, std::memory_order_release);
  };
  // Until block b is ready, pack the next unclaimed block, b or one after it: while another
  // thread packs b, this one packs the block both will need next instead of waiting.
  const auto make_ready = [&](Index b) {
    while (entry.ready[b].load(std::memory_order_acquire) != version &&
           entry.next_block.load(std::memory_order_relaxed) < blocks) {
      const Index claimed = entry.next_block.fetch_add(1, std::memory_order_relaxed);
      if (claimed >= blocks) break;
      pack_block(claimed);
    }
    AwaitReady(entry.ready[b], version);
  };
  // Eigen's sequential loop (general_matrix_matrix_product::run), the lhs blocks kept.
  for (Index i2 = 0; i2 < n; i2 += mc) {
    const Index actual_mc = std::min(i2 + mc, n) - i2;
    for (Index k2 = 0; k2 < depth; k2 += kc) {
      const Index actual_kc = std::min(k2 + kc, depth) - k2;
      const Index b = (i2 / mc) * depth_blocks + k2 / kc;
      make_ready(b);
      const float* const lhs_block = packed + b * blocking.block_floats;
      for (Index j2 = 0; j2 < m; j2 += nc) {
        const Index actual_nc = std::min(j2 + nc, m) - j2;
        pack_rhs(rhs_block, rhs.getSubMapper(k2, j2), actual_kc, actual_nc);
        gebp(res.getSubMapper(i2, j2), lhs_block, rhs_block, actual_mc, actual_kc, actual_nc,
             1.0f);
      }
    }
  }
}

// The entry for this weight, layout and blocking under `version`, with its use counted; null
// where there is none to be had. Called with the cache's mutex held.
PackedWeight* Claim(Cache& cache, const float* w, bool transposed, Index n, Index depth,
                    const Blocking& blocking, uint64_t version) {
  // The entry of this weight, layout and blocking; else one that no product of this version
  // uses (empty, or packed under an earlier version). A step multiplies by its weights in the
  // same order on every replica, so replacing a weight this version still needs would evict
  // each packing before its reuse once a step has more weights than entries (a 4-hidden-layer
  // `mlp`: 7 of 4, every product repacked, 6 % slower than no sharing): the weights past
  // the first kMaxPackedWeights take Eigen's path instead.
  PackedWeight* entry = nullptr;
  PackedWeight* unused = nullptr;
  for (PackedWeight& candidate : cache.entries) {
    if (candidate.weight == w && candidate.transposed == transposed && candidate.rows == n &&
        candidate.depth == depth && candidate.kc == blocking.kc && candidate.mc == blocking.mc) {
      entry = &candidate;
    } else if (unused == nullptr && candidate.users == 0 &&
               (candidate.weight == nullptr || candidate.version != version)) {
      unused = &candidate;
    }
  }
  if (entry != nullptr && entry->version == version) {
    ++entry->users;
    reused_count.fetch_add(1, std::memory_order_relaxed);
    return entry;
  }
  // A new version of this weight, or a weight new to the cache: nobody may be reading it.
  if (entry != nullptr && entry->users > 0) return nullptr;  // another model's step
  if (entry == nullptr) entry = unused;
  if (entry == nullptr) return nullptr;
  const size_t blocks = static_cast<size_t>(blocking.blocks);
  entry->blocks.resize(blocks * static_cast<size_t>(blocking.block_floats));
  // (Atomics do not move: a larger set of marks is a new vector.)
  if (entry->ready.size() < blocks) entry->ready = std::vector<std::atomic<uint64_t>>(blocks);
  for (size_t b = 0; b < blocks; ++b) entry->ready[b].store(0, std::memory_order_relaxed);
  entry->next_block.store(0, std::memory_order_relaxed);
  entry->weight = w;
  entry->version = version;
  entry->transposed = transposed;
  entry->rows = n;
  entry->depth = depth;
  entry->kc = blocking.kc;
  entry->mc = blocking.mc;
  entry->users = 1;
  packed_count.fetch_add(1, std::memory_order_relaxed);
  return entry;
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
  if (blocking.blocks * blocking.block_floats * Index{sizeof(float)} > kMaxPackedBytes) {
    return false;
  }

  Cache& cache = Packings();
  PackedWeight* entry;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    entry = Claim(cache, w, transpose_w, n, depth, blocking, version);
  }
  if (entry == nullptr) return false;
  if (auto* hook = after_claim_hook.load(std::memory_order_relaxed)) hook();
  // Eigen's kernel adds to the result (Eigen's evalTo zeroes it first).
  std::memset(out, 0, static_cast<size_t>(m * n) * sizeof(float));
  if (transpose_w) {
    Multiply<Eigen::RowMajor>(a, m, depth, w, n, out, blocking, *entry, version);
  } else {
    Multiply<Eigen::ColMajor>(a, m, depth, w, n, out, blocking, *entry, version);
  }
  std::lock_guard<std::mutex> lock(cache.mutex);
  --entry->users;
  return true;
}

void SetSharedPackingTestHooks(const SharedPackingTestHooks& hooks) {
  after_claim_hook.store(hooks.after_claim, std::memory_order_relaxed);
  before_packing_block_hook.store(hooks.before_packing_block, std::memory_order_relaxed);
}

SharedPackingCounts SharedPackingCountsSoFar() {
  return {packed_count.load(std::memory_order_relaxed),
          reused_count.load(std::memory_order_relaxed)};
}

}  // namespace tower::cpu
