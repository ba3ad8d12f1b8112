// The examples a new user runs, end to end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/run_program.h"

namespace {

using ::testing::HasSubstr;
using tower::testing::RunProgram;

TEST(ExamplesTest, LinearRegressionFindsThreeAndTwo) {
  for (const char* args : {"", "--replicas=2", "--replicas=3 --epochs=3"}) {
    const auto out = RunProgram("examples/linear_regression", args);
    ASSERT_EQ(out.exit_code, 0) << args << "\n" << out.text;
    EXPECT_THAT(out.text, HasSubstr("w=3.00 b=2.00")) << args;
    EXPECT_THAT(out.text, HasSubstr(" - loss: ")) << args;
  }
  const auto replicated = RunProgram("examples/linear_regression", "--replicas=2");
  EXPECT_THAT(replicated.text, HasSubstr("Using MirroredStrategy with devices (/job:localhost/replica:0/task:0/device:CPU:0, /job:localhost/replica:0/task:0/device:CPU:1)"));
  EXPECT_EQ(RunProgram("examples/linear_regression", "--replicas=0").exit_code, 1);
  EXPECT_EQ(RunProgram("examples/linear_regression", "--epochs=x").exit_code, 2);
}

TEST(ExamplesTest, TowerTrainingAveragesTowersOnTheCpu) {
  const auto out = RunProgram("examples/tower_training", "--towers=2 --steps=60");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("2 towers: /job:localhost/replica:0/task:0/device:CPU:0 /job:localhost/replica:0/task:0/device:CPU:1"));
  EXPECT_THAT(out.text, HasSubstr("w=3.00 b=2.00"));
}

TEST(ExamplesTest, ManualReplicationAddsPerDeviceProductsOnTheCpu) {
  const auto out = RunProgram("examples/manual_replication", "--virtual-cpus=3");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:2"));
  EXPECT_THAT(out.text, HasSubstr("Executing op AddN in device /job:localhost/replica:0/task:0/device:CPU:0"));
  EXPECT_THAT(out.text, HasSubstr("[[ 66.  84.]\n [147. 192.]]"));  // 3 × [[22 28] [49 64]]
}

TEST(ExamplesTest, VirtualGpusTrainOnTwoLogicalDevices) {
  const auto out = RunProgram("examples/virtual_gpus", "--steps=10 --memory-limit=256");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Using MirroredStrategy with devices ("));
  EXPECT_THAT(out.text, HasSubstr("of its 256 MiB limit"));
  EXPECT_THAT(out.text, ::testing::AnyOf(HasSubstr("1 Physical GPU, 2 Logical GPUs"),
                                         HasSubstr("0 Physical GPU, 2 Logical CPUs")));
}

}  // namespace
