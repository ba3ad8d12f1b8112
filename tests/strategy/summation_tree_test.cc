// The summation tree of deterministic mode: its shape in closed form, the plans' refusals,
// and RunSumPlan against an independent recursive statement of the tree, for every way of
// spreading the leaves over replicas (and over processes of replicas, as MPI does).
#include "strategy/collectives/summation_tree.h"

#include <cmath>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strategy/step/distribution.h"

namespace tower {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The reference: the sum over leaves [a, b) splits after the largest power of two below
// b − a, found from the highest set bit of b − a − 1 (the code under test loops instead).
float Reference(const std::vector<float>& leaf, int a, int b) {
  if (b - a == 1) return leaf[a];
  const int p = 1 << (31 - __builtin_clz(static_cast<unsigned>(b - a - 1)));
  return Reference(leaf, a, a + p) + Reference(leaf, a + p, b);
}

std::vector<TreeNode> Nodes(std::initializer_list<std::pair<int, int>> ranges) {
  std::vector<TreeNode> nodes;
  for (const auto& [first, end] : ranges) nodes.push_back({first, end});
  return nodes;
}

TEST(SummationTreeTest, CoverNodesInClosedForm) {
  // 8 leaves over 3 replicas: [0,3), [3,6), [6,8).
  EXPECT_EQ(CoverNodes(8, 0, 3), Nodes({{0, 2}, {2, 3}}));
  EXPECT_EQ(CoverNodes(8, 3, 6), Nodes({{3, 4}, {4, 6}}));
  EXPECT_EQ(CoverNodes(8, 6, 8), Nodes({{6, 8}}));
  EXPECT_EQ(CoverNodes(8, 0, 8), Nodes({{0, 8}}));
  EXPECT_EQ(CoverNodes(8, 1, 7), Nodes({{1, 2}, {2, 4}, {4, 6}, {6, 7}}));
  // 6 leaves: the root splits into [0,4) and [4,6).
  EXPECT_EQ(CoverNodes(6, 2, 6), Nodes({{2, 4}, {4, 6}}));
  EXPECT_EQ(TreeSplit({0, 6}), 4);
  EXPECT_EQ(TreeSplit({0, 3}), 2);
  EXPECT_TRUE(IsTreeNode(6, {4, 6}));
  EXPECT_FALSE(IsTreeNode(6, {2, 6}));
  EXPECT_TRUE(CoverNodes(8, 3, 3).empty());
}

TEST(SummationTreeTest, PlansRefuseWhatTheTreeCannotUse) {
  EXPECT_THAT(PlanSums(8, Nodes({{0, 4}, {5, 8}}), Nodes({{0, 8}})).status().message(),
              HasSubstr("not a node"));  // [5, 8) is not a node of the tree
  EXPECT_THAT(PlanSums(8, Nodes({{0, 4}, {4, 6}, {7, 8}}), Nodes({{0, 8}})).status().message(),
              HasSubstr("nobody holds leaf 6"));
  EXPECT_THAT(PlanSums(8, Nodes({{0, 4}, {2, 3}}), Nodes({{0, 8}})).status().message(),
              HasSubstr("out of leaf order or overlapping"));
  EXPECT_THAT(PlanSums(8, Nodes({{0, 4}, {4, 8}}), Nodes({{0, 2}})).status().message(),
              HasSubstr("straddles"));
  EXPECT_THAT(PlanSums(8, Nodes({{0, 8}}), Nodes({{1, 3}})).status().message(),
              HasSubstr("not a node"));
}

TEST(SummationTreeTest, TheTreeKeepsWhatALeftToRightSumLoses) {
  // 2^24 then seven ones: left to right every one is rounded away; the tree adds the ones
  // in pairs first and keeps six of them (2^24 + 1 still rounds to 2^24).
  std::vector<float> leaf(8, 1.0f);
  leaf[0] = 16777216.0f;
  float left_to_right = 0;
  for (float value : leaf) left_to_right += value;
  EXPECT_EQ(left_to_right, 16777216.0f);
  StatusOr<SumPlan> plan = PlanSums(8, Nodes({{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6},
                                              {6, 7}, {7, 8}}),
                                    Nodes({{0, 8}}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<const float*> inputs;
  for (const float& value : leaf) inputs.push_back(&value);
  float root = 0;
  float* out = &root;
  RunSumPlan(*plan, inputs.data(), &out, 1, 0, 1);
  EXPECT_EQ(root, 16777222.0f);
}

// Every leaf count up to 24 and every replica count up to it: the replicas' largest
// subtrees (as a replica forms them), combined by a plan, give the reference's root bitwise,
// for leaves of wildly different magnitudes (where the order of additions shows).
TEST(SummationTreeTest, EverySplitOverReplicasGivesTheReferenceRoot) {
  std::mt19937 random(17);
  std::uniform_real_distribution<float> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-20, 20);
  constexpr int kElements = 300;  // more than one block of RunSumPlan
  for (int leaves = 1; leaves <= 24; ++leaves) {
    std::vector<std::vector<float>> leaf(kElements, std::vector<float>(leaves));
    for (auto& row : leaf) {
      for (float& value : row) value = std::ldexp(mantissa(random), exponent(random));
    }
    for (int replicas = 1; replicas <= leaves; ++replicas) {
      // Replica r's subtrees, evaluated by the reference, element-major per node.
      std::vector<TreeNode> nodes;
      std::vector<std::vector<float>> values;
      for (int r = 0; r < replicas; ++r) {
        const RowRange mine = ReplicaRows(leaves, replicas, r);
        for (const TreeNode& node :
             CoverNodes(leaves, static_cast<int>(mine.first), static_cast<int>(mine.end()))) {
          nodes.push_back(node);
          values.emplace_back(kElements);
          for (int i = 0; i < kElements; ++i) {
            values.back()[i] = Reference(leaf[i], node.first, node.end);
          }
        }
      }
      StatusOr<SumPlan> plan = PlanSums(leaves, nodes, Nodes({{0, leaves}}));
      ASSERT_TRUE(plan.ok()) << plan.status();
      std::vector<const float*> inputs;
      for (const auto& node : values) inputs.push_back(node.data());
      // Two copies of the root, one written over the first input (a replica's root may be
      // its own partial sum).
      std::vector<float> aliased = values[0];
      inputs[0] = aliased.data();
      std::vector<float> root(kElements);
      float* outputs[] = {root.data(), aliased.data()};
      RunSumPlan(*plan, inputs.data(), outputs, 2, 0, kElements);
      for (int i = 0; i < kElements; ++i) {
        const float expected = Reference(leaf[i], 0, leaves);
        ASSERT_EQ(root[i], expected) << leaves << " leaves, " << replicas << " replicas, [" << i << "]";
        ASSERT_EQ(aliased[i], expected);
      }
    }
  }
}

// Two levels, as across MPI workers: each worker forms the largest subtrees of its replicas'
// leaves from their partial sums, then the workers' subtrees make the root.
TEST(SummationTreeTest, TwoLevelsGiveTheSameRoot) {
  const int leaves = 8;
  std::vector<float> leaf = {1e8f, 1.5f, -3.25f, 7e-3f, 2.0f, -1e8f, 0.125f, 3.0f};
  for (const auto& [workers, local] : std::vector<std::pair<int, int>>{{2, 2}, {4, 1}, {2, 3}}) {
    const int replicas = workers * local;
    std::vector<TreeNode> worker_nodes;
    std::vector<float> worker_values;
    for (int w = 0; w < workers; ++w) {
      std::vector<TreeNode> nodes;
      std::vector<float> values;
      for (int r = w * local; r < (w + 1) * local; ++r) {
        const RowRange mine = ReplicaRows(leaves, replicas, r);
        for (const TreeNode& node :
             CoverNodes(leaves, static_cast<int>(mine.first), static_cast<int>(mine.end()))) {
          nodes.push_back(node);
          values.push_back(Reference(leaf, node.first, node.end));
        }
      }
      const std::vector<TreeNode> cover =
          CoverNodes(leaves, nodes.front().first, nodes.back().end);
      StatusOr<SumPlan> plan = PlanSums(leaves, nodes, cover);
      ASSERT_TRUE(plan.ok()) << plan.status();
      std::vector<const float*> inputs;
      for (const float& value : values) inputs.push_back(&value);
      std::vector<float> out(cover.size());
      std::vector<float*> outputs;
      for (float& value : out) outputs.push_back(&value);
      RunSumPlan(*plan, inputs.data(), outputs.data(), 1, 0, 1);
      worker_nodes.insert(worker_nodes.end(), cover.begin(), cover.end());
      worker_values.insert(worker_values.end(), out.begin(), out.end());
    }
    StatusOr<SumPlan> plan = PlanSums(leaves, worker_nodes, Nodes({{0, leaves}}));
    ASSERT_TRUE(plan.ok()) << plan.status();
    std::vector<const float*> inputs;
    for (const float& value : worker_values) inputs.push_back(&value);
    float root = 0;
    float* out = &root;
    RunSumPlan(*plan, inputs.data(), &out, 1, 0, 1);
    EXPECT_EQ(root, Reference(leaf, 0, leaves)) << workers << " workers x " << local;
  }
}

}  // namespace
}  // namespace tower
