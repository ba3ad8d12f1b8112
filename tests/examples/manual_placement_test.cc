// The manual_placement example reproduces TensorFlow's placement walkthrough.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/run_program.h"

namespace {

using ::testing::HasSubstr;

TEST(ManualPlacementTest, ReproducesTheSeedsExample) {
  const tower::testing::ProgramOutput out =
      tower::testing::RunProgram("examples/manual_placement", "");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  // Section 2: inputs on CPU:0, then MatMul on the default device (GPU:0 where there is
  // one), the result printed as TensorFlow prints it.
  const std::string device = out.text.find("device:GPU:0") != std::string::npos ? "GPU:0" : "CPU:0";
  EXPECT_THAT(out.text,
              HasSubstr("# 2. Manual placement: a, b on /CPU:0, MatMul where Tower chooses\n"
                        "Executing op _EagerConst in device /job:localhost/replica:0/task:0/device:CPU:0\n"
                        "Executing op _EagerConst in device /job:localhost/replica:0/task:0/device:CPU:0\n"
                        "Executing op MatMul in device /job:localhost/replica:0/task:0/device:" +
                        device + "\n"
                        "tower.Tensor(\n[[22. 28.]\n [49. 64.]], shape=(2, 2), dtype=float32)"));
  EXPECT_THAT(out.text, HasSubstr("Executing op Cast in device /job:localhost/replica:0/task:0/device:CPU:0\n"));
  EXPECT_THAT(out.text, HasSubstr("RuntimeError: /job:localhost/replica:0/task:0/device:GPU:2 unknown device"));
}

TEST(ManualPlacementTest, RunsOnFourLogicalCpus) {
  const tower::testing::ProgramOutput out =
      tower::testing::RunProgram("examples/manual_placement", "--virtual-cpus=4");
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("[[22. 28.]\n [49. 64.]]"));
}

}  // namespace
