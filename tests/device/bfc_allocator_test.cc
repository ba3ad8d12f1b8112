#include "device/bfc_allocator.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/host_memory_source.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;

// Host memory with counters, and a switch to refuse the next requests.
class CountingSource : public MemorySource {
 public:
  struct Counters {
    int allocations = 0;
    int frees = 0;
    uint64_t bytes_held = 0;
    bool refuse = false;
    std::vector<size_t> sizes;
  };
  explicit CountingSource(Counters* counters) : counters_(counters) {}
  StatusOr<void*> Allocate(size_t bytes) override {
    if (counters_->refuse) return ResourceExhaustedError("refused by test");
    counters_->allocations++;
    counters_->bytes_held += bytes;
    counters_->sizes.push_back(bytes);
    return host_.Allocate(bytes);
  }
  void Free(void* region, size_t bytes) override {
    counters_->frees++;
    counters_->bytes_held -= bytes;
    host_.Free(region, bytes);
  }
  std::string Describe() const override { return "counting host memory"; }

 private:
  Counters* counters_;
  HostMemorySource host_;
};

std::unique_ptr<BfcAllocator> Make(CountingSource::Counters* counters, uint64_t limit,
                                   bool growth = true, uint64_t initial = 1 * kMiB) {
  AllocatorOptions options;
  options.limit_bytes = limit;
  options.allow_growth = growth;
  options.initial_region_bytes = initial;
  auto allocator = BfcAllocator::Create("/job:localhost/replica:0/task:0/device:CPU:0",
                                        std::make_unique<CountingSource>(counters), options);
  EXPECT_TRUE(allocator.ok()) << allocator.status();
  return std::move(allocator).value();
}

void* Alloc(BfcAllocator& allocator, size_t bytes) {
  StatusOr<void*> ptr = allocator.Allocate(bytes);
  EXPECT_TRUE(ptr.ok()) << ptr.status();
  return ptr.ok() ? *ptr : nullptr;
}

TEST(BfcAllocatorTest, RoundsUpAndAligns) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 64 * kMiB);
  void* a = Alloc(*allocator, 1);
  void* b = Alloc(*allocator, 257);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 256, 0u);
  EXPECT_EQ(allocator->AllocatedSize(a), 256u);
  EXPECT_EQ(allocator->AllocatedSize(b), 512u);
  EXPECT_EQ(allocator->GetStats().bytes_in_use, 768u);
  EXPECT_EQ(allocator->GetStats().largest_alloc_size, 257u);
  // Memory is usable: write all of it.
  std::memset(a, 1, 1);
  std::memset(b, 2, 257);
  allocator->Deallocate(a);
  allocator->Deallocate(b);
  EXPECT_TRUE(allocator->CheckInvariants().ok());
}

TEST(BfcAllocatorTest, ZeroBytesIsNullAndFreeOfNullIsNoOp) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 1 * kMiB);
  StatusOr<void*> ptr = allocator->Allocate(0);
  ASSERT_TRUE(ptr.ok());
  EXPECT_EQ(*ptr, nullptr);
  allocator->Deallocate(nullptr);
  EXPECT_EQ(allocator->GetStats().num_allocs, 0);
}

TEST(BfcAllocatorTest, BestFitPicksSmallestFreeChunkThatFits) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 64 * kMiB, /*growth=*/false);
  // Carve free holes of 8 KiB, 2 KiB and 4 KiB separated by live guards.
  void* hole8 = Alloc(*allocator, 8 * kKiB);
  void* guard1 = Alloc(*allocator, 256);
  void* hole2 = Alloc(*allocator, 2 * kKiB);
  void* guard2 = Alloc(*allocator, 256);
  void* hole4 = Alloc(*allocator, 4 * kKiB);
  void* guard3 = Alloc(*allocator, 256);
  allocator->Deallocate(hole8);
  allocator->Deallocate(hole2);
  allocator->Deallocate(hole4);
  ASSERT_TRUE(allocator->CheckInvariants().ok());
  // 3 KiB fits the 4 KiB and 8 KiB holes (and the tail); best fit is the 4 KiB hole.
  EXPECT_EQ(Alloc(*allocator, 3 * kKiB), hole4);
  // 2 KiB fits its own hole exactly.
  EXPECT_EQ(Alloc(*allocator, 2 * kKiB), hole2);
  // 5 KiB: only the 8 KiB hole (and the big tail); best fit is the hole, which is split.
  void* five = Alloc(*allocator, 5 * kKiB);
  EXPECT_EQ(five, hole8);
  EXPECT_EQ(allocator->AllocatedSize(five), 5 * kKiB);
  // The 3 KiB rest of the 8 KiB hole is the best fit for 3 KiB now.
  EXPECT_EQ(Alloc(*allocator, 3 * kKiB), static_cast<char*>(hole8) + 5 * kKiB);
  EXPECT_TRUE(allocator->CheckInvariants().ok());
  (void)guard1;
  (void)guard2;
  (void)guard3;
}

TEST(BfcAllocatorTest, FreeCoalescesWithBothNeighbours) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 1 * kMiB, /*growth=*/false);
  void* a = Alloc(*allocator, 100 * kKiB);
  void* b = Alloc(*allocator, 100 * kKiB);
  void* c = Alloc(*allocator, 100 * kKiB);
  void* d = Alloc(*allocator, 100 * kKiB);
  allocator->Deallocate(a);
  allocator->Deallocate(c);
  ASSERT_TRUE(allocator->CheckInvariants().ok());
  // Freeing b merges a, b and c into one 300 KiB chunk at a's address.
  allocator->Deallocate(b);
  ASSERT_TRUE(allocator->CheckInvariants().ok());
  EXPECT_EQ(Alloc(*allocator, 300 * kKiB), a);
  allocator->Deallocate(a);
  allocator->Deallocate(d);
  // Everything free again: one chunk spanning the whole region.
  AllocatorStats stats = allocator->GetStats();
  EXPECT_EQ(stats.largest_free_block, 1 * kMiB);
  EXPECT_EQ(stats.bytes_in_use, 0u);
  EXPECT_EQ(Alloc(*allocator, 1 * kMiB), a);
  EXPECT_TRUE(allocator->CheckInvariants().ok());
}

TEST(BfcAllocatorTest, NoGrowthReservesLimitUpFrontAndNeverAgain) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 4 * kMiB, /*growth=*/false);
  EXPECT_EQ(counters.allocations, 1);
  EXPECT_EQ(counters.bytes_held, 4 * kMiB);
  EXPECT_EQ(allocator->GetStats().bytes_reserved, 4 * kMiB);
  void* a = Alloc(*allocator, 3 * kMiB);
  StatusOr<void*> b = allocator->Allocate(2 * kMiB);
  EXPECT_TRUE(IsResourceExhausted(b.status()));
  EXPECT_THAT(b.status().message(), HasSubstr("memory growth is off"));
  EXPECT_EQ(counters.allocations, 1);
  allocator->Deallocate(a);
}

TEST(BfcAllocatorTest, NoGrowthFailsAtCreationWhenSourceCannotProvide) {
  CountingSource::Counters counters;
  counters.refuse = true;
  AllocatorOptions options;
  options.limit_bytes = 8 * kMiB;
  options.allow_growth = false;
  auto allocator = BfcAllocator::Create("/job:localhost/replica:0/task:0/device:GPU:0",
                                        std::make_unique<CountingSource>(&counters), options);
  ASSERT_FALSE(allocator.ok());
  EXPECT_TRUE(IsResourceExhausted(allocator.status()));
  EXPECT_THAT(allocator.status().message(), HasSubstr("could not reserve 8.00 MiB"));
  EXPECT_THAT(allocator.status().message(), HasSubstr("device:GPU:0"));
  EXPECT_THAT(allocator.status().message(), HasSubstr("refused by test"));
}

TEST(BfcAllocatorTest, GrowthTakesDoublingRegionsOnDemandUpToTheLimit) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 7 * kMiB, /*growth=*/true, /*initial=*/1 * kMiB);
  EXPECT_EQ(counters.allocations, 0);  // nothing taken before the first request
  std::vector<void*> live;
  live.push_back(Alloc(*allocator, 1 * kMiB));  // region 1 MiB
  live.push_back(Alloc(*allocator, 1 * kMiB));  // region 2 MiB
  live.push_back(Alloc(*allocator, 1 * kMiB));  //   (fits in the 2 MiB region)
  live.push_back(Alloc(*allocator, 1 * kMiB));  // region: 4 MiB = what the limit leaves
  EXPECT_EQ(counters.sizes, (std::vector<size_t>{1 * kMiB, 2 * kMiB, 4 * kMiB}));
  EXPECT_EQ(allocator->GetStats().bytes_reserved, 7 * kMiB);
  EXPECT_EQ(allocator->GetStats().num_regions, 3);
  // 3 MiB more fits in the last region; then the limit is reached.
  live.push_back(Alloc(*allocator, 3 * kMiB));
  StatusOr<void*> over = allocator->Allocate(1);
  EXPECT_TRUE(IsResourceExhausted(over.status()));
  for (void* p : live) allocator->Deallocate(p);
  // Regions are kept (memory is never given back while the allocator lives)...
  EXPECT_EQ(counters.frees, 0);
  EXPECT_TRUE(allocator->CheckInvariants().ok());
  allocator.reset();
  // ...and all returned when it is destroyed.
  EXPECT_EQ(counters.frees, 3);
  EXPECT_EQ(counters.bytes_held, 0u);
}

TEST(BfcAllocatorTest, GrowthAsksForLessWhenTheSourceRefusesABigRegion) {
  // A source that refuses regions over 1 MiB, as a nearly full card would.
  class Stingy : public MemorySource {
   public:
    StatusOr<void*> Allocate(size_t bytes) override {
      if (bytes > kMiB) return ResourceExhaustedError("out of memory");
      return host_.Allocate(bytes);
    }
    void Free(void* r, size_t b) override { host_.Free(r, b); }
    std::string Describe() const override { return "stingy"; }
    HostMemorySource host_;
  };
  AllocatorOptions options;
  options.limit_bytes = 64 * kMiB;
  options.initial_region_bytes = 32 * kMiB;
  auto stingy = BfcAllocator::Create("dev", std::make_unique<Stingy>(), options);
  ASSERT_TRUE(stingy.ok());
  void* p = Alloc(**stingy, 512 * kKiB);
  EXPECT_NE(p, nullptr);
  EXPECT_EQ((*stingy)->GetStats().bytes_reserved, 512 * kKiB);
  StatusOr<void*> big = (*stingy)->Allocate(2 * kMiB);
  ASSERT_TRUE(IsResourceExhausted(big.status()));
  EXPECT_THAT(big.status().message(), HasSubstr("stingy failed: out of memory"));
  // The source's refusal is not fragmentation, and the message must not say it is.
  EXPECT_THAT(big.status().message(), ::testing::Not(HasSubstr("fragmented")));
  (*stingy)->Deallocate(p);
}

TEST(BfcAllocatorTest, OverLimitErrorNamesDeviceRequestLimitUseAndLargestFreeBlock) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 1 * kMiB, /*growth=*/false);
  void* a = Alloc(*allocator, 600 * kKiB);
  StatusOr<void*> b = allocator->Allocate(500 * kKiB);
  ASSERT_FALSE(b.ok());
  const std::string& message = b.status().message();
  EXPECT_TRUE(IsResourceExhausted(b.status()));
  EXPECT_THAT(message, HasSubstr("OOM when allocating 500 KiB (512000 bytes)"));
  EXPECT_THAT(message, HasSubstr("/job:localhost/replica:0/task:0/device:CPU:0"));
  EXPECT_THAT(message, HasSubstr("memory limit 1.00 MiB (1048576 bytes)"));
  EXPECT_THAT(message, HasSubstr("in use 600 KiB in 1 allocations"));
  EXPECT_THAT(message, HasSubstr("largest free block 424 KiB"));
  EXPECT_THAT(message, HasSubstr("smaller batch"));
  EXPECT_EQ(allocator->GetStats().num_ooms, 1);
  // Still usable: the failed request changed nothing.
  EXPECT_TRUE(allocator->CheckInvariants().ok());
  void* c = Alloc(*allocator, 400 * kKiB);
  allocator->Deallocate(a);
  allocator->Deallocate(c);
  EXPECT_NE(Alloc(*allocator, 1 * kMiB), nullptr);
}

TEST(BfcAllocatorTest, RequestLargerThanLimitIsRefusedWithoutTouchingTheSource) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 1 * kMiB);
  StatusOr<void*> huge = allocator->Allocate(size_t{1} << 62);
  EXPECT_TRUE(IsResourceExhausted(huge.status()));
  EXPECT_THAT(huge.status().message(), HasSubstr("larger than the whole limit"));
  EXPECT_EQ(counters.allocations, 0);
  StatusOr<void*> max = allocator->Allocate(SIZE_MAX);  // no overflow in rounding
  EXPECT_TRUE(IsResourceExhausted(max.status()));
}

TEST(BfcAllocatorTest, FragmentationIsReportedAndHealsWhenFreed) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 1 * kMiB, /*growth=*/false);
  // Fill with 64 KiB blocks, free every other one: half the memory is free, in 64 KiB holes.
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(Alloc(*allocator, 64 * kKiB));
  for (int i = 0; i < 16; i += 2) allocator->Deallocate(blocks[i]);
  AllocatorStats stats = allocator->GetStats();
  EXPECT_EQ(stats.bytes_in_use, 512 * kKiB);
  EXPECT_EQ(stats.largest_free_block, 64 * kKiB);
  StatusOr<void*> big = allocator->Allocate(128 * kKiB);
  ASSERT_TRUE(IsResourceExhausted(big.status()));
  EXPECT_THAT(big.status().message(), HasSubstr("fragmented"));
  // Free the rest: everything coalesces back into one block.
  for (int i = 1; i < 16; i += 2) allocator->Deallocate(blocks[i]);
  EXPECT_EQ(allocator->GetStats().largest_free_block, 1 * kMiB);
  EXPECT_NE(Alloc(*allocator, 1 * kMiB), nullptr);
  EXPECT_TRUE(allocator->CheckInvariants().ok());
}

TEST(BfcAllocatorTest, StatsTrackPeakAndResetPeak) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 16 * kMiB);
  void* a = Alloc(*allocator, 1 * kMiB);
  void* b = Alloc(*allocator, 2 * kMiB);
  allocator->Deallocate(b);
  AllocatorStats stats = allocator->GetStats();
  EXPECT_EQ(stats.bytes_in_use, 1 * kMiB);
  EXPECT_EQ(stats.peak_bytes_in_use, 3 * kMiB);
  EXPECT_EQ(stats.num_allocs, 2);
  EXPECT_EQ(stats.live_allocs, 1);
  EXPECT_EQ(stats.bytes_limit, 16 * kMiB);
  allocator->ResetPeakStats();
  EXPECT_EQ(allocator->GetStats().peak_bytes_in_use, 1 * kMiB);
  void* c = Alloc(*allocator, 512 * kKiB);
  EXPECT_EQ(allocator->GetStats().peak_bytes_in_use, 1 * kMiB + 512 * kKiB);
  allocator->Deallocate(a);
  allocator->Deallocate(c);
}

TEST(BfcAllocatorTest, RandomizedStressKeepsInvariantsAndData) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 32 * kMiB, /*growth=*/true, /*initial=*/256 * kKiB);
  std::mt19937 rng(1234);
  std::map<void*, std::pair<size_t, unsigned char>> live;  // ptr -> (size, fill byte)
  int ooms = 0;
  for (int step = 0; step < 20000; ++step) {
    const bool allocate = live.empty() || rng() % 100 < 55;
    if (allocate) {
      // Mostly small, sometimes large: a log-uniform size from 1 B to 2 MiB.
      const size_t bytes = 1 + (rng() % ((size_t{1} << (rng() % 22)) + 1));
      StatusOr<void*> ptr = allocator->Allocate(bytes);
      if (!ptr.ok()) {
        ASSERT_TRUE(IsResourceExhausted(ptr.status())) << ptr.status();
        ++ooms;
        continue;
      }
      const unsigned char fill = static_cast<unsigned char>(rng());
      std::memset(*ptr, fill, bytes);
      ASSERT_TRUE(live.emplace(*ptr, std::make_pair(bytes, fill)).second) << "address reused";
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      // Nobody else wrote into this block.
      const auto* bytes = static_cast<const unsigned char*>(it->first);
      ASSERT_EQ(bytes[0], it->second.second);
      ASSERT_EQ(bytes[it->second.first - 1], it->second.second);
      allocator->Deallocate(it->first);
      live.erase(it);
    }
    if (step % 1000 == 0) {
      ASSERT_TRUE(allocator->CheckInvariants().ok());
    }
  }
  ASSERT_TRUE(allocator->CheckInvariants().ok());
  uint64_t expected_in_use = 0;
  for (const auto& [ptr, info] : live) expected_in_use += allocator->AllocatedSize(ptr);
  EXPECT_EQ(allocator->GetStats().bytes_in_use, expected_in_use);
  // Live blocks never overlap.
  const char* end = nullptr;
  for (const auto& [ptr, info] : live) {
    EXPECT_GE(static_cast<const char*>(ptr), end);
    end = static_cast<const char*>(ptr) + info.first;
  }
  for (const auto& [ptr, info] : live) allocator->Deallocate(ptr);
  EXPECT_EQ(allocator->GetStats().bytes_in_use, 0u);
  EXPECT_LE(allocator->GetStats().bytes_reserved, 32 * kMiB);
  ASSERT_TRUE(allocator->CheckInvariants().ok());
}

TEST(BfcAllocatorTest, ConcurrentAllocateAndFreeFromManyThreads) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 64 * kMiB, /*growth=*/true, /*initial=*/1 * kMiB);
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<unsigned char*, size_t>> mine;
      for (int i = 0; i < 3000; ++i) {
        if (mine.empty() || rng() % 2 == 0) {
          const size_t bytes = 1 + rng() % (64 * kKiB);
          StatusOr<void*> ptr = allocator->Allocate(bytes);
          if (!ptr.ok()) {
            ++failures[t];
            continue;
          }
          auto* p = static_cast<unsigned char*>(*ptr);
          std::memset(p, t, bytes);
          mine.emplace_back(p, bytes);
        } else {
          auto [p, bytes] = mine.back();
          mine.pop_back();
          if (p[0] != t || p[bytes - 1] != t) ++failures[t];  // someone else wrote here
          allocator->Deallocate(p);
        }
      }
      for (auto [p, bytes] : mine) allocator->Deallocate(p);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(allocator->GetStats().bytes_in_use, 0u);
  EXPECT_EQ(allocator->GetStats().live_allocs, 0);
  EXPECT_TRUE(allocator->CheckInvariants().ok());
}

TEST(BfcAllocatorTest, InvalidLimitIsRejected) {
  CountingSource::Counters counters;
  AllocatorOptions options;
  options.limit_bytes = 0;
  auto allocator = BfcAllocator::Create("dev", std::make_unique<CountingSource>(&counters),
                                        options);
  EXPECT_TRUE(IsInvalidArgument(allocator.status()));
}

TEST(BfcAllocatorDeathTest, FreeingUnknownPointerAborts) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 1 * kMiB);
  int on_stack = 0;
  EXPECT_DEATH(allocator->Deallocate(&on_stack), "did not hand out, or freed twice");
}

TEST(BfcAllocatorDeathTest, DoubleFreeAborts) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 1 * kMiB);
  void* small = Alloc(*allocator, 100);  // held in the free cache once freed
  void* large = Alloc(*allocator, 100 * kKiB);  // merged into the bins once freed
  allocator->Deallocate(small);
  allocator->Deallocate(large);
  EXPECT_DEATH(allocator->Deallocate(small), "freed twice");
  EXPECT_DEATH(allocator->Deallocate(large), "freed twice");
  EXPECT_DEATH(allocator->AllocatedSize(small), "AllocatedSize of unknown");
}

// Allocates `count` chunks of 256 bytes, then frees them all (into the free cache, up to
// its bound); returns where they were.
std::vector<void*> AllocateAndFreeSmallChunks(BfcAllocator& allocator, int count) {
  std::vector<void*> chunks;
  for (int i = 0; i < count; ++i) chunks.push_back(Alloc(allocator, 256));
  for (void* p : chunks) allocator.Deallocate(p);
  return chunks;
}

// The free cache: small chunks go back to the next request of their size, unmerged.
TEST(BfcAllocatorTest, SmallFreeIsServedBackToTheNextRequestOfItsSizeUnmerged) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 1 * kMiB, /*growth=*/false);
  void* a = Alloc(*allocator, 256);
  void* b = Alloc(*allocator, 256);
  void* guard = Alloc(*allocator, 256);
  allocator->Deallocate(a);
  allocator->Deallocate(b);
  // Merged into the bins, a and b would be one 512-byte chunk at a, and best fit would hand
  // out a. Cached, they stay apart and the last one freed comes back first.
  EXPECT_FALSE(allocator->Owns(a));
  EXPECT_FALSE(allocator->Owns(b));
  EXPECT_EQ(allocator->GetStats().bytes_in_use, 256u);
  EXPECT_EQ(allocator->GetStats().live_allocs, 1);
  ASSERT_TRUE(allocator->CheckInvariants().ok()) << allocator->CheckInvariants();
  EXPECT_EQ(Alloc(*allocator, 200), b);
  EXPECT_EQ(Alloc(*allocator, 1), a);
  EXPECT_TRUE(allocator->Owns(a));
  EXPECT_EQ(allocator->AllocatedSize(a), 256u);
  AllocatorStats stats = allocator->GetStats();
  EXPECT_EQ(stats.bytes_in_use, 768u);
  EXPECT_EQ(stats.live_allocs, 3);
  EXPECT_EQ(stats.num_allocs, 5);
  // Another size is not served from the 256-byte chunks.
  allocator->Deallocate(a);
  void* c = Alloc(*allocator, 512);
  EXPECT_NE(c, a);
  EXPECT_TRUE(allocator->CheckInvariants().ok()) << allocator->CheckInvariants();
  (void)guard;
}

TEST(BfcAllocatorTest, CachedChunksMergeBeforeARequestWouldFail) {
  // 4 KiB, no growth: sixteen 256-byte chunks fill it. Freed, they sit in the cache; a 4 KiB
  // request fits only once they merge back into one chunk.
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 4 * kKiB, /*growth=*/false);
  const std::vector<void*> chunks = AllocateAndFreeSmallChunks(*allocator, 16);
  AllocatorStats stats = allocator->GetStats();
  EXPECT_EQ(stats.bytes_in_use, 0u);
  // The free block the cached chunks make together, not one chunk's 256 bytes.
  EXPECT_EQ(stats.largest_free_block, 4 * kKiB);
  EXPECT_EQ(stats.largest_allocatable, 4 * kKiB);
  void* whole = Alloc(*allocator, 4 * kKiB);
  EXPECT_EQ(whole, chunks[0]);
  EXPECT_EQ(allocator->GetStats().num_ooms, 0);
  EXPECT_TRUE(allocator->CheckInvariants().ok()) << allocator->CheckInvariants();
  allocator->Deallocate(whole);
}

TEST(BfcAllocatorTest, CachedChunksMergeBeforeTheAllocatorGrows) {
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 1 * kMiB, /*growth=*/true, /*initial=*/4 * kKiB);
  AllocateAndFreeSmallChunks(*allocator, 16);
  void* two = Alloc(*allocator, 2 * kKiB);
  EXPECT_EQ(counters.allocations, 1) << "grew although the cache held 4 KiB";
  EXPECT_EQ(allocator->GetStats().num_regions, 1);
  EXPECT_TRUE(allocator->CheckInvariants().ok()) << allocator->CheckInvariants();
  allocator->Deallocate(two);
}

TEST(BfcAllocatorTest, CacheHoldsABoundedNumberOfChunksPerSize) {
  // More small frees than the cache holds: the rest merge into the bins at once. A steady
  // state of more live 256-byte chunks than that still reuses its memory (no growth).
  CountingSource::Counters counters;
  auto allocator = Make(&counters, 1 * kMiB, /*growth=*/true, /*initial=*/64 * kKiB);
  constexpr int kChunks = 3 * BfcAllocator::kCachedChunksPerSize;
  for (int round = 0; round < 3; ++round) {
    AllocateAndFreeSmallChunks(*allocator, kChunks);
    ASSERT_TRUE(allocator->CheckInvariants().ok()) << allocator->CheckInvariants();
  }
  EXPECT_EQ(counters.allocations, 1);
  EXPECT_EQ(allocator->GetStats().bytes_in_use, 0u);
  EXPECT_EQ(allocator->GetStats().largest_free_block, 64 * kKiB);
}

}  // namespace
}  // namespace tower
