// The in-process and reduce-to-one-device all-reduces, from real replica threads, with
// rank-dependent inputs whose sums are known in closed form (and exact in float32: small
// integers and halves).
#include <mutex>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "strategy/step/distribution.h"
#include "ops/testing/fake_gpu_kernels.h"
#include "strategy/collectives/in_process_all_reduce.h"
#include "strategy/collectives/reduction_to_one_device.h"
#include "tests/testing/replica_threads.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::FakeGpuSpec;
using testing::MakeContextWithFakeGpus;
using testing::OnThreads;
using testing::ReplicaNames;

// Replica r, tensor t, element i holds (r + 1) · (i % 7 + t) / 2: the sum over n replicas is
// n(n+1)/2 · (i % 7 + t) / 2, exact in float32.
float Value(int r, int t, int64_t i) { return (r + 1) * static_cast<float>(i % 7 + t) / 2; }
float Expected(int n, int t, int64_t i) { return n * (n + 1) / 2 * static_cast<float>(i % 7 + t) / 2; }

std::unique_ptr<Context> Cpus(int n) { return testing::MakeContextWithLogicalCpus(n); }


// Replica r's tensors of these sizes, holding Value(r, t, i), on its device.
std::vector<std::vector<Tensor>> ReplicaTensors(const std::vector<Device*>& devices,
                                                const std::vector<int64_t>& sizes) {
  std::vector<std::vector<Tensor>> tensors(devices.size());
  for (size_t r = 0; r < devices.size(); ++r) {
    for (size_t t = 0; t < sizes.size(); ++t) {
      std::vector<float> values(static_cast<size_t>(sizes[t]));
      for (int64_t i = 0; i < sizes[t]; ++i) values[i] = Value(static_cast<int>(r), static_cast<int>(t), i);
      tensors[r].push_back(*Tensor::FromHost(devices[r], Shape{sizes[t]}, values));
    }
  }
  return tensors;
}

void CheckAllReduce(CrossDeviceOps& ops, const std::vector<Device*>& devices,
                    const std::vector<int64_t>& sizes) {
  const int n = static_cast<int>(devices.size());
  std::vector<std::vector<Tensor>> tensors = ReplicaTensors(devices, sizes);
  std::vector<Status> results = OnThreads(n, [&](int r) {
    std::vector<Tensor*> mine;
    for (Tensor& t : tensors[r]) mine.push_back(&t);
    return ops.AllReduce(r, mine);
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(results[r].ok()) << results[r];
  for (int r = 0; r < n; ++r) {
    for (size_t t = 0; t < sizes.size(); ++t) {
      const std::vector<float> got = *tensors[r][t].ToHost();
      for (int64_t i = 0; i < sizes[t]; ++i) {
        ASSERT_EQ(got[i], Expected(n, static_cast<int>(t), i))
            << ops.name() << " n=" << n << " replica " << r << " tensor " << t << " [" << i << "]";
      }
    }
  }
}

// {0}, {1} and {1023} are summed whole by the last replica to arrive (up to 2 KB per replica
// times the replica count), the rest in slices by every replica.
const std::vector<std::vector<int64_t>> kSizeSets = {
    {0}, {1}, {1023}, {1, 0, 5, 4096}, {300000}, {7, 1 << 20, 3}};

TEST(InProcessAllReduceTest, ClosedFormSumsForManySizesAndReplicaCounts) {
  for (int n : {1, 2, 3, 4}) {
    auto context = Cpus(n);
    std::vector<Device*> devices = *context->Devices("CPU");
    InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(30), n <= 2);
    for (const auto& sizes : kSizeSets) CheckAllReduce(ops, devices, sizes);
  }
}

// Each call sums the tensors it is given, wherever they are: lists at new addresses while
// the old ones live on (and change) are summed from the new, whole and in slices.
TEST(InProcessAllReduceTest, ListsAtNewAddressesAreSummedNotTheOldOnes) {
  for (int n : {2, 3}) {
    auto context = Cpus(n);
    std::vector<Device*> devices = *context->Devices("CPU");
    InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(30), n <= 2);
    for (int64_t size : {int64_t{5}, int64_t{20000}}) {
      std::vector<std::vector<std::vector<Tensor>>> sets;  // [round][replica][tensor]
      for (int round = 0; round < 3; ++round) {
        sets.push_back(ReplicaTensors(devices, {size}));
        // The previous round's tensors, still alive, now hold what must not be summed.
        if (round > 0) {
          for (std::vector<Tensor>& mine : sets[round - 1]) {
            std::fill_n(mine[0].data<float>(), size, 1000.0f);
          }
        }
        std::vector<Status> results =
            OnThreads(n, [&](int r) { return ops.AllReduce(r, {&sets[round][r][0]}); });
        for (const Status& s : results) ASSERT_TRUE(s.ok()) << s;
        for (int r = 0; r < n; ++r) {
          const std::vector<float> got = *sets[round][r][0].ToHost();
          for (int64_t i = 0; i < size; ++i) {
            ASSERT_EQ(got[i], Expected(n, 0, i))
                << "n=" << n << " size " << size << " round " << round << " replica " << r;
          }
        }
      }
    }
  }
}

// Past 8 replicas the sum is the general blocked loop, and past 64 its buffer table is on the
// heap: 9 and 65 replica threads, closed forms (exact in float32 for these values).
TEST(InProcessAllReduceTest, ClosedFormSumsForNineAndSixtyFiveReplicas) {
  for (int n : {9, 65}) {
    auto context = Cpus(n);
    std::vector<Device*> devices = *context->Devices("CPU");
    ASSERT_EQ(static_cast<int>(devices.size()), n);
    InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(60), false);
    // {40000}: past what the last replica to arrive sums whole (2 KB per replica times the
    // replica count), so summed in slices.
    for (const auto& sizes : std::vector<std::vector<int64_t>>{{0}, {1}, {1023}, {1, 0, 5, 4096},
                                                                {3000, 513}, {40000}}) {
      CheckAllReduce(ops, devices, sizes);
    }
  }
}

// Records what an all-reduce hands over: per gradient, each element's sum and how many
// times it came (from any replica thread).
class RecordingSink : public SummedGradientSink {
 public:
  explicit RecordingSink(const std::vector<int64_t>& sizes) {
    for (int64_t size : sizes) {
      sums_.emplace_back(size, 0.0f);
      counts_.emplace_back(size, 0);
    }
  }
  void Consume(size_t gradient, int64_t begin, int64_t end, const float* sum) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t i = begin; i < end; ++i) {
      sums_[gradient][i] = sum[i - begin];
      ++counts_[gradient][i];
    }
  }
  std::vector<std::vector<float>> sums_;
  std::vector<std::vector<int>> counts_;

 private:
  std::mutex mu_;
};

// Tensors 0 and 1 are gradients 5 and 6 of the step (handed over), tensor 2 (the loss, say)
// is summed in place. 5000 elements span several blocks of the hand-over and are summed in
// slices by every replica; 900 are summed whole by the last replica to arrive.
void CheckHandOver(const std::vector<int64_t>& sizes) {
  for (int n : {1, 2, 3, 4, 9}) {
    auto context = Cpus(n);
    std::vector<Device*> devices = *context->Devices("CPU");
    InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(30), false);
    std::vector<std::vector<Tensor>> tensors = ReplicaTensors(devices, sizes);
    RecordingSink sink({0, 0, 0, 0, 0, sizes[0], sizes[1]});
    const AllReduceOptions hand_over =
        AllReduceOptions::HandOver(/*handed=*/2, /*first_gradient=*/5, &sink);
    ASSERT_TRUE(ops.Supports(hand_over));
    std::vector<Status> results = OnThreads(n, [&](int r) {
      std::vector<Tensor*> mine;
      for (Tensor& t : tensors[r]) mine.push_back(&t);
      return ops.AllReduce(r, mine, hand_over);
    });
    for (int r = 0; r < n; ++r) ASSERT_TRUE(results[r].ok()) << results[r];
    for (int t = 0; t < 2; ++t) {
      for (int64_t i = 0; i < sizes[t]; ++i) {
        ASSERT_EQ(sink.counts_[5 + t][i], 1) << "n=" << n << " gradient " << 5 + t << " [" << i << "]";
        ASSERT_EQ(sink.sums_[5 + t][i], Expected(n, t, i)) << "n=" << n << " [" << i << "]";
      }
      // Not written back: every replica keeps its own gradient.
      for (int r = 0; r < n; ++r) {
        const std::vector<float> got = *tensors[r][t].ToHost();
        for (int64_t i = 0; i < sizes[t]; ++i) ASSERT_EQ(got[i], Value(r, t, i));
      }
    }
    for (int r = 0; r < n; ++r) {
      const std::vector<float> got = *tensors[r][2].ToHost();
      for (int64_t i = 0; i < sizes[2]; ++i) ASSERT_EQ(got[i], Expected(n, 2, i)) << "n=" << n;
    }
  }
}

TEST(InProcessAllReduceTest, HandsEachSumOverOnceAndSumsTheRestInPlace) {
  CheckHandOver({5000, 3, 7});
  CheckHandOver({900, 3, 7});
}

TEST(InProcessAllReduceTest, MismatchIsReportedOnEveryReplicaWithBothSides) {
  auto context = Cpus(2);
  std::vector<Device*> devices = *context->Devices("CPU");
  InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(30), true);
  Tensor a = *Tensor::Zeros(devices[0], Shape{4});
  Tensor b = *Tensor::Zeros(devices[1], Shape{5});
  std::vector<Status> results = OnThreads(2, [&](int r) {
    Tensor* t = r == 0 ? &a : &b;
    return ops.AllReduce(r, {t});
  });
  for (const Status& s : results) {
    EXPECT_TRUE(IsInvalidArgument(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("mismatch at tensor 0"));
    EXPECT_THAT(s.message(), HasSubstr("float32[4]"));
    EXPECT_THAT(s.message(), HasSubstr("float32[5]"));
  }
  // Usable afterwards.
  CheckAllReduce(ops, devices, {3});
}

// A small list on one replica and a large one on another (summed whole by the last to arrive
// and in slices by all, were they alike): whoever arrives last, every replica returns the
// mismatch, none waits for a second meeting that the others skip.
TEST(InProcessAllReduceTest, ASmallAndALargeListAreAMismatchOnEveryReplica) {
  for (int n : {2, 3}) {
    auto context = Cpus(n);
    std::vector<Device*> devices = *context->Devices("CPU");
    InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(30), n <= 2);
    for (int large : {0, n - 1}) {  // replica 0's list is the odd one, then the last one's
      std::vector<Tensor> tensors;
      for (int r = 0; r < n; ++r) {
        tensors.push_back(*Tensor::Zeros(devices[r], Shape{r == large ? 100000 : 4}));
      }
      for (int round = 0; round < 20; ++round) {  // each first in turn, the others 0.2 ms later
        std::vector<Status> results = OnThreads(n, [&](int r) {
          if (r != round % n) std::this_thread::sleep_for(std::chrono::microseconds(200));
          return ops.AllReduce(r, {&tensors[r]});
        });
        for (const Status& s : results) {
          ASSERT_TRUE(IsInvalidArgument(s)) << s;
          EXPECT_THAT(s.message(), HasSubstr("mismatch at tensor 0"));
          EXPECT_THAT(s.message(), HasSubstr("float32[100000]"));
        }
      }
    }
    CheckAllReduce(ops, devices, {3});  // usable afterwards
    CheckAllReduce(ops, devices, {5000});
  }
}

// Lists of one layout are checked against replica 0's alone (their layout fingerprints
// agree); what every list gets wrong alike is still every replica's error, and
// a list that differs from the others in its dtype alone is still found by all of them.
TEST(InProcessAllReduceTest, ListsOfOneLayoutAndListsThatDifferAreReportedByEveryReplica) {
  for (int n : {2, 3, 5}) {
    auto context = Cpus(n);
    std::vector<Device*> devices = *context->Devices("CPU");
    InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(30), false);
    std::vector<Tensor> ints;
    for (int r = 0; r < n; ++r) ints.push_back(*Tensor::Zeros(devices[r], Shape{4}, DType::kInt32));
    std::vector<Status> same = OnThreads(n, [&](int r) { return ops.AllReduce(r, {&ints[r]}); });
    for (const Status& s : same) EXPECT_THAT(s.message(), HasSubstr("sums float32 tensors")) << n;
    // The last replica passes int32 where the others pass float32 of the same shape.
    std::vector<Tensor> mixed;
    for (int r = 0; r < n; ++r) {
      mixed.push_back(*Tensor::Zeros(devices[r], Shape{4}, r == n - 1 ? DType::kInt32
                                                                    : DType::kFloat32));
    }
    std::vector<Status> odd = OnThreads(n, [&](int r) { return ops.AllReduce(r, {&mixed[r]}); });
    for (const Status& s : odd) {
      EXPECT_THAT(s.message(), HasSubstr("mismatch at tensor 0")) << n;
      EXPECT_THAT(s.message(), HasSubstr("int32[4]")) << n;
    }
    CheckAllReduce(ops, devices, {3, 5});  // usable afterwards
  }
}

TEST(InProcessAllReduceTest, BroadcastCopiesReplicaZero) {
  auto context = Cpus(3);
  std::vector<Device*> devices = *context->Devices("CPU");
  InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(30), false);
  std::vector<Tensor> tensors;
  for (int r = 0; r < 3; ++r) {
    tensors.push_back(*Tensor::FromHost(devices[r], Shape{3}, {float(r), float(r), float(r)}));
  }
  std::vector<Status> results = OnThreads(3, [&](int r) { return ops.Broadcast(r, {&tensors[r]}); });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(results[r].ok());
    EXPECT_EQ(*tensors[r].ToHost(), (std::vector<float>{0, 0, 0}));
  }
}

TEST(ReductionToOneDeviceTest, ClosedFormSumsAcrossCpusAndGpus) {
  testing::RegisterFakeGpuKernels();
  auto context = MakeContextWithFakeGpus({FakeGpuSpec(), FakeGpuSpec()});
  TOWER_CHECK_OK(context->EnsureInitialized());
  std::vector<Device*> devices = {*context->FindDevice("/CPU:0"), *context->FindDevice("/GPU:0"),
                                  *context->FindDevice("/GPU:1")};
  ReductionToOneDevice ops(devices[0], ReplicaNames(devices), std::chrono::seconds(30), false);
  for (const auto& sizes : kSizeSets) CheckAllReduce(ops, devices, sizes);
}

TEST(ReductionToOneDeviceTest, CannotHandSumsOver) {
  auto context = Cpus(2);
  std::vector<Device*> devices = *context->Devices("CPU");
  ReductionToOneDevice ops(devices[0], ReplicaNames(devices), std::chrono::seconds(30), false);
  Tensor a = *Tensor::Zeros(devices[0], Shape{4});
  RecordingSink sink({4});
  const AllReduceOptions hand_over = AllReduceOptions::HandOver(1, 0, &sink);
  EXPECT_FALSE(ops.Supports(hand_over));
  EXPECT_EQ(ops.AllReduce(0, {&a}, hand_over).code(), StatusCode::kUnimplemented);
}

TEST(ReductionToOneDeviceTest, AbortFromAFailingReplicaReleasesTheOthers) {
  auto context = Cpus(3);
  std::vector<Device*> devices = *context->Devices("CPU");
  ReductionToOneDevice ops(devices[0], ReplicaNames(devices), std::chrono::seconds(30), false);
  std::vector<Tensor> tensors;
  for (int r = 0; r < 3; ++r) tensors.push_back(*Tensor::Zeros(devices[r], Shape{8}));
  std::vector<Status> results = OnThreads(3, [&](int r) -> Status {
    if (r == 2) {
      const Status failure = InternalError("replica 2 (/job:...CPU:2): out of coffee");
      ops.Abort(failure);  // what the strategy does when a replica fails
      return failure;
    }
    return ops.AllReduce(r, {&tensors[r]});
  });
  EXPECT_THAT(results[0].message(), HasSubstr("out of coffee"));
  EXPECT_THAT(results[1].message(), HasSubstr("out of coffee"));
  ops.Reset();
}

// ---- Deterministic mode's tree all-reduce.
//
// 8 leaves spread over the replicas; leaf 0 holds 2^24·s and the seven others s (s a power
// of two per element, so every sum below is exact or rounds the same way at every scale).
// A replica passes its largest subtrees: the tree adds the ones in pairs before meeting
// 2^24 and keeps six of them, so the root is (2^24 + 6)·s, where a left-to-right sum over
// the leaves (or the replicas, for 2 of them) would give 2^24·s.
constexpr int kLeaves = 8;
float Scale(int64_t i) { return static_cast<float>(1 << (i % 4)); }
// A subtree's sum as its owner forms it: 2^24 + 1 rounds (to even) to 2^24.
float SubtreeSum(const TreeNode& node) {
  if (node.first > 0) return static_cast<float>(node.leaves());
  return node.end <= 2 ? 16777216.0f : 16777216.0f + static_cast<float>(node.end - 2);
}

void CheckAllReduceTree(CrossDeviceOps& ops, const std::vector<Device*>& devices,
                        const std::vector<int64_t>& sizes) {
  const int n = static_cast<int>(devices.size());
  // [replica][node][tensor]; replica 0's root is its own last subtree (read, then written).
  std::vector<std::vector<std::vector<Tensor>>> subtrees(n);
  std::vector<std::vector<Tensor>> roots(n);
  std::vector<PartialSums> parts(n);
  for (int r = 0; r < n; ++r) {
    const RowRange leaves = ReplicaRows(kLeaves, n, r);
    parts[r].num_leaves = kLeaves;
    parts[r].nodes = CoverNodes(kLeaves, static_cast<int>(leaves.first),
                                static_cast<int>(leaves.end()));
    for (const TreeNode& node : parts[r].nodes) {
      subtrees[r].emplace_back();
      for (int64_t size : sizes) {
        std::vector<float> values(static_cast<size_t>(size));
        for (int64_t i = 0; i < size; ++i) values[i] = SubtreeSum(node) * Scale(i);
        subtrees[r].back().push_back(*Tensor::FromHost(devices[r], Shape{size}, values));
      }
    }
    for (int64_t size : sizes) roots[r].push_back(*Tensor::Zeros(devices[r], Shape{size}));
    if (r == 0) roots[r] = subtrees[r].back();
    for (auto& node : subtrees[r]) {
      parts[r].values.emplace_back();
      for (Tensor& t : node) parts[r].values.back().push_back(&t);
    }
  }
  std::vector<Status> results = OnThreads(n, [&](int r) {
    std::vector<Tensor*> mine;
    for (Tensor& t : roots[r]) mine.push_back(&t);
    return ops.AllReduce(r, mine, AllReduceOptions::Tree(parts[r]));
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(results[r].ok()) << results[r];
  for (int r = 0; r < n; ++r) {
    for (size_t t = 0; t < sizes.size(); ++t) {
      const std::vector<float> got = *roots[r][t].ToHost();
      for (int64_t i = 0; i < sizes[t]; ++i) {
        ASSERT_EQ(got[i], 16777222.0f * Scale(i))
            << ops.name() << " n=" << n << " replica " << r << " tensor " << t << " [" << i << "]";
      }
    }
  }
}

TEST(InProcessAllReduceTest, TreeSumsInClosedFormForEveryReplicaCount) {
  for (int n : {1, 2, 3, 4, 8}) {
    auto context = Cpus(n);
    std::vector<Device*> devices = *context->Devices("CPU");
    InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(30), n <= 2);
    for (const auto& sizes : kSizeSets) CheckAllReduceTree(ops, devices, sizes);
  }
}

// Each call's partial sums and roots at new addresses, one layout (what lets a replica skip
// the full check): the sums come from the new tensors, while the old ones live on and
// change. Small (evaluated whole by the last replica to arrive) and large (in slices).
TEST(InProcessAllReduceTest, TreeContributionsAtNewAddressesAreSummedNotTheOldOnes) {
  for (int n : {2, 3}) {
    auto context = Cpus(n);
    std::vector<Device*> devices = *context->Devices("CPU");
    InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(30), n <= 2);
    for (int64_t size : {int64_t{5}, int64_t{20000}}) {
      // [round][replica][node]; roots [round][replica].
      std::vector<std::vector<std::vector<Tensor>>> subtrees;
      std::vector<std::vector<Tensor>> roots;
      std::vector<std::vector<PartialSums>> parts;
      for (int round = 0; round < 3; ++round) {
        subtrees.emplace_back(n);
        roots.emplace_back();
        parts.emplace_back(n);
        for (int r = 0; r < n; ++r) {
          const RowRange leaves = ReplicaRows(kLeaves, n, r);
          PartialSums& part = parts[round][r];
          part.num_leaves = kLeaves;
          part.nodes = CoverNodes(kLeaves, static_cast<int>(leaves.first),
                                  static_cast<int>(leaves.end()));
          for (const TreeNode& node : part.nodes) {
            std::vector<float> values(static_cast<size_t>(size));
            for (int64_t i = 0; i < size; ++i) values[i] = SubtreeSum(node) * Scale(i);
            subtrees[round][r].push_back(*Tensor::FromHost(devices[r], Shape{size}, values));
          }
          roots[round].push_back(*Tensor::Zeros(devices[r], Shape{size}));
        }
        for (int r = 0; r < n; ++r) {  // pointers taken once the vectors stop growing
          for (Tensor& t : subtrees[round][r]) parts[round][r].values.push_back({&t});
        }
        if (round > 0) {  // the previous round's tensors now hold what must not be summed
          for (int r = 0; r < n; ++r) {
            for (Tensor& t : subtrees[round - 1][r]) std::fill_n(t.data<float>(), size, 1000.0f);
            std::fill_n(roots[round - 1][r].data<float>(), size, 1000.0f);
          }
        }
        std::vector<Status> results = OnThreads(n, [&](int r) {
          return ops.AllReduce(r, {&roots[round][r]}, AllReduceOptions::Tree(parts[round][r]));
        });
        for (const Status& s : results) ASSERT_TRUE(s.ok()) << s;
        for (int r = 0; r < n; ++r) {
          const std::vector<float> got = *roots[round][r].ToHost();
          for (int64_t i = 0; i < size; ++i) {
            ASSERT_EQ(got[i], 16777222.0f * Scale(i))
                << "n=" << n << " size " << size << " round " << round << " replica " << r;
          }
        }
      }
    }
  }
}

// A small contribution on one replica and a large one on another: the same mismatch on
// every replica, whichever arrives last (a decision each made alone could hang), and after
// calls that were checked, so that a replica cannot have skipped the check.
TEST(InProcessAllReduceTest, TreeSmallAndLargeContributionsAreAMismatchOnEveryReplica) {
  auto context = Cpus(2);
  std::vector<Device*> devices = *context->Devices("CPU");
  InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(30), true);
  CheckAllReduceTree(ops, devices, {4});
  CheckAllReduceTree(ops, devices, {100000});
  for (int large : {0, 1}) {
    Tensor a = *Tensor::Zeros(devices[0], Shape{large == 0 ? 100000 : 4});
    Tensor b = *Tensor::Zeros(devices[1], Shape{large == 1 ? 100000 : 4});
    PartialSums first{kLeaves, {{0, 4}}, {{&a}}};
    PartialSums second{kLeaves, {{4, 8}}, {{&b}}};
    for (int round = 0; round < 10; ++round) {  // each first in turn, the other 0.2 ms later
      std::vector<Status> results = OnThreads(2, [&](int r) {
        if (r != round % 2) std::this_thread::sleep_for(std::chrono::microseconds(200));
        return ops.AllReduce(r, {r == 0 ? &a : &b},
                             AllReduceOptions::Tree(r == 0 ? first : second));
      });
      for (const Status& s : results) {
        ASSERT_TRUE(IsInvalidArgument(s)) << s;
        EXPECT_THAT(s.message(), HasSubstr("float32[100000]"));
      }
    }
  }
  CheckAllReduceTree(ops, devices, {3});  // usable afterwards
}

TEST(ReductionToOneDeviceTest, TreeSumsInClosedFormAcrossCpusAndGpus) {
  testing::RegisterFakeGpuKernels();
  auto context = MakeContextWithFakeGpus({FakeGpuSpec(), FakeGpuSpec()});
  TOWER_CHECK_OK(context->EnsureInitialized());
  std::vector<Device*> devices = {*context->FindDevice("/CPU:0"), *context->FindDevice("/GPU:0"),
                                  *context->FindDevice("/GPU:1")};
  ReductionToOneDevice ops(devices[0], ReplicaNames(devices), std::chrono::seconds(30), false);
  for (const auto& sizes : kSizeSets) CheckAllReduceTree(ops, devices, sizes);
}

TEST(InProcessAllReduceTest, TreeMismatchesAreReportedOnEveryReplica) {
  auto context = Cpus(2);
  std::vector<Device*> devices = *context->Devices("CPU");
  InProcessAllReduce ops(ReplicaNames(devices), std::chrono::seconds(30), true);
  ReductionToOneDevice to_cpu(devices[0], ReplicaNames(devices), std::chrono::seconds(30), true);
  for (CrossDeviceOps* path : std::vector<CrossDeviceOps*>{&ops, &to_cpu}) {
    // Replica 1's subtree has 5 elements where replica 0's root has 4; then a leaf is missing.
    // After a checked call of the same tensor count: a changed layout is checked again.
    CheckAllReduceTree(*path, devices, {4});
    for (bool missing_leaf : {false, true}) {
      Tensor a = *Tensor::Zeros(devices[0], Shape{4});
      Tensor b = *Tensor::Zeros(devices[1], Shape{missing_leaf ? 4 : 5});
      PartialSums first{kLeaves, {{0, 4}}, {{&a}}};
      PartialSums second{kLeaves, {{missing_leaf ? 5 : 4, missing_leaf ? 6 : 8}}, {{&b}}};
      std::vector<Status> results = OnThreads(2, [&](int r) {
        return path->AllReduce(r, {r == 0 ? &a : &b},
                               AllReduceOptions::Tree(r == 0 ? first : second));
      });
      for (const Status& s : results) {
        EXPECT_TRUE(IsInvalidArgument(s)) << path->name() << ": " << s;
        EXPECT_THAT(s.message(), HasSubstr(missing_leaf ? "nobody holds leaf 4" : "float32[5]"))
            << path->name();
      }
    }
    path->Reset();  // as the strategy does after a failed step
    CheckAllReduceTree(*path, devices, {3});  // usable afterwards
  }
}

// ---- AllReduceOptions: what a path takes.
//
// Options a path does not take, or that contradict each other or the list, are refused on
// the calling replica before it joins the collective (replica 0 calls alone here: it would
// wait otherwise), naming the path and the option; Supports gives the same answer.
TEST(CrossDeviceOpsTest, OptionsAPathDoesNotTakeAreRefusedBeforeTheCollective) {
  auto context = Cpus(2);
  std::vector<Device*> devices = *context->Devices("CPU");
  InProcessAllReduce in_process(ReplicaNames(devices), std::chrono::seconds(30), false);
  ReductionToOneDevice to_cpu(devices[0], ReplicaNames(devices), std::chrono::seconds(30), false);
  Tensor a = *Tensor::Zeros(devices[0], Shape{4});
  RecordingSink sink({4});
  PartialSums part{kLeaves, {{0, 4}}, {{&a}}};
  auto refused = [&](CrossDeviceOps& ops, const AllReduceOptions& options, StatusCode code,
                     const std::string& what) {
    EXPECT_FALSE(ops.Supports(options)) << ops.name() << ": " << what;
    const Status status = ops.AllReduce(0, {&a}, options);
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_THAT(status.message(), HasSubstr(ops.name())) << status;
    EXPECT_THAT(status.message(), HasSubstr(what)) << status;
  };
  // A kind of sum the path lacks.
  refused(to_cpu, AllReduceOptions::Folded(1, 2), StatusCode::kUnimplemented,
          "AllReduceOptions::folded");
  refused(to_cpu, AllReduceOptions::HandOver(1, 0, &sink), StatusCode::kUnimplemented,
          "AllReduceOptions::handed");
  // Folding for EnableFolding's group count only.
  refused(in_process, AllReduceOptions::Folded(1, 2), StatusCode::kInvalidArgument,
          "folding is not enabled");
  in_process.EnableFolding(2);
  EXPECT_TRUE(in_process.Supports(AllReduceOptions::Folded(1, 2)));
  refused(in_process, AllReduceOptions::Folded(1, 3), StatusCode::kInvalidArgument, "it folds 2");
  // Options that contradict each other or the list, on any path.
  for (CrossDeviceOps* ops : std::vector<CrossDeviceOps*>{&in_process, &to_cpu}) {
    AllReduceOptions tree_handing_over = AllReduceOptions::HandOver(1, 0, &sink);
    tree_handing_over.tree = &part;
    refused(*ops, tree_handing_over, StatusCode::kInvalidArgument, "AllReduceOptions::tree");
    refused(*ops, AllReduceOptions::Folded(1, 0), StatusCode::kInvalidArgument, "from 0 groups");
    EXPECT_TRUE(ops->Supports(AllReduceOptions::Tree(part))) << ops->name();
  }
  refused(in_process, AllReduceOptions::HandOver(1, 0, nullptr), StatusCode::kInvalidArgument,
          "to no sink");
  EXPECT_TRUE(in_process.Supports(AllReduceOptions::HandOver(2, 0, &sink)));
  const Status too_many = in_process.AllReduce(0, {&a}, AllReduceOptions::HandOver(2, 0, &sink));
  EXPECT_TRUE(IsInvalidArgument(too_many)) << too_many;
  EXPECT_THAT(too_many.message(), HasSubstr("2 handed-over tensors of 1"));
  // Nothing was joined: both paths sum as usual.
  CheckAllReduce(in_process, devices, {3});
  CheckAllReduce(to_cpu, devices, {3});
}

}  // namespace
}  // namespace tower
