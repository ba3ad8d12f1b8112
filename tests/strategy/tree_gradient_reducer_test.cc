// Deterministic mode's reducer: the partial sums a replica hands to the tree all-reduce after
// its passes (which subtrees, holding which sums), the buckets of the last pass, the roots'
// destination, and the errors of steps that do not keep the pass structure.
#include "strategy/reducers/tree_gradient_reducer.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/context.h"

namespace tower {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records each tree all-reduce as "tree:<nodes>:<tensor count>" with the subtrees' values
// (first element of each), and writes 1000 + the sum of the subtrees' first elements into
// every root element (a stand-in for the other replicas' contributions).
class RecordingTreeOps : public CrossDeviceOps {
 public:
  std::string name() const override { return "recording"; }
  Status RunAllReduce(int, Span<Tensor* const> roots, const AllReduceOptions& options) override {
    if (options.tree == nullptr) {
      return InternalError("deterministic mode must not use the plain all-reduce");
    }
    const PartialSums& mine = *options.tree;
    std::string call = "tree:";
    for (const TreeNode& node : mine.nodes) call += node.ToString() + ";";
    call += std::to_string(roots.size());
    calls.push_back(call);
    for (size_t t = 0; t < roots.size(); ++t) {
      std::vector<float> firsts;
      float sum = 1000;
      for (const auto& node : mine.values) {
        firsts.push_back((*node[t]->ToHost())[0]);
        sum += firsts.back();
      }
      values.push_back(firsts);
      std::vector<float> root(roots[t]->num_elements(), sum);
      TOWER_RETURN_IF_ERROR(roots[t]->CopyFrom(*Tensor::FromHost(roots[t]->device(),
                                                                 roots[t]->shape(), root)));
    }
    return OkStatus();
  }
  Status Broadcast(int, Span<Tensor* const>) override { return OkStatus(); }
  Status FinishReductions(int) override {
    calls.push_back("finish");
    return OkStatus();
  }
  void Abort(const Status&) override {}
  void Reset() override {}
  std::vector<std::string> calls;
  std::vector<std::vector<float>> values;  // per root tensor: its subtrees' first elements
};

Tensor Filled(float value, int64_t n) {
  Device* cpu = *Context::Default().DefaultDevice();
  return *Tensor::FromHost(cpu, Shape{n}, std::vector<float>(static_cast<size_t>(n), value));
}

// One step of a replica owning leaves [0, 3) of 8: three passes; pass p's gradients hold
// 10^p (gradient 0) and 2·10^p (gradient 1), its loss 5·10^p.
struct StepResult {
  std::vector<std::string> calls;
  std::vector<std::vector<float>> values;
  std::vector<float> gradient0, gradient1, loss;
};

StepResult Step(int64_t bucket_bytes) {
  RecordingTreeOps ops;
  TreeGradientReducer reducer(&ops, 0, bucket_bytes, 8, TreeNode{0, 3});
  const std::vector<int64_t> bytes = {16, 8};
  std::vector<Tensor> gradients;
  Tensor loss;
  for (int pass = 0; pass < 3; ++pass) {
    const float scale = pass == 0 ? 1 : pass == 1 ? 10 : 100;
    gradients = {Filled(scale, 4), Filled(2 * scale, 2)};  // new tensors each pass
    loss = Filled(5 * scale, 1);
    TOWER_CHECK_OK(reducer.Begin(bytes, pass, 3));
    for (Tensor& gradient : gradients) TOWER_CHECK_OK(reducer.Add(&gradient));
    TOWER_CHECK_OK(reducer.Finish({&loss}));
  }
  return {ops.calls, ops.values, *gradients[0].ToHost(), *gradients[1].ToHost(),
          *loss.ToHost()};
}

TEST(TreeGradientReducerTest, HandsOverTheLargestSubtreesAndGetsTheRootsInTheLastPass) {
  // One bucket: the subtrees [0,2) (passes 0 and 1 added) and leaf 2 of both gradients and
  // the loss, in one call after the last pass.
  StepResult one = Step(25 << 20);
  EXPECT_THAT(one.calls, ElementsAre("tree:leaves [0, 2);leaf 2;3", "finish"));
  EXPECT_THAT(one.values, ElementsAre(ElementsAre(11, 100), ElementsAre(22, 200),
                                      ElementsAre(55, 500)));
  // The roots land in the last pass's tensors.
  EXPECT_THAT(one.gradient0, ElementsAre(1111, 1111, 1111, 1111));
  EXPECT_THAT(one.gradient1, ElementsAre(1222, 1222));
  EXPECT_THAT(one.loss, ElementsAre(1555));
  // Buckets of one gradient: the first is sent as soon as the last pass adds it, the other
  // with the loss; the same sums.
  StepResult many = Step(1);
  EXPECT_THAT(many.calls, ElementsAre("tree:leaves [0, 2);leaf 2;1",
                                      "tree:leaves [0, 2);leaf 2;2", "finish"));
  EXPECT_EQ(many.values, one.values);
  EXPECT_EQ(many.gradient0, one.gradient0);
}

TEST(TreeGradientReducerTest, AStepMustRunOnePassPerVirtualShard) {
  RecordingTreeOps ops;
  TreeGradientReducer reducer(&ops, 0, 1 << 20, 8, TreeNode{2, 5});
  const std::vector<int64_t> bytes = {4};
  Status status = reducer.Begin(bytes, 0, 1);  // a custom training loop's single pass
  EXPECT_TRUE(IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("computes 3 virtual shards per step"));
  EXPECT_THAT(status.message(), HasSubstr("leaves [2, 5) of 8"));
  TOWER_CHECK_OK(reducer.Begin(bytes, 0, 3));
  Tensor gradient = Filled(1, 1);
  TOWER_CHECK_OK(reducer.Add(&gradient));
  TOWER_CHECK_OK(reducer.Finish({}));
  status = reducer.Begin(bytes, 2, 3);  // pass 1 skipped
  EXPECT_THAT(status.message(), HasSubstr("pass 2 began after pass 0"));
  status = reducer.Begin({8}, 1, 3);
  EXPECT_THAT(status.message(), HasSubstr("other gradient sizes"));
  // A new step starts over at pass 0 whatever happened before.
  for (int pass = 0; pass < 3; ++pass) {
    TOWER_CHECK_OK(reducer.Begin(bytes, pass, 3));
    TOWER_CHECK_OK(reducer.Add(&gradient));
    TOWER_CHECK_OK(reducer.Finish({}));
  }
  EXPECT_EQ(ops.calls.back(), "finish");
}

}  // namespace
}  // namespace tower
