// BfcAllocator: best-fit with coalescing, the algorithm of TensorFlow's BFC allocator,
// over any MemorySource (host memory for logical CPUs, cudaMalloc for logical GPUs).
//
// Memory is taken from the source in regions and carved into chunks. A request is rounded
// up to 256 bytes and served by the smallest free chunk that fits (split if larger); a freed
// chunk merges with free neighbours at once, so two adjacent chunks are never both free.
// Free chunks sit in 21 bins by size (bin b holds sizes in [256·2^b, 256·2^(b+1))), each bin
// ordered by (size, address), so best fit is one ordered lookup per bin.
//
// Small frees are cached: a freed chunk of at most kMaxCachedChunkBytes (1 KiB) goes on a
// LIFO of its size (kCachedChunksPerSize at most) instead of merging into the bins, and the
// next request of that rounded size takes it back. For such chunks the bookkeeping (a bin's
// tree erase and insert, a split, a merge) costs more than the bytes themselves, and a
// training step of a small model frees and requests the same sizes every step: a `linreg`
// step of 8 replicas spent 18 % of its time in this allocator before the cache. A cached
// chunk is free (no stats count it in use; freeing it again aborts) but stays unmerged; the
// cache is returned to the bins before any request would otherwise grow or fail, so the
// cache never makes an allocation fail, nor takes a region, that the bins alone would not
// have needed; and the stats' largest free block counts a cached chunk with its free
// neighbours.
//
// Policies:
//   growth (default): regions are taken on demand — first `initial_region_bytes`, each next
//     one twice as large — until `limit_bytes` are reserved. Regions are kept until the
//     allocator is destroyed (memory never goes back, as in TensorFlow).
//   no growth: one region of `limit_bytes` is taken when the allocator is created.
// Either way an allocation that does not fit in the limit is ResourceExhausted naming the
// device, the request, the limit, what is in use and the largest free block; the allocator
// stays fully usable afterwards.
//
// Thread-safe: one lock (a spin lock: util/spin_lock.h); every call is O(log n) in the
// number of chunks, O(1) when the cache serves it.
#ifndef TOWER_DEVICE_BFC_ALLOCATOR_H_
#define TOWER_DEVICE_BFC_ALLOCATOR_H_

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "device/memory_source.h"
#include "util/cache_line.h"
#include "util/node_pool.h"
#include "util/spin_lock.h"
#include "util/statusor.h"

namespace tower {

struct AllocatorOptions {
  // Most bytes that may be taken from the source in all. Must be > 0.
  uint64_t limit_bytes = 0;
  bool allow_growth = true;
  // Growth only: size of the first region; later regions double. Rounded up to 256.
  uint64_t initial_region_bytes = 2ull << 20;
};

struct AllocatorStats {
  uint64_t bytes_in_use = 0;         // rounded sizes of live allocations
  uint64_t peak_bytes_in_use = 0;    // since creation or the last ResetPeakStats
  uint64_t bytes_reserved = 0;       // taken from the memory source (all regions)
  uint64_t peak_bytes_reserved = 0;  // since creation or the last ResetPeakStats
  uint64_t bytes_limit = 0;
  int64_t num_allocs = 0;            // successful allocations since creation
  int64_t live_allocs = 0;
  int64_t num_ooms = 0;              // allocations refused with ResourceExhausted
  uint64_t largest_alloc_size = 0;   // largest request served since creation
  uint64_t largest_free_block = 0;   // largest free chunk inside reserved regions
  int64_t num_regions = 0;
  // Largest single request that could succeed now: the largest free chunk, or a new
  // region from what the limit still allows (growth only).
  uint64_t largest_allocatable = 0;
};

class BfcAllocator {
 public:
  static constexpr size_t kMinAllocationSize = 256;
  static constexpr int kNumBins = 21;
  // The free cache (above): chunk sizes 256, 512, 768 and 1024 bytes, a LIFO of each.
  static constexpr size_t kMaxCachedChunkBytes = 1024;
  static constexpr int kCachedChunksPerSize = 32;

  // `device_name` appears in every error. Without growth this reserves the whole limit now,
  // and fails (ResourceExhausted) if the source cannot provide it.
  static StatusOr<std::unique_ptr<BfcAllocator>> Create(std::string device_name,
                                                        std::unique_ptr<MemorySource> source,
                                                        const AllocatorOptions& options);
  ~BfcAllocator();
  BfcAllocator(const BfcAllocator&) = delete;
  BfcAllocator& operator=(const BfcAllocator&) = delete;

  // At least `bytes` bytes aligned to 256; nullptr for 0 bytes.
  StatusOr<void*> Allocate(size_t bytes);
  // Returns memory from Allocate. nullptr is ignored; any other pointer not from this
  // allocator (or freed twice) is a programming error and aborts.
  void Deallocate(void* ptr);

  // Small host records that live as long as an allocation (a tensor buffer's reference
  // counts): from the allocator's node pool, so a steady state of allocations and frees
  // calls malloc for neither. Thread-safe; `bytes` must match between the two calls.
  // (The names PoolAllocator, util/node_pool.h, calls.)
  void* AllocateNode(size_t bytes);
  void DeallocateNode(void* node, size_t bytes);

  // Size of the chunk serving `ptr` (the request rounded up to 256, or more when the rest
  // of a chunk was too small to split off). `ptr` must be live.
  size_t AllocatedSize(const void* ptr) const;
  bool Owns(const void* ptr) const;

  AllocatorStats GetStats() const;
  // Peak figures restart from the current ones.
  void ResetPeakStats();

  const std::string& device_name() const { return device_name_; }
  const AllocatorOptions& options() const { return options_; }

  // Walks every region and bin and checks the allocator's invariants: chunks tile each
  // region exactly, no two neighbours are free, bins hold exactly the free chunks in the
  // right order, counters match. For tests; returns Internal describing the first breach.
  Status CheckInvariants() const;

 private:
  using ChunkHandle = int32_t;
  static constexpr ChunkHandle kInvalidChunk = -1;

  struct Chunk {
    char* ptr = nullptr;
    size_t size = 0;
    size_t requested = 0;  // 0 while free
    bool in_use = false;
    ChunkHandle prev = kInvalidChunk;  // neighbours in the same region, by address
    ChunkHandle next = kInvalidChunk;
    int bin = -1;  // bin holding this chunk while free; -1 while in use or cached
    int region = -1;
    // Free but held in the free cache: in no bin, still in in_use_ (a chunk of a region is
    // in use, in a bin, or cached).
    bool cached() const { return !in_use && bin < 0; }
  };
  struct Region {
    char* base = nullptr;
    size_t size = 0;
  };
  // Orders a bin by (size, address); transparent so lookups can use a (size, address) key.
  struct BinOrder {
    using is_transparent = void;
    const std::vector<Chunk>* chunks;
    bool operator()(ChunkHandle a, ChunkHandle b) const;
    bool operator()(ChunkHandle a, const std::pair<size_t, const char*>& b) const;
    bool operator()(const std::pair<size_t, const char*>& a, ChunkHandle b) const;
  };
  // The bins' and the pointer map's nodes come from node_pool_: a steady stream of
  // allocations and frees calls malloc only while the allocator grows.
  using Bin = std::set<ChunkHandle, BinOrder, PoolAllocator<ChunkHandle>>;
  using InUseMap =
      std::unordered_map<const void*, ChunkHandle, std::hash<const void*>,
                         std::equal_to<const void*>,
                         PoolAllocator<std::pair<const void* const, ChunkHandle>>>;

  BfcAllocator(std::string device_name, std::unique_ptr<MemorySource> source,
               const AllocatorOptions& options);

  static int BinFor(size_t size);
  ChunkHandle NewChunk();
  void DeleteChunk(ChunkHandle handle);
  void InsertFree(ChunkHandle handle);
  void RemoveFree(ChunkHandle handle);
  ChunkHandle FindFit(size_t rounded);
  // Takes a region big enough for `rounded` bytes if growth and the limit allow; on failure
  // `*why` says what stopped it, and `*source_failed` whether the source refused.
  bool Grow(size_t rounded, std::string* why, bool* source_failed);
  Status AddRegion(size_t bytes);
  // Returns a chunk no longer in use (and no longer in in_use_) to the bins, merged with
  // its binned free neighbours.
  void ReleaseToBins(ChunkHandle handle);
  // Every cached chunk back to the bins; true if there was any.
  bool FlushCacheLocked();
  static int CacheSlot(size_t chunk_size) {
    return static_cast<int>(chunk_size / kMinAllocationSize) - 1;
  }
  void Split(ChunkHandle handle, size_t size);
  ChunkHandle Merge(ChunkHandle left, ChunkHandle right);
  uint64_t LargestFreeChunkLocked() const;
  AllocatorStats StatsLocked() const;
  Status OutOfMemory(size_t bytes, const std::string& why, bool source_failed);

  const std::string device_name_;
  const std::unique_ptr<MemorySource> source_;
  const AllocatorOptions options_;

  // A spin lock, not std::mutex: every tensor takes it four times (its buffer and its
  // record, allocated and freed), and the sections under it never block. On a cache line
  // of its own (the alignas on the next member too): nothing else written shares its line.
  alignas(kCacheLineBytes) mutable SpinLock mu_;
  alignas(kCacheLineBytes) NodePool node_pool_;  // before the containers that use it (destroyed after them)
  std::vector<Chunk> chunks_;
  std::vector<ChunkHandle> free_handles_;
  std::vector<Region> regions_;
  std::array<Bin, kNumBins> bins_;
  // Live chunks, and cached ones (Chunk::cached()), by address.
  InUseMap in_use_;
  struct CacheStack {
    std::array<ChunkHandle, kCachedChunksPerSize> handles;
    int size = 0;
  };
  std::array<CacheStack, kMaxCachedChunkBytes / kMinAllocationSize> cache_;
  uint64_t next_region_bytes_;
  AllocatorStats stats_;
};

}  // namespace tower

#endif  // TOWER_DEVICE_BFC_ALLOCATOR_H_
