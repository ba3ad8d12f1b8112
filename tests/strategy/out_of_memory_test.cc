// Out of memory inside a logical device's limit, mid-training on 2 replicas: the step fails
// with an error naming the device, the request, the limit and the use; nothing leaks; and
// the same model trains on in the same process once the batch is smaller.
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

TEST(OutOfMemoryTest, NamedAndRetryableWithASmallerBatch) {
  auto context = testing::MakeContextWithFakeGpus({});
  // Two logical CPUs of 16 MiB each.
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0],
      {LogicalDeviceConfiguration{16}, LogicalDeviceConfiguration{16}}));
  ScopedDefaultContext use(*context);
  MirroredStrategyOptions options;
  options.context = context.get();
  auto strategy = std::move(MirroredStrategy::Create(options)).value();
  Sequential model({Dense(256, "relu"), Dense(1)}, 1);
  {
    auto scope = strategy->Scope();
    ASSERT_TRUE(model.Compile(MeanSquaredErrorLoss(), SGD(0.001f, 0.9f)).ok());
  }
  data::SyntheticOptions mlp;
  mlp.name = "mlp";
  mlp.rows = 1 << 15;
  const data::Dataset data = *data::Dataset::Synthetic(mlp);
  // What the model holds before any step: its variables and optimizer slots, per device.
  ASSERT_TRUE(model.Build(256).ok());
  std::vector<uint64_t> held;
  for (Device* device : *context->Devices("CPU")) {
    held.push_back(device->allocator().GetStats().bytes_in_use);
  }
  FitOptions fit;
  fit.verbose = 0;
  fit.max_steps = 2;
  // 32768 rows: 16384 per replica, each [16384, 256] float activation is 16 MiB: too much.
  StatusOr<History> failed = model.Fit(data.Batch(1 << 15), fit);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(IsResourceExhausted(failed.status())) << failed.status();
  const std::string& message = failed.status().message();
  EXPECT_THAT(message, HasSubstr("OOM when allocating"));
  EXPECT_THAT(message, HasSubstr("/job:localhost/replica:0/task:0/device:CPU:"));
  EXPECT_THAT(message, HasSubstr("memory limit 16.0 MiB"));
  EXPECT_THAT(message, HasSubstr("in use"));
  EXPECT_THAT(message, HasSubstr("smaller batch"));
  EXPECT_EQ(model.optimizer()->iterations(), 0) << "no replica may have applied an update";

  // Everything the failed step allocated is back, to the byte: only the variables and
  // slots remain.
  const std::vector<Device*> devices = *context->Devices("CPU");
  for (size_t d = 0; d < devices.size(); ++d) {
    EXPECT_EQ(devices[d]->allocator().GetStats().bytes_in_use, held[d]) << devices[d]->full_name();
  }
  // The same model, the same process, a smaller batch: trains, and both replicas agree.
  StatusOr<History> retried = model.Fit(data.Batch(256), fit);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(model.optimizer()->iterations(), 2);
  for (Variable* variable : model.trainable_variables()) {
    EXPECT_EQ(*variable->value(1).ToHost(), *variable->value(0).ToHost()) << variable->name();
  }
}

}  // namespace
}  // namespace tower
