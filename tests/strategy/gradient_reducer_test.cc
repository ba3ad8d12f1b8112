// Gradient buckets: the plan (closed form), the calls a step makes on the cross-device ops,
// and the errors of a step that does not keep its announcement.
#include "strategy/reducers/gradient_reducer.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/context.h"

namespace tower {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records each collective as "reduce:<bytes,...>", a sum with a sink as
// "handover:<first gradient>:<handed>/<tensors>", or "finish".
class RecordingOps : public CrossDeviceOps {
 public:
  std::string name() const override { return "recording"; }
  Status RunAllReduce(int, Span<Tensor* const> tensors, const AllReduceOptions& options) override {
    if (options.tree != nullptr) {
      return UnimplementedError("the bucketed reducer never sums along the tree");
    }
    if (options.sink != nullptr) {
      calls.push_back("handover:" + std::to_string(options.first_gradient) + ":" +
                      std::to_string(options.handed) + "/" + std::to_string(tensors.size()));
      return OkStatus();
    }
    std::string call = "reduce:";
    for (size_t i = 0; i < tensors.size(); ++i) {
      call += (i ? "," : "") + std::to_string(tensors[i]->bytes());
    }
    calls.push_back(call);
    return OkStatus();
  }
  // Hands sums over where can_hand_over says; never folds.
  Status CheckSupported(const AllReduceOptions& options) const override {
    if (can_hand_over && options.folded == 0) return OkStatus();
    return CrossDeviceOps::CheckSupported(options);
  }
  Status Broadcast(int, Span<Tensor* const>) override { return OkStatus(); }
  Status FinishReductions(int) override {
    calls.push_back("finish");
    return OkStatus();
  }
  void Abort(const Status&) override {}
  void Reset() override {}
  std::vector<std::string> calls;
  bool can_hand_over = false;
};

// Takes nothing: the recording ops never call it.
class NoSink : public SummedGradientSink {
 public:
  void Consume(size_t, int64_t, int64_t, const float*) override {}
};

TEST(PlanBucketsTest, ClosesABucketOnceItHoldsTheCap) {
  const std::vector<int64_t> bytes = {64, 4, 2048, 64, 32768, 128};
  EXPECT_THAT(PlanBuckets(bytes, 25ll << 20), ElementsAre(6));
  EXPECT_THAT(PlanBuckets(bytes, 1), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(PlanBuckets(bytes, 2048), ElementsAre(3, 5, 6));
  EXPECT_THAT(PlanBuckets(bytes, 68), ElementsAre(2, 3, 5, 6));
  EXPECT_TRUE(PlanBuckets({}, 1).empty());
}

// The step of a Dense(32)-Dense(16)-Dense(1) model on 256 features: gradient bytes in
// backward order, then the loss (4 bytes) with Finish.
std::vector<std::string> Step(int64_t bucket_bytes, bool hand_over = false) {
  Device* cpu = *Context::Default().DefaultDevice();
  const std::vector<int64_t> bytes = {64, 4, 2048, 64, 32768, 128};
  std::vector<Tensor> grads;
  for (int64_t b : bytes) grads.push_back(*Tensor::Zeros(cpu, Shape{b / 4}));
  Tensor loss = *Tensor::Zeros(cpu, Shape{1});
  RecordingOps ops;
  ops.can_hand_over = hand_over;
  BucketedGradientReducer reducer(&ops, 0, bucket_bytes);
  NoSink sink;
  EXPECT_EQ(reducer.HandOverSums(&sink), hand_over);
  for (int step = 0; step < 2; ++step) {  // the plan is reused: the same calls each step
    ops.calls.clear();
    TOWER_CHECK_OK(reducer.Begin(bytes, 0, 1));
    for (Tensor& grad : grads) TOWER_CHECK_OK(reducer.Add(&grad));
    TOWER_CHECK_OK(reducer.Finish({&loss}));
  }
  return ops.calls;
}

TEST(BucketedGradientReducerTest, SumsEachBucketWhenItsLastGradientArrives) {
  // Default 25 MB: everything, with the loss, in one all-reduce after backward.
  EXPECT_THAT(Step(25ll << 20), ElementsAre("reduce:64,4,2048,64,32768,128,4", "finish"));
  // Every gradient fills a bucket: summed as soon as it exists; the last one waits for
  // the loss.
  EXPECT_THAT(Step(1), ElementsAre("reduce:64", "reduce:4", "reduce:2048", "reduce:64",
                                   "reduce:32768", "reduce:128,4", "finish"));
  // 2 KB: the last layer and the middle layer's kernel share a bucket.
  EXPECT_THAT(Step(2048), ElementsAre("reduce:64,4,2048", "reduce:64,32768", "reduce:128,4",
                                      "finish"));
}

// Replicas that share their variables take the sums from the all-reduce: each bucket says
// which gradients (by their index in the announced order) its first tensors are; the loss
// rides in the last bucket and is summed in place.
TEST(BucketedGradientReducerTest, HandsOverEachBucketsGradientsByTheirIndex) {
  EXPECT_THAT(Step(25ll << 20, true), ElementsAre("handover:0:6/7", "finish"));
  EXPECT_THAT(Step(1, true), ElementsAre("handover:0:1/1", "handover:1:1/1", "handover:2:1/1",
                                         "handover:3:1/1", "handover:4:1/1", "handover:5:1/2",
                                         "finish"));
  EXPECT_THAT(Step(2048, true), ElementsAre("handover:0:3/3", "handover:3:2/2",
                                            "handover:5:1/2", "finish"));
  // A path that cannot (Step(…, false) asks too): the sums come back in place.
  EXPECT_THAT(Step(2048, false), ElementsAre("reduce:64,4,2048", "reduce:64,32768",
                                             "reduce:128,4", "finish"));
}

TEST(BucketedGradientReducerTest, AStepThatBreaksItsAnnouncementFails) {
  Device* cpu = *Context::Default().DefaultDevice();
  RecordingOps ops;
  BucketedGradientReducer reducer(&ops, 0, 1);
  Tensor small = *Tensor::Zeros(cpu, Shape{1});
  Tensor big = *Tensor::Zeros(cpu, Shape{2});
  EXPECT_THAT(reducer.Add(&small).message(), HasSubstr("Add before Begin"));
  const std::vector<int64_t> bytes = {4, 8};
  TOWER_CHECK_OK(reducer.Begin(bytes, 0, 1));
  EXPECT_THAT(reducer.Add(&big).message(), HasSubstr("gradient 1 has 8 bytes, announced 4"));
  TOWER_CHECK_OK(reducer.Begin(bytes, 0, 1));
  TOWER_CHECK_OK(reducer.Add(&small));
  EXPECT_THAT(reducer.Finish({}).message(), HasSubstr("after 1 of 2 announced gradients"));
  TOWER_CHECK_OK(reducer.Begin(bytes, 0, 1));
  TOWER_CHECK_OK(reducer.Add(&small));
  TOWER_CHECK_OK(reducer.Add(&big));
  EXPECT_THAT(reducer.Add(&big).message(), HasSubstr("gradient 3 of a pass announced with 2"));
}

}  // namespace
}  // namespace tower
