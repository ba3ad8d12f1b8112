// tower::config's thread settings on the process's global context: one test, because
// initialisation happens once per process (as in TensorFlow), and the test walks through
// that life cycle (global_config_test.cc does the same for the device settings).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/config.h"
#include "device/intra_op.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ThreadingConfigTest, ConfigureThenInitializeThenRefuseChanges) {
  // Defaults: the system picks.
  EXPECT_EQ(config::GetIntraOpParallelismThreads(), 0);
  EXPECT_EQ(config::GetInterOpParallelismThreads(), 0);

  Status negative = config::SetIntraOpParallelismThreads(-2);
  EXPECT_TRUE(IsInvalidArgument(negative));
  EXPECT_THAT(negative.message(), HasSubstr("intra-op parallelism must be 0"));
  negative = config::SetInterOpParallelismThreads(-1);
  EXPECT_TRUE(IsInvalidArgument(negative));
  EXPECT_THAT(negative.message(), HasSubstr("inter-op parallelism must be 0"));

  ASSERT_TRUE(config::SetIntraOpParallelismThreads(3).ok());
  ASSERT_TRUE(config::SetInterOpParallelismThreads(1).ok());
  EXPECT_EQ(config::GetIntraOpParallelismThreads(), 3);
  EXPECT_EQ(config::GetInterOpParallelismThreads(), 1);
  EXPECT_EQ(CurrentIntraOpThreads(), 3);  // code outside any strategy: the setting
  EXPECT_EQ(ResolvedInterOpThreads(), 1);

  ASSERT_TRUE(config::ListLogicalDevices().ok());  // initialises the runtime

  Status intra = config::SetIntraOpParallelismThreads(2);
  EXPECT_TRUE(IsFailedPrecondition(intra));
  EXPECT_THAT(intra.message(),
              StartsWith("Intra op parallelism cannot be modified after initialization."));
  Status inter = config::SetInterOpParallelismThreads(0);
  EXPECT_TRUE(IsFailedPrecondition(inter));
  EXPECT_THAT(inter.message(),
              StartsWith("Inter op parallelism cannot be modified after initialization."));
  // Unchanged values are accepted, as in TensorFlow; the settings stay.
  EXPECT_TRUE(config::SetIntraOpParallelismThreads(3).ok());
  EXPECT_TRUE(config::SetInterOpParallelismThreads(1).ok());
  EXPECT_EQ(config::GetIntraOpParallelismThreads(), 3);
  EXPECT_EQ(config::GetInterOpParallelismThreads(), 1);
}

}  // namespace
}  // namespace tower
