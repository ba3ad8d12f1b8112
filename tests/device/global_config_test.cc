// tower::config on the process's global context: one test, because initialisation happens
// once per process (as in TensorFlow), and the test walks through that life cycle.
#include "device/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tower {
namespace {

using ::testing::ElementsAre;
using ::testing::StartsWith;

TEST(GlobalConfigTest, ConfigureThenInitializeThenRefuseChanges) {
  std::vector<PhysicalDevice> cpus = config::ListPhysicalDevices("CPU");
  ASSERT_EQ(cpus.size(), 1u);
  EXPECT_EQ(cpus[0].ToString(), "PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU')");
  std::vector<PhysicalDevice> gpus = config::ListPhysicalDevices("GPU");

  // Two logical CPUs, the second capped at 32 MiB.
  ASSERT_TRUE(config::SetLogicalDeviceConfiguration(
      cpus[0], {LogicalDeviceConfiguration{}, LogicalDeviceConfiguration{32}}).ok());
  config::SetLogDevicePlacement(true);
  EXPECT_TRUE(config::GetLogDevicePlacement());
  EXPECT_FALSE(config::GetSoftDevicePlacement());

  StatusOr<std::vector<LogicalDevice>> logical = config::ListLogicalDevices("CPU");
  ASSERT_TRUE(logical.ok()) << logical.status();
  ASSERT_EQ(logical->size(), 2u);
  EXPECT_EQ((*logical)[0].name, "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ((*logical)[1].name, "/job:localhost/replica:0/task:0/device:CPU:1");

  StatusOr<AllocatorStats> stats = config::GetMemoryInfo("/CPU:1");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->bytes_limit, 32u << 20);
  EXPECT_TRUE(config::ResetMemoryStats("/CPU:1").ok());

  Status late = config::SetLogicalDeviceConfiguration(cpus[0], {LogicalDeviceConfiguration{}});
  EXPECT_TRUE(IsFailedPrecondition(late));
  EXPECT_THAT(late.message(), StartsWith("Virtual devices cannot be modified after being initialized"));
  // Unchanged configuration is accepted, as in TensorFlow.
  EXPECT_TRUE(config::SetLogicalDeviceConfiguration(
      cpus[0], {LogicalDeviceConfiguration{}, LogicalDeviceConfiguration{32}}).ok());
  if (gpus.empty()) {
    // Hiding GPUs that do not exist changes nothing, so it is allowed even now.
    EXPECT_TRUE(config::SetVisibleDevices({}, "GPU").ok());
  } else {
    Status visible = config::SetVisibleDevices({}, "GPU");
    EXPECT_THAT(visible.message(), StartsWith("Visible devices cannot be modified after being initialized"));
  }
  EXPECT_EQ(config::GetVisibleDevices("CPU").size(), 1u);
}

}  // namespace
}  // namespace tower
