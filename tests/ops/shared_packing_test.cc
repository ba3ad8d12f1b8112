// MatMulByWeight on the CPU (ops/cpu/shared_packing.h): the bits of MatMul for every shape and
// both layouts of the weight, one packing reused for a version (by products of other row
// counts too), a new one for a new version, one packing for threads multiplying at once,
// products held mid-way (an entry in use is not repacked for another version; a product waits
// for the block another thread is packing), and Eigen's own path for the weights past a full
// cache, where keeping the packing does not pay, and where a product is split over intra-op
// threads.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "device/context.h"
#include "device/intra_op.h"
#include "ops/cpu/shared_packing.h"
#include "ops/math_ops.h"
#include "tests/testing/random_values.h"

namespace tower {
namespace {

using Values = std::vector<float>;

Device* Cpu() { return *Context::Global().FindDevice("/device:CPU:0"); }

Values RandomValues(int64_t n, uint32_t seed) { return testing::UniformValues(n, seed); }

Tensor Make(const Shape& shape, const Values& values) {
  return std::move(Tensor::FromHost(Cpu(), shape, values)).value();
}

Values Host(const StatusOr<Tensor>& t) {
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return {};
  return std::move(t->ToHost()).value();
}

struct Case {
  int64_t rows, depth, units;  // x [rows, depth], the weight [depth, units]
};

// The shapes of replicas' products (64 and 32 rows of a 1024-wide layer, a 256-wide input
// layer), several of Eigen's depth and row blocks, odd sizes, and the smallest weight that is
// packed.
const Case kCases[] = {{64, 1024, 1024}, {32, 1024, 1024}, {64, 256, 1024}, {128, 1024, 256},
                       {5, 1500, 700},   {37, 333, 517},   {2, 256, 256},   {300, 64, 1024}};

// Exactly MatMul's bits (EXPECT_EQ on the vectors: a NaN anywhere fails it).
TEST(SharedPackingTest, GivesMatMulsBitsForEveryShapeAndLayout) {
  ScopedIntraOpThreads whole(1);  // as on a thread of several replicas: products unsplit
  uint64_t version = 1000;
  for (const Case& c : kCases) {
    for (bool transpose : {false, true}) {
      const Values x = RandomValues(c.rows * c.depth, 1);
      const Values w = RandomValues(c.depth * c.units, 2);
      const Tensor xt = Make(Shape{c.rows, c.depth}, x);
      const Tensor wt =
          Make(transpose ? Shape{c.units, c.depth} : Shape{c.depth, c.units}, w);
      const Values want = Host(ops::MatMul(xt, wt, false, transpose));
      const cpu::SharedPackingCounts before = cpu::SharedPackingCountsSoFar();
      ++version;
      EXPECT_EQ(Host(ops::MatMulByWeight(xt, wt, transpose, version)), want)
          << c.rows << "x" << c.depth << "x" << c.units << " transposed " << transpose;
      // Again with the same version: the packing is reused, the bits are the same.
      EXPECT_EQ(Host(ops::MatMulByWeight(xt, wt, transpose, version)), want);
      const cpu::SharedPackingCounts after = cpu::SharedPackingCountsSoFar();
      EXPECT_EQ(after.packed - before.packed, 1) << c.rows << "x" << c.depth << "x" << c.units;
      EXPECT_EQ(after.reused - before.reused, 1) << c.rows << "x" << c.depth << "x" << c.units;
    }
  }
}

// The version is the caller's promise that the weight has not changed: under one version the
// packing made first is used (so a changed weight needs a new version), and a new version
// packs the weight's new values.
TEST(SharedPackingTest, AVersionKeepsItsPackingAndANewOnePacksAgain) {
  ScopedIntraOpThreads whole(1);
  const int64_t rows = 16, depth = 512, units = 256;
  const Tensor x = Make(Shape{rows, depth}, RandomValues(rows * depth, 3));
  const Values before_values = RandomValues(depth * units, 4);
  const Values after_values = RandomValues(depth * units, 5);
  const Tensor w = Make(Shape{depth, units}, before_values);
  const Values before = Host(ops::MatMul(x, w));
  ASSERT_EQ(Host(ops::MatMulByWeight(x, w, false, 7)), before);
  std::copy(after_values.begin(), after_values.end(), w.data<float>());  // the same buffer
  const Values after = Host(ops::MatMul(x, w));
  ASSERT_NE(after, before);
  EXPECT_EQ(Host(ops::MatMulByWeight(x, w, false, 7)), before);
  EXPECT_EQ(Host(ops::MatMulByWeight(x, w, false, 8)), after);
  EXPECT_EQ(Host(ops::MatMulByWeight(x, w, false, 8)), after);
  // Version 0 is a plain MatMul.
  const cpu::SharedPackingCounts counts = cpu::SharedPackingCountsSoFar();
  EXPECT_EQ(Host(ops::MatMulByWeight(x, w, false, 0)), after);
  EXPECT_EQ(cpu::SharedPackingCountsSoFar().packed, counts.packed);
  EXPECT_EQ(cpu::SharedPackingCountsSoFar().reused, counts.reused);
}

// A packed weight depends on Eigen's blocking, not on the rows it multiplies: uneven shards
// (a batch of 250 over 4 replicas: 63, 63, 62 and 62 rows) share one packing.
// Keyed by the row count, a thread with 3 weights and 2 row counts needed 6 entries of 4
// and repacked every product (measured: 5 % slower than no sharing at all).
TEST(SharedPackingTest, UnevenShardsOfOneBlockingShareAPacking) {
  ScopedIntraOpThreads whole(1);
  uint64_t version = 5000;
  for (const Case& c : {Case{63, 256, 1024}, Case{63, 1024, 1024}}) {
    for (bool transpose : {false, true}) {
      const Values w = RandomValues(c.depth * c.units, 6);
      const Tensor wt =
          Make(transpose ? Shape{c.units, c.depth} : Shape{c.depth, c.units}, w);
      ++version;
      const cpu::SharedPackingCounts before = cpu::SharedPackingCountsSoFar();
      for (int64_t rows : {c.rows, c.rows - 1, c.rows, c.rows - 1}) {
        const Tensor x = Make(Shape{rows, c.depth}, RandomValues(rows * c.depth, 7));
        EXPECT_EQ(Host(ops::MatMulByWeight(x, wt, transpose, version)),
                  Host(ops::MatMul(x, wt, false, transpose)))
            << rows << "x" << c.depth << "x" << c.units << " transposed " << transpose;
      }
      const cpu::SharedPackingCounts after = cpu::SharedPackingCountsSoFar();
      EXPECT_EQ(after.packed - before.packed, 1) << c.depth << "x" << c.units << " " << transpose;
      EXPECT_EQ(after.reused - before.reused, 3) << c.depth << "x" << c.units << " " << transpose;
    }
  }
}

// More weights in a version than the cache keeps: the first kMaxPackedWeights are packed and
// reused, the others take Eigen's path. Replacing an entry of this version instead would evict
// every packing before its reuse when the products come round in the same order again (each
// replica's step), so nothing would be reused at all.
TEST(SharedPackingTest, WeightsPastAFullCacheOfThisVersionTakeEigensPath) {
  ScopedIntraOpThreads whole(1);
  const int64_t rows = 16, depth = 256, units = 512;
  const Tensor x = Make(Shape{rows, depth}, RandomValues(rows * depth, 8));
  std::vector<Tensor> weights;
  std::vector<Values> want;
  for (int i = 0; i < cpu::kMaxPackedWeights + 2; ++i) {
    weights.push_back(Make(Shape{depth, units}, RandomValues(depth * units, 20 + i)));
    want.push_back(Host(ops::MatMul(x, weights.back())));
  }
  for (uint64_t version : {9001, 9002}) {
    const cpu::SharedPackingCounts before = cpu::SharedPackingCountsSoFar();
    for (int round = 0; round < 3; ++round) {  // three replicas, in the same order
      for (size_t i = 0; i < weights.size(); ++i) {
        EXPECT_EQ(Host(ops::MatMulByWeight(x, weights[i], false, version)), want[i])
            << "weight " << i << " round " << round;
      }
    }
    const cpu::SharedPackingCounts after = cpu::SharedPackingCountsSoFar();
    // A new version finds every entry free again: the same counts.
    EXPECT_EQ(after.packed - before.packed, cpu::kMaxPackedWeights) << version;
    EXPECT_EQ(after.reused - before.reused, 2 * cpu::kMaxPackedWeights) << version;
  }
}

// Threads that multiply by one weight under one version at the same time (the replicas of a
// step, each on its own core) pack it once between them: each claims the blocks nobody packs
// yet and reads the others' once they are ready. Every product has MatMul's bits, and each
// version counts one packing and a reuse per further product, however the threads interleave.
TEST(SharedPackingTest, ThreadsOfOneVersionPackAWeightTogether) {
  constexpr int kThreads = 3;
  constexpr int kVersions = 24;
  const int64_t rows = 48, depth = 1024, units = 768;  // several depth and row blocks
  std::vector<Tensor> xs;
  for (int t = 0; t < kThreads; ++t) {
    xs.push_back(Make(Shape{rows, depth}, RandomValues(rows * depth, 40 + t)));
  }
  const Tensor w = Make(Shape{depth, units}, RandomValues(depth * units, 50));
  const Tensor wt = Make(Shape{units, depth}, RandomValues(units * depth, 51));
  std::vector<Values> want, want_transposed;
  for (const Tensor& x : xs) {
    want.push_back(Host(ops::MatMul(x, w)));
    want_transposed.push_back(Host(ops::MatMul(x, wt, false, true)));
  }
  const cpu::SharedPackingCounts before = cpu::SharedPackingCountsSoFar();
  std::atomic<int> arrived{0};
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ScopedIntraOpThreads whole(1);
      for (int v = 0; v < kVersions; ++v) {
        // All threads start each version's products together, so that they pack together.
        arrived.fetch_add(1);
        while (arrived.load() < kThreads * (v + 1)) std::this_thread::yield();
        const uint64_t version = 70000 + static_cast<uint64_t>(v);
        StatusOr<Tensor> product = ops::MatMulByWeight(xs[t], w, false, version);
        StatusOr<Tensor> transposed = ops::MatMulByWeight(xs[t], wt, true, version);
        if (!product.ok() || !transposed.ok() || *product->ToHost() != want[t] ||
            *transposed->ToHost() != want_transposed[t]) {
          ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(kThreads, 0)) << "products without MatMul's bits";
  const cpu::SharedPackingCounts after = cpu::SharedPackingCountsSoFar();
  EXPECT_EQ(after.packed - before.packed, 2 * kVersions);
  EXPECT_EQ(after.reused - before.reused, 2 * kVersions * (kThreads - 1));
}

// A product held at a point of its own (cpu::SetSharedPackingTestHooks): the thread named in
// `held_thread` stops there until `release`, saying so in `held`.
std::atomic<std::thread::id> held_thread;
std::atomic<bool> held{false};
std::atomic<bool> release{false};

void HoldTheHeldThread() {
  if (std::this_thread::get_id() != held_thread.load()) return;
  held = true;
  while (!release.load()) std::this_thread::yield();
}

std::mutex packers_mutex;
std::vector<std::pair<std::thread::id, int64_t>> packers;  // who packed which block

void HoldBeforeBlockZero(int64_t block) {
  {
    std::lock_guard<std::mutex> lock(packers_mutex);
    packers.emplace_back(std::this_thread::get_id(), block);
  }
  if (block == 0) HoldTheHeldThread();
}

// Sets the hooks for one test, and clears them whatever happens.
class ScopedHooks {
 public:
  explicit ScopedHooks(const cpu::SharedPackingTestHooks& hooks) {
    held_thread = std::thread::id();  // no thread's
    held = false;
    release = false;
    packers.clear();
    cpu::SetSharedPackingTestHooks(hooks);
  }
  ~ScopedHooks() {
    release = true;
    cpu::SetSharedPackingTestHooks({});
  }
};

// Whether the held thread reached its hook within 30 s (a product that never reaches it, one
// taking Eigen's path say, fails the test instead of hanging it).
bool AwaitHeld() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!held.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  return held.load();
}

// A product keeps its entry from claim to release. Meanwhile a product of another version of
// that weight takes Eigen's path (nothing is repacked under the first), and one of the same
// version packs the blocks the first has not started on and reuses the entry.
TEST(SharedPackingTest, AnEntryInUseIsNotRepackedForAnotherVersion) {
  ScopedIntraOpThreads whole(1);
  const int64_t rows = 64, depth = 1024, units = 1024;
  const Tensor x = Make(Shape{rows, depth}, RandomValues(rows * depth, 60));
  const Tensor w = Make(Shape{depth, units}, RandomValues(depth * units, 61));
  const Values want = Host(ops::MatMul(x, w));
  const uint64_t version = 80001, next_version = 80002;
  cpu::SharedPackingTestHooks hooks;
  hooks.after_claim = HoldTheHeldThread;
  ScopedHooks scoped(hooks);
  const cpu::SharedPackingCounts before = cpu::SharedPackingCountsSoFar();
  Values first;
  std::thread first_product([&] {
    ScopedIntraOpThreads one(1);
    held_thread = std::this_thread::get_id();
    first = Host(ops::MatMulByWeight(x, w, false, version));
  });
  if (!AwaitHeld()) {
    first_product.join();
    FAIL() << "the first product never reached its claim hook";
  }
  EXPECT_EQ(Host(ops::MatMulByWeight(x, w, false, next_version)), want);
  cpu::SharedPackingCounts now = cpu::SharedPackingCountsSoFar();
  EXPECT_EQ(now.packed - before.packed, 1) << "another version repacked an entry in use";
  EXPECT_EQ(now.reused - before.reused, 0);
  EXPECT_EQ(Host(ops::MatMulByWeight(x, w, false, version)), want);
  now = cpu::SharedPackingCountsSoFar();
  EXPECT_EQ(now.packed - before.packed, 1);
  EXPECT_EQ(now.reused - before.reused, 1);
  release = true;
  first_product.join();
  EXPECT_EQ(first, want);
  // Once nobody uses it, the next version takes the entry over.
  EXPECT_EQ(Host(ops::MatMulByWeight(x, w, false, next_version)), want);
  EXPECT_EQ(cpu::SharedPackingCountsSoFar().packed - before.packed, 2);
}

// A product whose block another thread is packing packs the blocks after it meanwhile, then
// waits for that one: it neither reads it half-packed nor packs it twice.
TEST(SharedPackingTest, AProductWaitsForTheBlockAnotherThreadIsPacking) {
  ScopedIntraOpThreads whole(1);
  const int64_t rows = 64, depth = 1024, units = 1024;  // 2 depth blocks on AVX-512
  const Tensor x = Make(Shape{rows, depth}, RandomValues(rows * depth, 62));
  const Tensor w = Make(Shape{depth, units}, RandomValues(depth * units, 63));
  const Values want = Host(ops::MatMul(x, w));
  const uint64_t version = 80101;
  cpu::SharedPackingTestHooks hooks;
  hooks.before_packing_block = HoldBeforeBlockZero;
  ScopedHooks scoped(hooks);
  // How many blocks the weight packs in: a product nobody holds packs them all.
  EXPECT_EQ(Host(ops::MatMulByWeight(x, w, false, version - 1)), want);
  const size_t blocks = [] {
    std::lock_guard<std::mutex> lock(packers_mutex);
    const size_t count = packers.size();
    packers.clear();
    return count;
  }();
  ASSERT_GE(blocks, 2u);
  const cpu::SharedPackingCounts before = cpu::SharedPackingCountsSoFar();
  Values first, second;
  std::thread first_product([&] {
    ScopedIntraOpThreads one(1);
    held_thread = std::this_thread::get_id();
    first = Host(ops::MatMulByWeight(x, w, false, version));
  });
  if (!AwaitHeld()) {  // the first product holds block 0, claimed and not packed
    first_product.join();
    FAIL() << "the first product never reached block 0";
  }
  std::atomic<bool> second_done{false};
  std::thread::id second_id;
  std::thread second_product([&] {
    ScopedIntraOpThreads one(1);
    second_id = std::this_thread::get_id();
    second = Host(ops::MatMulByWeight(x, w, false, version));
    second_done = true;
  });
  // Once the second product has claimed every other block, only block 0 keeps it; give it
  // time to go on without it, as it must not.
  const auto packers_seen = [] {
    std::lock_guard<std::mutex> lock(packers_mutex);
    return packers.size();
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (packers_seen() < blocks && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(second_done.load()) << "a product went on without the block another packs";
  release = true;
  first_product.join();
  second_product.join();
  EXPECT_EQ(first, want);
  EXPECT_EQ(second, want);
  const cpu::SharedPackingCounts after = cpu::SharedPackingCountsSoFar();
  EXPECT_EQ(after.packed - before.packed, 1);
  EXPECT_EQ(after.reused - before.reused, 1);
  // Each block packed once: block 0 by the first product, every later one by the second,
  // which packed them while the first held block 0.
  std::lock_guard<std::mutex> lock(packers_mutex);
  ASSERT_EQ(packers.size(), blocks);
  EXPECT_EQ(packers[0].second, 0);
  for (size_t i = 1; i < packers.size(); ++i) {
    EXPECT_EQ(packers[i], std::make_pair(second_id, static_cast<int64_t>(i)));
  }
}

// Where keeping a packing does not pay, Eigen's path runs: no rows (a replica's empty shard),
// a single row or column (Eigen's matrix-vector product), a small weight, a weight whose
// packing would crowd the cache.
TEST(SharedPackingTest, SmallAndHugeWeightsAndVectorsStayOnEigensPath) {
  ScopedIntraOpThreads whole(1);
  const Case cases[] = {{0, 1024, 1024},  // an empty shard
                        {1, 1024, 1024},
                        {64, 1024, 1},
                        {64, 128, 256},  // 32 K elements
                        {8, 2048, 1024}};  // 8 MiB packed
  for (const Case& c : cases) {
    const Tensor x = Make(Shape{c.rows, c.depth}, RandomValues(c.rows * c.depth, 6));
    const Tensor w = Make(Shape{c.depth, c.units}, RandomValues(c.depth * c.units, 7));
    const cpu::SharedPackingCounts before = cpu::SharedPackingCountsSoFar();
    EXPECT_EQ(Host(ops::MatMulByWeight(x, w, false, 99)), Host(ops::MatMul(x, w)));
    EXPECT_EQ(cpu::SharedPackingCountsSoFar().packed, before.packed)
        << c.rows << "x" << c.depth << "x" << c.units;
  }
}

// A product split over intra-op threads (a replica with idle cores) keeps Eigen's path: each
// chunk packs only its own columns.
TEST(SharedPackingTest, ASplitProductStaysOnEigensPath) {
  ScopedIntraOpThreads split(2);
  const Tensor x = Make(Shape{64, 1024}, RandomValues(64 * 1024, 8));
  const Tensor w = Make(Shape{1024, 1024}, RandomValues(1024 * 1024, 9));
  const cpu::SharedPackingCounts before = cpu::SharedPackingCountsSoFar();
  EXPECT_EQ(Host(ops::MatMulByWeight(x, w, true, 123)), Host(ops::MatMul(x, w, false, true)));
  EXPECT_EQ(cpu::SharedPackingCountsSoFar().packed, before.packed);
}

// Bad operands get MatMul's errors, before any kernel runs.
TEST(SharedPackingTest, MismatchedOperandsGetMatMulsError) {
  const Tensor x = Make(Shape{4, 300}, RandomValues(4 * 300, 10));
  const Tensor w = Make(Shape{256, 512}, RandomValues(256 * 512, 11));
  const StatusOr<Tensor> product = ops::MatMulByWeight(x, w, false, 5);
  ASSERT_FALSE(product.ok());
  EXPECT_EQ(product.status().code(), StatusCode::kInvalidArgument) << product.status();
  EXPECT_NE(product.status().message().find("inner dimensions differ"), std::string::npos)
      << product.status();
}

}  // namespace
}  // namespace tower
