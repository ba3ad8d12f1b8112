#include "device/bfc_allocator.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "util/logging.h"
#include "util/strings.h"

namespace tower {
namespace {

constexpr uint64_t RoundUp(uint64_t bytes, uint64_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

}  // namespace

bool BfcAllocator::BinOrder::operator()(ChunkHandle a, ChunkHandle b) const {
  const Chunk& x = (*chunks)[a];
  const Chunk& y = (*chunks)[b];
  return x.size != y.size ? x.size < y.size : x.ptr < y.ptr;
}

bool BfcAllocator::BinOrder::operator()(ChunkHandle a,
                                        const std::pair<size_t, const char*>& b) const {
  const Chunk& x = (*chunks)[a];
  return x.size != b.first ? x.size < b.first : x.ptr < b.second;
}

bool BfcAllocator::BinOrder::operator()(const std::pair<size_t, const char*>& a,
                                        ChunkHandle b) const {
  const Chunk& y = (*chunks)[b];
  return a.first != y.size ? a.first < y.size : a.second < y.ptr;
}

StatusOr<std::unique_ptr<BfcAllocator>> BfcAllocator::Create(
    std::string device_name, std::unique_ptr<MemorySource> source,
    const AllocatorOptions& options) {
  if (options.limit_bytes < kMinAllocationSize) {
    return InvalidArgumentError("memory limit of " + device_name + " is " +
                                HumanBytes(options.limit_bytes) +
                                "; it must be at least 256 bytes");
  }
  std::unique_ptr<BfcAllocator> allocator(
      new BfcAllocator(std::move(device_name), std::move(source), options));
  if (!options.allow_growth) {
    // Reserve the whole limit now (rounded down to whole chunks).
    const size_t bytes = options.limit_bytes / kMinAllocationSize * kMinAllocationSize;
    std::lock_guard<SpinLock> lock(allocator->mu_);
    Status status = allocator->AddRegion(bytes);
    if (!status.ok()) {
      return ResourceExhaustedError("could not reserve " + BytesWithExact(bytes) + " for " +
                                    allocator->device_name_ + " from " +
                                    allocator->source_->Describe() + ": " + status.message() +
                                    ". Lower its memory limit, or turn on memory growth.");
    }
  }
  return allocator;
}

BfcAllocator::BfcAllocator(std::string device_name, std::unique_ptr<MemorySource> source,
                           const AllocatorOptions& options)
    : device_name_(std::move(device_name)),
      source_(std::move(source)),
      options_(options),
      bins_{},
      in_use_(0, std::hash<const void*>(), std::equal_to<const void*>(),
              InUseMap::allocator_type(&node_pool_)),
      next_region_bytes_(RoundUp(std::max<uint64_t>(options.initial_region_bytes, 1),
                                 kMinAllocationSize)) {
  for (Bin& bin : bins_) bin = Bin(BinOrder{&chunks_}, Bin::allocator_type(&node_pool_));
  stats_.bytes_limit = options.limit_bytes;
}

BfcAllocator::~BfcAllocator() {
  if (stats_.live_allocs != 0) {
    TOWER_LOG(ERROR) << device_name_ << ": allocator destroyed with " << stats_.live_allocs
                     << " live allocations (" << HumanBytes(stats_.bytes_in_use)
                     << "); their memory is released now";
  }
  for (const Region& region : regions_) source_->Free(region.base, region.size);
}

int BfcAllocator::BinFor(size_t size) {
  size_t units = size / kMinAllocationSize;  // >= 1 for any chunk
  int bin = 0;
  while (units > 1 && bin < kNumBins - 1) {
    units >>= 1;
    ++bin;
  }
  return bin;
}

BfcAllocator::ChunkHandle BfcAllocator::NewChunk() {
  if (!free_handles_.empty()) {
    const ChunkHandle handle = free_handles_.back();
    free_handles_.pop_back();
    chunks_[handle] = Chunk();
    return handle;
  }
  chunks_.emplace_back();
  return static_cast<ChunkHandle>(chunks_.size() - 1);
}

void BfcAllocator::DeleteChunk(ChunkHandle handle) {
  chunks_[handle] = Chunk();
  free_handles_.push_back(handle);
}

void BfcAllocator::InsertFree(ChunkHandle handle) {
  Chunk& chunk = chunks_[handle];
  chunk.bin = BinFor(chunk.size);
  bins_[chunk.bin].insert(handle);
}

void BfcAllocator::RemoveFree(ChunkHandle handle) {
  Chunk& chunk = chunks_[handle];
  TOWER_CHECK(chunk.bin >= 0) << "chunk not in a bin";
  bins_[chunk.bin].erase(handle);
  chunk.bin = -1;
}

BfcAllocator::ChunkHandle BfcAllocator::FindFit(size_t rounded) {
  // Bins are ordered by size, and each bin by (size, address): the first chunk at or after
  // (rounded, nullptr) in the first bin that has one is the best fit overall.
  for (int b = BinFor(rounded); b < kNumBins; ++b) {
    Bin& bin = bins_[b];
    auto it = bin.lower_bound(std::make_pair(rounded, static_cast<const char*>(nullptr)));
    if (it != bin.end()) return *it;
  }
  return kInvalidChunk;
}

Status BfcAllocator::AddRegion(size_t bytes) {
  TOWER_ASSIGN_OR_RETURN(void* base, source_->Allocate(bytes));
  TOWER_CHECK(reinterpret_cast<uintptr_t>(base) % MemorySource::kAlignment == 0)
      << source_->Describe() << " returned a misaligned region";
  regions_.push_back(Region{static_cast<char*>(base), bytes});
  const ChunkHandle handle = NewChunk();
  Chunk& chunk = chunks_[handle];
  chunk.ptr = static_cast<char*>(base);
  chunk.size = bytes;
  chunk.region = static_cast<int>(regions_.size() - 1);
  InsertFree(handle);
  stats_.bytes_reserved += bytes;
  stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
  stats_.num_regions = static_cast<int64_t>(regions_.size());
  return OkStatus();
}

bool BfcAllocator::Grow(size_t rounded, std::string* why, bool* source_failed) {
  if (!options_.allow_growth) {
    *why = "memory growth is off, and the " + HumanBytes(stats_.bytes_reserved) +
           " reserved at start are taken";
    return false;
  }
  const uint64_t remaining =
      (options_.limit_bytes - stats_.bytes_reserved) / kMinAllocationSize * kMinAllocationSize;
  if (remaining < rounded) {
    *why = "the limit leaves " + HumanBytes(remaining) + " to reserve";
    return false;
  }
  const uint64_t region = std::min<uint64_t>(std::max<uint64_t>(next_region_bytes_, rounded),
                                             remaining);
  Status status = AddRegion(region);
  if (!status.ok() && region > rounded) status = AddRegion(rounded);  // ask for less
  if (!status.ok()) {
    *why = source_->Describe() + " failed: " + status.message();
    *source_failed = true;
    return false;
  }
  next_region_bytes_ = std::min<uint64_t>(next_region_bytes_ * 2, options_.limit_bytes);
  return true;
}

void BfcAllocator::Split(ChunkHandle handle, size_t size) {
  const ChunkHandle rest = NewChunk();  // may reallocate chunks_: index after this line
  Chunk& chunk = chunks_[handle];
  Chunk& tail = chunks_[rest];
  tail.ptr = chunk.ptr + size;
  tail.size = chunk.size - size;
  tail.region = chunk.region;
  tail.prev = handle;
  tail.next = chunk.next;
  if (chunk.next != kInvalidChunk) chunks_[chunk.next].prev = rest;
  chunk.next = rest;
  chunk.size = size;
  InsertFree(rest);
}

BfcAllocator::ChunkHandle BfcAllocator::Merge(ChunkHandle left, ChunkHandle right) {
  Chunk& a = chunks_[left];
  const Chunk& b = chunks_[right];
  a.size += b.size;
  a.next = b.next;
  if (b.next != kInvalidChunk) chunks_[b.next].prev = left;
  DeleteChunk(right);
  return left;
}

StatusOr<void*> BfcAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  std::lock_guard<SpinLock> lock(mu_);
  if (bytes > options_.limit_bytes) {
    return OutOfMemory(bytes, "the request is larger than the whole limit", false);
  }
  const size_t rounded = RoundUp(bytes, kMinAllocationSize);
  ChunkHandle handle = kInvalidChunk;
  if (rounded <= kMaxCachedChunkBytes) {
    CacheStack& stack = cache_[CacheSlot(rounded)];
    if (stack.size > 0) {
      // Already in in_use_, split to exactly this size: only its state changes.
      handle = stack.handles[--stack.size];
    }
  }
  if (handle == kInvalidChunk) {
    handle = FindFit(rounded);
    // The cache goes back to the bins before the allocator grows or fails.
    if (handle == kInvalidChunk && FlushCacheLocked()) handle = FindFit(rounded);
    if (handle == kInvalidChunk) {
      std::string why;
      bool source_failed = false;
      if (!Grow(rounded, &why, &source_failed)) return OutOfMemory(bytes, why, source_failed);
      handle = FindFit(rounded);
      TOWER_CHECK(handle != kInvalidChunk) << "new region does not fit " << rounded;
    }
    RemoveFree(handle);
    if (chunks_[handle].size - rounded >= kMinAllocationSize) Split(handle, rounded);
    in_use_.emplace(chunks_[handle].ptr, handle);
  }
  Chunk& chunk = chunks_[handle];
  chunk.in_use = true;
  chunk.requested = bytes;

  stats_.bytes_in_use += chunk.size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.num_allocs += 1;
  stats_.live_allocs += 1;
  stats_.largest_alloc_size = std::max<uint64_t>(stats_.largest_alloc_size, bytes);
  return static_cast<void*>(chunk.ptr);
}

void BfcAllocator::Deallocate(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<SpinLock> lock(mu_);
  auto it = in_use_.find(ptr);
  TOWER_CHECK(it != in_use_.end() && chunks_[it->second].in_use)
      << device_name_ << ": Deallocate(" << ptr
      << ") of memory this allocator did not hand out, or freed twice";
  const ChunkHandle handle = it->second;
  Chunk& chunk = chunks_[handle];
  stats_.bytes_in_use -= chunk.size;
  stats_.live_allocs -= 1;
  chunk.in_use = false;
  chunk.requested = 0;
  if (chunk.size <= kMaxCachedChunkBytes) {
    CacheStack& stack = cache_[CacheSlot(chunk.size)];
    if (stack.size < kCachedChunksPerSize) {
      stack.handles[stack.size++] = handle;
      return;
    }
  }
  in_use_.erase(it);
  ReleaseToBins(handle);
}

void BfcAllocator::ReleaseToBins(ChunkHandle handle) {
  // Coalesce with binned free neighbours so adjacent binned free memory is always one
  // chunk. (A cached neighbour stays apart until it is flushed; it merges then.)
  const ChunkHandle next = chunks_[handle].next;
  if (next != kInvalidChunk && chunks_[next].bin >= 0) {
    RemoveFree(next);
    handle = Merge(handle, next);
  }
  const ChunkHandle prev = chunks_[handle].prev;
  if (prev != kInvalidChunk && chunks_[prev].bin >= 0) {
    RemoveFree(prev);
    handle = Merge(prev, handle);
  }
  InsertFree(handle);
}

bool BfcAllocator::FlushCacheLocked() {
  bool any = false;
  for (CacheStack& stack : cache_) {
    while (stack.size > 0) {
      const ChunkHandle handle = stack.handles[--stack.size];
      in_use_.erase(chunks_[handle].ptr);
      ReleaseToBins(handle);
      any = true;
    }
  }
  return any;
}

void* BfcAllocator::AllocateNode(size_t bytes) {
  std::lock_guard<SpinLock> lock(mu_);
  return node_pool_.AllocateNode(bytes);
}

void BfcAllocator::DeallocateNode(void* node, size_t bytes) {
  std::lock_guard<SpinLock> lock(mu_);
  node_pool_.DeallocateNode(node, bytes);
}

size_t BfcAllocator::AllocatedSize(const void* ptr) const {
  std::lock_guard<SpinLock> lock(mu_);
  auto it = in_use_.find(ptr);
  TOWER_CHECK(it != in_use_.end() && chunks_[it->second].in_use)
      << device_name_ << ": AllocatedSize of unknown " << ptr;
  return chunks_[it->second].size;
}

bool BfcAllocator::Owns(const void* ptr) const {
  std::lock_guard<SpinLock> lock(mu_);
  auto it = in_use_.find(ptr);
  return it != in_use_.end() && chunks_[it->second].in_use;
}

uint64_t BfcAllocator::LargestFreeChunkLocked() const {
  uint64_t largest = 0;
  for (int b = kNumBins - 1; b >= 0; --b) {
    if (!bins_[b].empty()) {
      largest = chunks_[*bins_[b].rbegin()].size;
      break;
    }
  }
  // A cached chunk is free memory that has not merged yet: count it with the free chunks
  // around it, as the block it becomes once the cache is flushed (as any request that does
  // not fit otherwise flushes it).
  for (const CacheStack& stack : cache_) {
    for (int i = 0; i < stack.size; ++i) {
      ChunkHandle first = stack.handles[i];
      while (chunks_[first].prev != kInvalidChunk && !chunks_[chunks_[first].prev].in_use) {
        first = chunks_[first].prev;
      }
      uint64_t run = 0;
      for (ChunkHandle h = first; h != kInvalidChunk && !chunks_[h].in_use; h = chunks_[h].next) {
        run += chunks_[h].size;
      }
      largest = std::max(largest, run);
    }
  }
  return largest;
}

AllocatorStats BfcAllocator::StatsLocked() const {
  AllocatorStats stats = stats_;
  stats.largest_free_block = LargestFreeChunkLocked();
  stats.largest_allocatable = stats.largest_free_block;
  if (options_.allow_growth) {
    const uint64_t remaining = (options_.limit_bytes - stats_.bytes_reserved) /
                               kMinAllocationSize * kMinAllocationSize;
    stats.largest_allocatable = std::max(stats.largest_allocatable, remaining);
  }
  return stats;
}

AllocatorStats BfcAllocator::GetStats() const {
  std::lock_guard<SpinLock> lock(mu_);
  return StatsLocked();
}

void BfcAllocator::ResetPeakStats() {
  std::lock_guard<SpinLock> lock(mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
  stats_.peak_bytes_reserved = stats_.bytes_reserved;
}

Status BfcAllocator::OutOfMemory(size_t bytes, const std::string& why, bool source_failed) {
  stats_.num_ooms += 1;
  const AllocatorStats stats = StatsLocked();
  std::ostringstream message;
  message << "OOM when allocating " << BytesWithExact(bytes) << " on " << device_name_
          << ": memory limit " << BytesWithExact(stats.bytes_limit) << ", in use "
          << HumanBytes(stats.bytes_in_use) << " in " << stats.live_allocs
          << " allocations, largest free block " << HumanBytes(stats.largest_free_block)
          << " (" << why << "). ";
  if (!source_failed && bytes <= stats.bytes_limit - stats.bytes_in_use) {
    message << "Enough memory is free in total but fragmented; ";
  }
  message << "Free tensors you no longer need, use a smaller batch, or raise the device's "
             "memory limit (SetLogicalDeviceConfiguration memory_limit_mb)";
  return ResourceExhaustedError(message.str());
}

Status BfcAllocator::CheckInvariants() const {
  std::lock_guard<SpinLock> lock(mu_);
  auto breach = [this](const std::string& what) {
    return InternalError(device_name_ + " allocator invariant broken: " + what);
  };
  uint64_t in_use_bytes = 0;
  int64_t in_use_count = 0;
  int64_t cached_count = 0;
  size_t free_count = 0;
  uint64_t reserved = 0;
  for (size_t r = 0; r < regions_.size(); ++r) {
    const Region& region = regions_[r];
    reserved += region.size;
    // Find the region's first chunk: the one starting at its base.
    ChunkHandle handle = kInvalidChunk;
    for (size_t h = 0; h < chunks_.size(); ++h) {
      if (chunks_[h].region == static_cast<int>(r) && chunks_[h].ptr == region.base) {
        handle = static_cast<ChunkHandle>(h);
      }
    }
    if (handle == kInvalidChunk) return breach("region " + std::to_string(r) + " has no head");
    if (chunks_[handle].prev != kInvalidChunk) return breach("region head has a prev");
    char* cursor = region.base;
    bool previous_free = false;
    while (handle != kInvalidChunk) {
      const Chunk& chunk = chunks_[handle];
      if (chunk.ptr != cursor) return breach("gap or overlap between chunks");
      if (chunk.size == 0 || chunk.size % kMinAllocationSize != 0) {
        return breach("chunk size " + std::to_string(chunk.size));
      }
      if (chunk.region != static_cast<int>(r)) return breach("chunk in wrong region");
      if (chunk.cached()) {
        if (chunk.requested != 0) return breach("cached chunk keeps a requested size");
        if (chunk.size > kMaxCachedChunkBytes) return breach("cached chunk too large");
        const CacheStack& stack = cache_[CacheSlot(chunk.size)];
        if (std::count(stack.handles.begin(), stack.handles.begin() + stack.size, handle) != 1) {
          return breach("cached chunk missing from its cache stack");
        }
        auto it = in_use_.find(chunk.ptr);
        if (it == in_use_.end() || it->second != handle) return breach("cached chunk map mismatch");
        ++cached_count;
        previous_free = false;  // a binned neighbour of a cached chunk merges at the flush
      } else if (chunk.in_use) {
        if (chunk.bin != -1) return breach("in-use chunk sits in a bin");
        if (chunk.requested == 0 || chunk.requested > chunk.size) {
          return breach("requested size out of range");
        }
        auto it = in_use_.find(chunk.ptr);
        if (it == in_use_.end() || it->second != handle) return breach("in-use map mismatch");
        in_use_bytes += chunk.size;
        ++in_use_count;
        previous_free = false;
      } else {
        if (previous_free) return breach("two neighbouring free chunks were not merged");
        if (chunk.bin != BinFor(chunk.size)) return breach("free chunk in wrong bin");
        if (bins_[chunk.bin].count(handle) != 1) return breach("free chunk missing from bin");
        ++free_count;
        previous_free = true;
      }
      if (chunk.next != kInvalidChunk && chunks_[chunk.next].prev != handle) {
        return breach("prev/next links disagree");
      }
      cursor += chunk.size;
      handle = chunk.next;
    }
    if (cursor != region.base + region.size) return breach("chunks do not cover the region");
  }
  size_t binned = 0;
  for (const Bin& bin : bins_) binned += bin.size();
  if (binned != free_count) return breach("bins hold chunks that are not in any region");
  if (in_use_bytes != stats_.bytes_in_use) return breach("bytes_in_use counter is off");
  int64_t stacked = 0;
  for (const CacheStack& stack : cache_) stacked += stack.size;
  if (stacked != cached_count) return breach("cache stacks hold chunks that are not cached");
  if (in_use_count != stats_.live_allocs ||
      in_use_.size() != static_cast<size_t>(in_use_count + cached_count)) {
    return breach("live allocation count is off");
  }
  if (reserved != stats_.bytes_reserved) return breach("bytes_reserved counter is off");
  if (reserved > options_.limit_bytes) return breach("more reserved than the limit");
  return OkStatus();
}

}  // namespace tower
