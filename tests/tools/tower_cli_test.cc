// Runs the built `tower` binary as a user would.
#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/run_program.h"

namespace {

using ::testing::HasSubstr;

using tower::testing::ProgramOutput;

ProgramOutput RunTower(const std::string& args) {
  return tower::testing::RunProgram("tools/tower", args);
}

TEST(TowerCliTest, DevicesWithFourVirtualCpus) {
  ProgramOutput out = RunTower("devices --virtual-cpus=4");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(out.text,
                HasSubstr("/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(i)));
  }
  EXPECT_THAT(out.text, ::testing::Not(HasSubstr("device:CPU:4")));
}

TEST(TowerCliTest, GpuLinesSayWhyThereIsNoGpu) {
  ProgramOutput out = RunTower("devices");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  // Either a GPU is listed, or the platform line explains its absence.
  if (out.text.find("/physical_device:GPU:0") == std::string::npos) {
    EXPECT_THAT(out.text, ::testing::AnyOf(HasSubstr("--config=cuda"), HasSubstr("no usable GPU")));
  }
}

TEST(TowerCliTest, UnknownCommandAndBadFlag) {
  ProgramOutput unknown = RunTower("fly");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.text, HasSubstr("unknown command 'fly'"));
  ProgramOutput bad = RunTower("devices --virtual-cpus=two");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.text, HasSubstr("--virtual-cpus='two' is not an integer"));
  ProgramOutput none = RunTower("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.text, HasSubstr("usage: tower <command>"));
}

TEST(TowerCliTest, EnvironmentValueIsValidated) {
  ProgramOutput out = RunTower("devices");
  ASSERT_EQ(out.exit_code, 0);
  setenv("TF_FORCE_GPU_ALLOW_GROWTH", "sometimes", 1);
  ProgramOutput bad = RunTower("devices");
  unsetenv("TF_FORCE_GPU_ALLOW_GROWTH");
  EXPECT_EQ(bad.exit_code, 1) << bad.text;
  EXPECT_THAT(bad.text, HasSubstr("TF_FORCE_GPU_ALLOW_GROWTH='sometimes' is not a valid value"));
}

}  // namespace
