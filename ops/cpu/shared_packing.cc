#include "ops/cpu/shared_packing.h"

#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "ops/cpu/gemm.h"

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

// The blocking of a product out[m, n] = a[m, depth] · w, and the weight's packed blocks in
// it: row blocks of Eigen's lhs (the product's n) × depth blocks, each at its own 64-byte
// aligned offset.
struct Blocking {
  GemmBlockSizes sizes;
  Index blocks;
  Index block_floats;
};

Blocking EigensBlocking(Index m, Index depth, Index n) {
  Blocking b;
  b.sizes = EigenBlockSizes(m, depth, n);
  b.blocks = (n + b.sizes.mc - 1) / b.sizes.mc * ((depth + b.sizes.kc - 1) / b.sizes.kc);
  b.block_floats = RoundUpToCacheLine(b.sizes.mc * b.sizes.kc);
  return b;
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
        candidate.depth == depth && candidate.kc == blocking.sizes.kc &&
        candidate.mc == blocking.sizes.mc) {
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
  entry->kc = blocking.sizes.kc;
  entry->mc = blocking.sizes.mc;
  entry->users = 1;
  packed_count.fetch_add(1, std::memory_order_relaxed);
  return entry;
}

}  // namespace

bool ProductWithSharedPacking(const float* a, int64_t m, int64_t depth, const float* w,
                              int64_t n, bool transpose_w, uint64_t version, float* out,
                              const GemmEpilogue& epilogue) {
  // Version 0 promises nothing: a plain product. A single row or column: Eigen multiplies it
  // as a matrix-vector product, with other bits (and no rows: nothing to compute).
  const GemmOperands product{a, w, out, m, n, depth};
  if (version == 0 || !EigenUsesGemm(product, 0, m, 0, n) || n * depth < kMinPackedElements) {
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
  SharedBlocks packed;
  packed.blocks = entry->blocks.data();
  packed.ready = entry->ready.data();
  packed.next_block = &entry->next_block;
  packed.ticket = version;
  packed.count = blocking.blocks;
  packed.block_floats = blocking.block_floats;
  packed.sizes = blocking.sizes;
  packed.before_packing = before_packing_block_hook.load(std::memory_order_relaxed);
  const GemmOperands g{a, w, out, m, n, depth, /*transpose_a=*/false, transpose_w,
                       /*accumulate=*/false, epilogue};
  GemmBlock(g, 0, m, 0, n, GemmSharing{&packed, nullptr});
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
