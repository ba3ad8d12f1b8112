// The sparse cross-entropy ops on a GPU wait for the device only when they must report bad
// labels themselves: labels the caller has checked (the model checks them on the host before
// the upload) cost no host synchronisation, so the training step's forward and backward are
// queued without a stall. Unchecked labels are still checked, naming the row (on a card too);
// the waits are counted by the emulation (cudaemu::testing::HostWaits), so that case runs
// only under it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/context.h"
#include "ops/nn_ops.h"
#include "tests/testing/emulation.h"
#include "tests/testing/gpu.h"

#ifdef CUDAEMU
#include <cudaemu/testing.h>
#endif

namespace tower {
namespace {

struct Inputs {
  Tensor logits, labels, bad;
};

Inputs On(Device* gpu) {
  return {*Tensor::FromHost(gpu, Shape{3, 4}, std::vector<float>(12, 0.5f)),
          *Tensor::FromHostInt32(gpu, Shape{3}, {0, 3, 1}),
          *Tensor::FromHostInt32(gpu, Shape{3}, {0, 4, 1})};
}

StatusOr<Tensor> CrossEntropy(const Inputs& in, const Tensor& labels, bool grad, bool checked) {
  return grad ? ops::SparseSoftmaxCrossEntropyGrad(in.logits, labels, -1, checked)
              : ops::SparseSoftmaxCrossEntropy(in.logits, labels, -1, checked);
}

TEST(LabelCheckTest, UncheckedLabelsAreStillCheckedNamingTheRow) {
  StatusOr<Device*> gpu = Context::Global().FindDevice("/GPU:0");
  if (!gpu.ok()) TOWER_SKIP_WITHOUT_GPU(gpu.status());
  const Inputs in = On(*gpu);
  for (bool grad : {false, true}) {
    StatusOr<Tensor> checked = CrossEntropy(in, in.labels, grad, /*checked=*/true);
    ASSERT_TRUE(checked.ok()) << "grad " << grad << ": " << checked.status();
    StatusOr<Tensor> unchecked = CrossEntropy(in, in.labels, grad, /*checked=*/false);
    ASSERT_TRUE(unchecked.ok()) << "grad " << grad << ": " << unchecked.status();
    EXPECT_EQ(*checked->ToHost(), *unchecked->ToHost()) << "grad " << grad;
    const StatusOr<Tensor> refused = CrossEntropy(in, in.bad, grad, /*checked=*/false);
    EXPECT_TRUE(IsInvalidArgument(refused.status())) << refused.status();
    EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("label 4 at row 1"));
  }
}

TEST(LabelCheckTest, CheckedLabelsCostNoWaitUncheckedOnesWait) {
#ifdef CUDAEMU
  Device* gpu = *Context::Global().FindDevice("/GPU:0");
  const Inputs in = On(gpu);
  for (bool grad : {false, true}) {
    int64_t waits = cudaemu::testing::HostWaits();
    ASSERT_TRUE(CrossEntropy(in, in.labels, grad, /*checked=*/true).ok());
    EXPECT_EQ(cudaemu::testing::HostWaits(), waits) << "grad " << grad;
    waits = cudaemu::testing::HostWaits();
    ASSERT_TRUE(CrossEntropy(in, in.labels, grad, /*checked=*/false).ok());
    EXPECT_GT(cudaemu::testing::HostWaits(), waits) << "grad " << grad;
  }
#else
  TOWER_SKIP_NEEDS_EMULATION("count of host waits (cudaemu::testing::HostWaits)");
#endif
}

}  // namespace
}  // namespace tower
