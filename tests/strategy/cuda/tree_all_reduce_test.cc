// Deterministic mode's tree all-reduce (CrossDeviceOps::AllReduce with AllReduceOptions::tree)
// on the GPU paths: same-card over virtual GPUs of one card, NCCL across cards in one
// process, and NCCL across "processes" (threads holding ranks of one communicator, as
// nccl_all_reduce_test does).
//
// Every replica's root must have the bits of the summation tree evaluated on the host. The
// reference here is independent of the code under test: the tree is restated (a node splits
// at the largest power of two below its leaf count) and evaluated recursively from the nodes
// the replicas hold; it is also checked against RunSumPlan, the host executor the CPU paths
// use. The values have random signs and exponents spread over 2^±12, so any other
// association — left to right over the partial sums, replica by replica — gives other bits
// (each case checks that it would: a kernel summing in another order fails here).
//
// Covered: 1–4 replicas, leaf counts whose shards split unevenly (8 leaves over 3 replicas:
// [0,3), [3,6), [6,8)), replicas holding different numbers of subtrees (NCCL pads them),
// several tensors of odd sizes and empty ones, roots that are the replica's own partial sum
// (read, then overwritten); mismatches reported alike on every replica, the collective
// usable afterwards. Built with --config=cuda (cases skip without enough GPUs) or
// --config=cudaemu (4 emulated GPUs).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/context.h"
#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "strategy/step/distribution.h"
#include "strategy/collectives/cross_device_ops.h"
#include "strategy/collectives/gpu_collectives.h"
#include "strategy/collectives/summation_tree.h"
#include "tests/testing/gpu.h"
#include "tests/testing/gpu_contexts.h"
#include "tests/testing/replica_threads.h"
#include "tests/testing/same_bits.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::MakeNcclWorkers;
using testing::NcclWorker;
using testing::OnThreads;
using testing::RealGpuContext;
using testing::ReplicaNames;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout(60000);

// ---- The host reference.

// The tree restated: [first, end) with two or more leaves splits at first + the largest power
// of two below end − first.
int Split(int first, int end) {
  int half = 1;
  while (2 * half < end - first) half *= 2;
  return first + half;
}

struct HeldNode {
  TreeNode node;
  const std::vector<float>* values;
};

// Node [first, end)'s value, element by element: the held value when someone holds the node,
// else left child + right child (one float addition per element).
std::vector<float> TreeValue(const std::vector<HeldNode>& held, int first, int end) {
  for (const HeldNode& h : held) {
    if (h.node.first == first && h.node.end == end) return *h.values;
  }
  if (end - first < 2) {
    ADD_FAILURE() << "test bug: nobody holds leaf " << first;
    return {};
  }
  const int split = Split(first, end);
  std::vector<float> sum = TreeValue(held, first, split);
  const std::vector<float> right = TreeValue(held, split, end);
  if (sum.size() != right.size()) return {};
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = sum[i] + right[i];
  return sum;
}

// The association the tree gives the held nodes, as text: "((0+1)+2)" for nodes 0, 1, 2 in
// leaf order.
std::string TreeExpression(const std::vector<HeldNode>& held, int first, int end) {
  for (size_t h = 0; h < held.size(); ++h) {
    if (held[h].node.first == first && held[h].node.end == end) return std::to_string(h);
  }
  if (end - first < 2) return "?";
  const int split = Split(first, end);
  return "(" + TreeExpression(held, first, split) + "+" + TreeExpression(held, split, end) + ")";
}
std::string LeftToRight(const std::vector<HeldNode>& held) {
  std::string expression = "0";
  for (size_t h = 1; h < held.size(); ++h) {
    expression = "(" + expression + "+" + std::to_string(h) + ")";
  }
  return expression;
}

// A float of random sign, 24 random mantissa bits, exponent in [-12, 12]: sums of a few of
// them round differently when associated differently.
float Spread(uint64_t seed) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull;  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float mantissa = 1.0f + static_cast<float>(z & 0x7FFFFF) / 8388608.0f;
  const int exponent = static_cast<int>((z >> 23) % 25) - 12;
  return ((z >> 63) ? -1.0f : 1.0f) * std::ldexp(mantissa, exponent);
}

using testing::SameBits;

// The first element where a and b differ in bits, for messages.
std::string FirstDifference(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) {
    return std::to_string(got.size()) + " elements, not " + std::to_string(want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      char text[160];
      std::snprintf(text, sizeof(text), "element %zu is %a, the tree gives %a", i, got[i],
                    want[i]);
      return text;
    }
  }
  return "none";
}

// ---- One tree all-reduce over global replicas, each driven by (ops, local replica).

struct Replica {
  CrossDeviceOps* ops = nullptr;
  int local = 0;
  Device* device = nullptr;
  std::vector<TreeNode> nodes;  // in leaf order
};

// `replicas` (global order, which is also the order of their nodes in the tree's leaves)
// reduce tensors of `sizes` over `num_leaves` leaves; checks every root against the host.
void CheckTree(const std::vector<Replica>& replicas, int num_leaves,
               const std::vector<int64_t>& sizes, const std::string& what) {
  SCOPED_TRACE(what + ", " + std::to_string(num_leaves) + " leaves, " +
               std::to_string(sizes.size()) + " tensors, the first of " +
               std::to_string(sizes[0]) + " elements");
  const int n = static_cast<int>(replicas.size());
  // host[g][k][t]: replica g's node k, tensor t.
  std::vector<std::vector<std::vector<std::vector<float>>>> host(n);
  std::vector<std::vector<std::vector<Tensor>>> values(n);  // [g][k][t] on the device
  std::vector<std::vector<Tensor>> fresh(n);                 // [g][t] roots that alias nothing
  std::vector<PartialSums> parts(n);
  std::vector<std::vector<Tensor*>> roots(n);
  for (int g = 0; g < n; ++g) {
    const Replica& replica = replicas[g];
    parts[g].num_leaves = num_leaves;
    parts[g].nodes = replica.nodes;
    for (const TreeNode& node : replica.nodes) {
      host[g].emplace_back();
      values[g].emplace_back();
      for (size_t t = 0; t < sizes.size(); ++t) {
        std::vector<float> v(static_cast<size_t>(sizes[t]));
        for (int64_t i = 0; i < sizes[t]; ++i) {
          v[i] = Spread((((static_cast<uint64_t>(node.first) * 131 + node.end) * 17 + t) << 32) +
                        static_cast<uint64_t>(i));
        }
        values[g].back().push_back(*Tensor::FromHost(replica.device, Shape{sizes[t]}, v));
        host[g].back().push_back(std::move(v));
      }
    }
    // Even replicas: the root is their own last subtree (read by everyone, then overwritten);
    // odd ones: fresh buffers (NaN bytes under the emulation: every element must be written).
    for (size_t t = 0; t < sizes.size(); ++t) {
      if (g % 2 == 0 && !values[g].empty()) {
        roots[g].push_back(&values[g].back()[t]);
      } else {
        fresh[g].push_back(*Tensor::Empty(replica.device, Shape{sizes[t]}));
      }
    }
    for (Tensor& tensor : fresh[g]) roots[g].push_back(&tensor);
  }
  // The value pointers, now that the tensors no longer move.
  for (int g = 0; g < n; ++g) {
    for (std::vector<Tensor>& node : values[g]) {
      parts[g].values.emplace_back();
      for (Tensor& tensor : node) parts[g].values.back().push_back(&tensor);
    }
  }

  const std::vector<Status> results = OnThreads(n, [&](int g) -> Status {
    const Replica& replica = replicas[g];
    TOWER_RETURN_IF_ERROR(
        replica.ops->AllReduce(replica.local, roots[g], AllReduceOptions::Tree(parts[g])));
    return replica.ops->FinishReductions(replica.local);
  });
  for (int g = 0; g < n; ++g) ASSERT_TRUE(results[g].ok()) << "replica " << g << ": " << results[g];

  // The host's answer, and what it must differ from.
  std::vector<HeldNode> held;
  std::vector<TreeNode> all_nodes;
  for (int g = 0; g < n; ++g) {
    for (size_t k = 0; k < replicas[g].nodes.size(); ++k) all_nodes.push_back(replicas[g].nodes[k]);
  }
  const TreeNode root{0, num_leaves};
  StatusOr<SumPlan> plan = PlanSums(num_leaves, all_nodes, Span<const TreeNode>(&root, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (size_t t = 0; t < sizes.size(); ++t) {
    held.clear();
    std::vector<const float*> inputs;
    for (int g = 0; g < n; ++g) {
      for (size_t k = 0; k < replicas[g].nodes.size(); ++k) {
        held.push_back({replicas[g].nodes[k], &host[g][k][t]});
        inputs.push_back(host[g][k][t].data());
      }
    }
    const std::vector<float> expected = TreeValue(held, 0, num_leaves);
    // RunSumPlan (the CPU paths' executor) agrees with the restated tree.
    std::vector<float> executed(expected.size());
    float* out = executed.data();
    RunSumPlan(*plan, inputs.data(), &out, 1, 0, sizes[t]);
    ASSERT_TRUE(SameBits(executed, expected))
        << "RunSumPlan: " << FirstDifference(executed, expected);
    // The values tell the tree from a left-to-right sum over the partial sums (the order a
    // plain all-reduce would take), unless the tree is itself that order here.
    if (sizes[t] >= 64 && TreeExpression(held, 0, num_leaves) != LeftToRight(held)) {
      std::vector<float> serial = *held[0].values;
      for (size_t h = 1; h < held.size(); ++h) {
        for (size_t i = 0; i < serial.size(); ++i) serial[i] = serial[i] + (*held[h].values)[i];
      }
      EXPECT_FALSE(SameBits(serial, expected))
          << "test values too tame: a left-to-right sum gives the tree's bits";
    }
    for (int g = 0; g < n; ++g) {
      StatusOr<std::vector<float>> got = roots[g][t]->ToHost();
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(SameBits(*got, expected))
          << replicas[g].ops->name() << ": replica " << g << " tensor " << t << ": "
          << FirstDifference(*got, expected);
    }
  }
}

// Replica g of n holds virtual shards ReplicaRows(num_leaves, n, g) (as in training) and
// passes their largest subtrees.
std::vector<TreeNode> Cover(int num_leaves, int n, int g) {
  const RowRange rows = ReplicaRows(num_leaves, n, g);
  return CoverNodes(num_leaves, static_cast<int>(rows.first), static_cast<int>(rows.end()));
}

// Several tensors (an empty one among them), sizes not multiples of a block.
const std::vector<std::vector<int64_t>> kSizeSets = {{1}, {1023}, {5, 0, 70001}, {1 << 18}};
// 8: a perfect tree; 6 and 13: uneven splits, replicas holding 1–3 subtrees.
const std::vector<int> kLeafCounts = {8, 6, 13};

std::vector<Replica> Local(CrossDeviceOps& ops, const std::vector<Device*>& devices,
                           int num_leaves) {
  const int n = static_cast<int>(devices.size());
  std::vector<Replica> replicas(n);
  for (int r = 0; r < n; ++r) replicas[r] = {&ops, r, devices[r], Cover(num_leaves, n, r)};
  return replicas;
}

TEST(TreeAllReduceTest, SameCardGivesTheHostTreesBitsOnOneToFourVirtualGpus) {
  for (int n : {1, 2, 3, 4}) {
    auto context = RealGpuContext(n);
    if (context == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
    std::vector<Device*> gpus = *context->Devices("GPU");
    gpus.resize(n);  // card 0's logical GPUs
    auto ops = MakeSameCardAllReduce(gpus, ReplicaNames(gpus), kTimeout, false);
    ASSERT_TRUE(ops.ok()) << ops.status();
    for (int leaves : kLeafCounts) {
      for (const auto& sizes : kSizeSets) {
        CheckTree(Local(**ops, gpus, leaves), leaves, sizes,
                  "same-card, " + std::to_string(n) + " virtual GPUs");
      }
    }
  }
}

TEST(TreeAllReduceTest, SameCardTakesAnyTilingOfTheLeaves) {
  // Not only the cover of ReplicaRows: replica 1 passes its leaves one by one (the kernel
  // forms [2,4) and [4,6) itself), replica 2 holds one leaf, replica 0 the rest of [0,8).
  auto context = RealGpuContext(3);
  if (context == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  std::vector<Device*> gpus = *context->Devices("GPU");
  gpus.resize(3);
  auto ops = MakeSameCardAllReduce(gpus, ReplicaNames(gpus), kTimeout, false);
  ASSERT_TRUE(ops.ok()) << ops.status();
  std::vector<Replica> replicas = {
      {ops->get(), 0, gpus[0], {{0, 2}}},
      {ops->get(), 1, gpus[1], {{2, 3}, {3, 4}, {4, 5}, {5, 6}}},
      {ops->get(), 2, gpus[2], {{6, 7}, {7, 8}}},
  };
  for (const auto& sizes : kSizeSets) CheckTree(replicas, 8, sizes, "same-card, any tiling");
}

TEST(TreeAllReduceTest, NcclGivesTheHostTreesBitsOnOneToFourCards) {
  for (int n : {1, 2, 3, 4}) {
    auto context = RealGpuContext(0);
    if (context == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
    std::vector<Device*> gpus = *context->Devices("GPU");
    if (static_cast<int>(gpus.size()) < n) {
      GTEST_SKIP() << n << " NCCL ranks need " << n << " cards; this machine has " << gpus.size();
    }
    gpus.resize(n);
    auto ops = MakeNcclAllReduce(gpus, ReplicaNames(gpus), kTimeout);
    ASSERT_TRUE(ops.ok()) << ops.status();
    for (int leaves : kLeafCounts) {
      for (const auto& sizes : kSizeSets) {
        CheckTree(Local(**ops, gpus, leaves), leaves, sizes,
                  "NCCL, " + std::to_string(n) + " GPUs");
      }
    }
  }
}

TEST(TreeAllReduceTest, NcclAcrossProcessesGivesTheHostTreesBits) {
  auto context = RealGpuContext(0);
  if (context == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  std::vector<Device*> gpus = *context->Devices("GPU");
  if (gpus.size() < 4) GTEST_SKIP() << "needs 4 cards; this machine has " << gpus.size();
  // 2 workers × 2 GPUs (global replicas 0–3), then 3 workers × 1 GPU.
  for (const std::vector<std::vector<Device*>>& layout :
       std::vector<std::vector<std::vector<Device*>>>{{{gpus[0], gpus[1]}, {gpus[2], gpus[3]}},
                                                      {{gpus[0]}, {gpus[1]}, {gpus[2]}}}) {
    std::vector<NcclWorker> workers = MakeNcclWorkers(layout, kTimeout);
    for (const NcclWorker& worker : workers) ASSERT_TRUE(worker.status.ok()) << worker.status;
    int world = 0;
    for (const auto& local : layout) world += static_cast<int>(local.size());
    for (int leaves : kLeafCounts) {
      std::vector<Replica> replicas;
      for (size_t w = 0; w < layout.size(); ++w) {
        for (size_t r = 0; r < layout[w].size(); ++r) {
          replicas.push_back({workers[w].ops.get(), static_cast<int>(r), layout[w][r],
                              Cover(leaves, world, static_cast<int>(replicas.size()))});
        }
      }
      for (const auto& sizes : {kSizeSets[1], kSizeSets[2]}) {
        CheckTree(replicas, leaves, sizes,
                  "NCCL, " + std::to_string(layout.size()) + " processes of " +
                      std::to_string(layout[0].size()) + " GPUs");
      }
    }
  }
}

// ---- Mismatches: every replica reports the same error; nothing hangs; usable afterwards.

struct BadCall {
  std::string name;
  std::vector<PartialSums> parts;
  std::vector<std::vector<Tensor*>> roots;
  std::string expected;  // in every replica's error
};

void ExpectRefusedEverywhere(CrossDeviceOps& ops, BadCall& call) {
  const int n = static_cast<int>(call.parts.size());
  const std::vector<Status> results = OnThreads(n, [&](int r) {
    return ops.AllReduce(r, call.roots[r], AllReduceOptions::Tree(call.parts[r]));
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(IsInvalidArgument(results[r])) << call.name << ", replica " << r << ": "
                                               << results[r];
    EXPECT_THAT(results[r].message(), HasSubstr(call.expected)) << call.name << ", replica " << r;
    EXPECT_EQ(results[r].message(), results[0].message()) << call.name << ": the same error";
  }
}

TEST(TreeAllReduceTest, SameCardMismatchesAreReportedOnEveryReplica) {
  auto context = RealGpuContext(2);
  if (context == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  std::vector<Device*> gpus = *context->Devices("GPU");
  gpus.resize(2);
  auto ops = MakeSameCardAllReduce(gpus, ReplicaNames(gpus), kTimeout, false);
  ASSERT_TRUE(ops.ok()) << ops.status();
  Tensor a = *Tensor::Zeros(gpus[0], Shape{4});
  Tensor b = *Tensor::Zeros(gpus[1], Shape{4});
  Tensor b5 = *Tensor::Zeros(gpus[1], Shape{5});
  Tensor on_zero = *Tensor::Zeros(gpus[0], Shape{4});
  std::vector<BadCall> calls = {
      {"another shape", {{8, {{0, 4}}, {{&a}}}, {8, {{4, 8}}, {{&b5}}}}, {{&a}, {&b5}},
       "float32[5]"},
      {"a missing leaf", {{8, {{0, 4}}, {{&a}}}, {8, {{5, 6}}, {{&b}}}}, {{&a}, {&b}},
       "nobody holds leaf 4"},
      {"another device", {{8, {{0, 4}}, {{&a}}}, {8, {{4, 8}}, {{&on_zero}}}}, {{&a}, {&b}},
       "not on the replica's own device"},
  };
  // More partial sums than one launch takes: 70 single leaves of 100 from replica 0.
  std::vector<Tensor> leaves;
  for (int leaf = 0; leaf < 70; ++leaf) leaves.push_back(*Tensor::Zeros(gpus[0], Shape{4}));
  PartialSums many{100, {}, {}};
  for (int leaf = 0; leaf < 70; ++leaf) {
    many.nodes.push_back({leaf, leaf + 1});
    many.values.push_back({&leaves[leaf]});
  }
  PartialSums rest{100, CoverNodes(100, 70, 100), {}};
  std::vector<Tensor> rest_values;
  for (size_t k = 0; k < rest.nodes.size(); ++k) {
    rest_values.push_back(*Tensor::Zeros(gpus[1], Shape{4}));
  }
  for (Tensor& tensor : rest_values) rest.values.push_back({&tensor});
  calls.push_back({"too many partial sums", {many, rest}, {{&a}, {&b}}, "at most 64 partial sums"});
  for (BadCall& call : calls) ExpectRefusedEverywhere(**ops, call);
  // A refused call leaves nothing behind (no abort, no Reset needed).
  CheckTree(Local(**ops, gpus, 8), 8, {1023}, "same-card after the mismatches");
}

TEST(TreeAllReduceTest, NcclMismatchesAreReportedOnEveryReplica) {
  auto context = RealGpuContext(0);
  if (context == nullptr) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
  std::vector<Device*> gpus = *context->Devices("GPU");
  if (gpus.size() < 2) GTEST_SKIP() << "needs 2 cards; this machine has " << gpus.size();
  gpus.resize(2);
  auto ops = MakeNcclAllReduce(gpus, ReplicaNames(gpus), kTimeout);
  ASSERT_TRUE(ops.ok()) << ops.status();
  Tensor a = *Tensor::Zeros(gpus[0], Shape{4});
  Tensor a2 = *Tensor::Zeros(gpus[0], Shape{4});
  Tensor b = *Tensor::Zeros(gpus[1], Shape{4});
  Tensor b5 = *Tensor::Zeros(gpus[1], Shape{5});
  Tensor on_zero = *Tensor::Zeros(gpus[0], Shape{4});
  std::vector<BadCall> calls = {
      // The gather's sizes would differ between ranks: refused before it is launched.
      {"another shape", {{8, {{0, 4}}, {{&a}}}, {8, {{4, 8}}, {{&b5}}}}, {{&a}, {&b5}},
       "float32[5]"},
      // Rank 0 holds ReplicaRows(8, 2, 0) = [0, 4): its sum, not two halves.
      {"other subtrees", {{8, {{0, 2}, {2, 4}}, {{&a}, {&a2}}}, {8, {{4, 8}}, {{&b}}}},
       {{&a}, {&b}},
       "holds virtual shards ReplicaRows(8, 2, 0) whose subtrees are {leaves [0, 4)}"},
      {"another device", {{8, {{0, 4}}, {{&a}}}, {8, {{4, 8}}, {{&on_zero}}}}, {{&a}, {&b}},
       "not on the replica's own device"},
  };
  for (BadCall& call : calls) ExpectRefusedEverywhere(**ops, call);
  CheckTree(Local(**ops, gpus, 8), 8, {1023}, "NCCL after the mismatches");
}

}  // namespace
}  // namespace tower
