// The examples a new user runs, end to end.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/run_program.h"
#include "tests/testing/tower_cli.h"

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

TEST(ExamplesTest, CustomTrainingLoopOnNReplicasTrainsLikeOne) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  std::vector<std::string> losses;
  for (int replicas : {1, 3, 4}) {
    const std::string path = dir + "/custom_" + std::to_string(replicas) + ".safetensors";
    const auto out = RunProgram("examples/custom_training_loop",
                                "--replicas=" + std::to_string(replicas) + " --save=" + path);
    ASSERT_EQ(out.exit_code, 0) << out.text;
    // 610 rows in batches of 64: the final batch of 34 is uneven over 3 and 4 replicas.
    EXPECT_THAT(out.text, HasSubstr("over 10 steps on " + std::to_string(replicas) + " replicas"));
    EXPECT_LE(tower::testing::SavedWeightsRelativeDifference(path, dir + "/custom_1.safetensors"),
              1e-5)
        << replicas;
  }
  const auto out = RunProgram("examples/custom_training_loop", "--replicas=2 --epochs=4");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  const auto loss = [&](int epoch) {
    const std::string key = "epoch " + std::to_string(epoch) + ": loss=";
    const size_t at = out.text.find(key);
    return at == std::string::npos ? NAN : std::atof(out.text.c_str() + at + key.size());
  };
  EXPECT_LT(loss(4), 0.8 * loss(1)) << out.text;  // it learns (NaN fails)
  EXPECT_EQ(RunProgram("examples/custom_training_loop", "--replicas=0").exit_code, 1);
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
