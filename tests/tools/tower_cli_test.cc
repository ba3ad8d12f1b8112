// Runs the built `tower` binary as a user would.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace {

using ::testing::HasSubstr;

struct Output {
  int code;
  std::string text;  // stdout and stderr
};

Output RunTower(const std::string& args) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string binary = std::string(srcdir ? srcdir : ".") + "/tower/tools/tower";
  const std::string command = binary + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string text;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) text.append(buffer.data(), n);
  const int status = pclose(pipe);
  return Output{WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

TEST(TowerCliTest, DevicesWithFourVirtualCpus) {
  Output out = RunTower("devices --virtual-cpus=4");
  ASSERT_EQ(out.code, 0) << out.text;
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(out.text,
                HasSubstr("/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(i)));
  }
  EXPECT_THAT(out.text, ::testing::Not(HasSubstr("device:CPU:4")));
}

TEST(TowerCliTest, GpuLinesSayWhyThereIsNoGpu) {
  Output out = RunTower("devices");
  ASSERT_EQ(out.code, 0) << out.text;
  // Either a GPU is listed, or the platform line explains its absence.
  if (out.text.find("/physical_device:GPU:0") == std::string::npos) {
    EXPECT_THAT(out.text, ::testing::AnyOf(HasSubstr("--config=cuda"), HasSubstr("no usable GPU")));
  }
}

TEST(TowerCliTest, UnknownCommandAndBadFlag) {
  Output unknown = RunTower("fly");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_THAT(unknown.text, HasSubstr("unknown command 'fly'"));
  Output bad = RunTower("devices --virtual-cpus=two");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.text, HasSubstr("--virtual-cpus='two' is not an integer"));
  Output none = RunTower("");
  EXPECT_EQ(none.code, 2);
  EXPECT_THAT(none.text, HasSubstr("usage: tower <command>"));
}

TEST(TowerCliTest, EnvironmentValueIsValidated) {
  Output out = RunTower("devices");
  ASSERT_EQ(out.code, 0);
  setenv("TF_FORCE_GPU_ALLOW_GROWTH", "sometimes", 1);
  Output bad = RunTower("devices");
  unsetenv("TF_FORCE_GPU_ALLOW_GROWTH");
  EXPECT_EQ(bad.code, 1) << bad.text;
  EXPECT_THAT(bad.text, HasSubstr("TF_FORCE_GPU_ALLOW_GROWTH='sometimes' is not a valid value"));
}

}  // namespace
