// The sparse cross-entropy ops on a GPU wait for the device only when they must report bad
// labels themselves: labels the caller has checked (the model checks them on the host before
// the upload) cost no host synchronisation, so the training step's forward and backward are
// queued without a stall. Unchecked labels are still checked, naming the row.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cudaemu/testing.h"
#include "device/context.h"
#include "ops/nn_ops.h"

namespace tower {
namespace {

TEST(LabelCheckTest, CheckedLabelsCostNoWaitUncheckedOnesAreStillChecked) {
  Device* gpu = *Context::Global().FindDevice("/GPU:0");
  Tensor logits = *Tensor::FromHost(gpu, Shape{3, 4}, std::vector<float>(12, 0.5f));
  Tensor labels = *Tensor::FromHostInt32(gpu, Shape{3}, {0, 3, 1});
  Tensor bad = *Tensor::FromHostInt32(gpu, Shape{3}, {0, 4, 1});
  for (bool grad : {false, true}) {
    auto run = [&](const Tensor& l, bool checked) {
      return grad ? ops::SparseSoftmaxCrossEntropyGrad(logits, l, -1, checked)
                  : ops::SparseSoftmaxCrossEntropy(logits, l, -1, checked);
    };
    int64_t waits = cudaemu::testing::HostWaits();
    ASSERT_TRUE(run(labels, /*checked=*/true).ok());
    EXPECT_EQ(cudaemu::testing::HostWaits(), waits) << "grad " << grad;
    waits = cudaemu::testing::HostWaits();
    ASSERT_TRUE(run(labels, /*checked=*/false).ok());
    EXPECT_GT(cudaemu::testing::HostWaits(), waits) << "grad " << grad;
    const StatusOr<Tensor> refused = run(bad, /*checked=*/false);
    EXPECT_TRUE(IsInvalidArgument(refused.status())) << refused.status();
    EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("label 4 at row 1"));
  }
}

}  // namespace
}  // namespace tower
