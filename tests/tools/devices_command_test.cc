#include "tools/devices_command.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "device/testing/fake_gpu_platform.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::FakeGpuSpec;
using testing::MakeContextWithFakeGpus;

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result RunDevices(Context& context, std::vector<std::string> args) {
  std::ostringstream out;
  std::ostringstream err;
  const int code = RunDevicesCommand(args, context, out, err);
  return Result{code, out.str(), err.str()};
}

std::unique_ptr<Context> TwoCards() {
  return MakeContextWithFakeGpus({FakeGpuSpec{"Fake H100", 8ull << 30, 0, "GPU-aaaa"},
                                  FakeGpuSpec{"Fake H100", 8ull << 30, 0, "GPU-bbbb"}});
}

TEST(DevicesCommandTest, VirtualCpusAreListed) {
  auto context = MakeContextWithFakeGpus({});
  Result result = RunDevices(*context, {"--virtual-cpus=4"});
  ASSERT_EQ(result.code, 0) << result.err;
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(result.out, HasSubstr("/job:localhost/replica:0/task:0/device:CPU:" +
                                      std::to_string(i) + "  on /physical_device:CPU:0"));
  }
  EXPECT_THAT(result.out, HasSubstr("no limit"));
}

// The thread flags are device flags (device/device_flags.h): `tower train`, the examples and
// the benchmarks apply them the same way, before the runtime initialises.
TEST(DevicesCommandTest, ThreadFlagsReachTheContext) {
  auto context = MakeContextWithFakeGpus({});
  Result result = RunDevices(*context, {"--intra-op-threads=3", "--inter-op-threads=2"});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(context->GetIntraOpParallelismThreads(), 3);
  EXPECT_EQ(context->GetInterOpParallelismThreads(), 2);
  // Initialised now: another value is refused with TensorFlow's text, naming the flag.
  Result late = RunDevices(*context, {"--intra-op-threads=1"});
  EXPECT_EQ(late.code, 2);
  EXPECT_THAT(late.err, HasSubstr("--intra-op-threads: Intra op parallelism cannot be modified "
                                  "after initialization."));
  EXPECT_EQ(RunDevices(*context, {"--intra-op-threads=3"}).code, 0);  // the same: accepted
  Result negative = RunDevices(*MakeContextWithFakeGpus({}), {"--inter-op-threads=-4"});
  EXPECT_EQ(negative.code, 2);
  EXPECT_THAT(negative.err, HasSubstr("--inter-op-threads=-4 must be between 0 (one per core)"));
}

TEST(DevicesCommandTest, VirtualGpusWithLimitsOnEveryVisibleCard) {
  auto context = TwoCards();
  Result result = RunDevices(*context, {"--virtual-gpus=2", "--memory-limit=1024", "--visible-gpus=1"});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("/physical_device:GPU:0  Fake H100, 8.00 GiB (8.00 GiB free), "
                                    "compute capability 9.0, 132 SMs, pci 0000:00:00.0, GPU-aaaa  [hidden]"));
  EXPECT_THAT(result.out, HasSubstr("/job:localhost/replica:0/task:0/device:GPU:0  on "
                                    "/physical_device:GPU:1: limit 1.00 GiB, grows on demand, holds 0 B"));
  EXPECT_THAT(result.out, HasSubstr("device:GPU:1  on /physical_device:GPU:1: limit 1.00 GiB"));
  EXPECT_THAT(result.out, ::testing::Not(HasSubstr("device:GPU:2")));
}

TEST(DevicesCommandTest, GrowthOffShowsMemoryHeldAndJson) {
  auto context = TwoCards();
  Result result = RunDevices(*context, {"--memory-growth=false", "--memory-limit=512", "--json"});
  ASSERT_EQ(result.code, 0) << result.err;
  nlohmann::json json = nlohmann::json::parse(result.out);
  ASSERT_EQ(json["logical_devices"].size(), 3u);
  const auto& gpu0 = json["logical_devices"][1];
  EXPECT_EQ(gpu0["name"], "/job:localhost/replica:0/task:0/device:GPU:0");
  EXPECT_EQ(gpu0["memory_growth"], false);
  EXPECT_EQ(gpu0["bytes_reserved"], 512ull << 20);
  EXPECT_EQ(gpu0["memory_limit_bytes"], 512ull << 20);
  // The card's free memory is read after the logical devices took theirs.
  EXPECT_EQ(json["physical_devices"][1]["free_memory_bytes"], (8ull << 30) - (512ull << 20));
  EXPECT_EQ(json["physical_devices"][1]["uuid"], "GPU-aaaa");
  EXPECT_EQ(json["physical_devices"][1]["memory_growth"], false);
}

TEST(DevicesCommandTest, BadFlagsExitTwoWithOneLine) {
  auto context = TwoCards();
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--virtual-gpus=-1"},
                                             {"--virtual-gpus=x"},
                                             {"--visible-gpus=7"},
                                             {"--visible-gpus=0,0"},
                                             {"--visible-gpus=a"},
                                             {"--memory-growth=maybe"},
                                             {"--memory-fraction=2"},
                                             {"--memory-limit=-5"},
                                             {"--virtual-cpus=100000"},
                                             {"--no-such-flag"},
                                             {"positional"},
                                             {"--json=perhaps"},
                                             {"--virtual-gpus"}}) {
    Result result = RunDevices(*context, args);
    EXPECT_EQ(result.code, 2) << args[0];
    EXPECT_THAT(result.err, ::testing::StartsWith("error: ")) << args[0];
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_EQ(result.out, "") << args[0];
  }
  EXPECT_FALSE(context->IsInitialized());  // nothing was half-applied
}

TEST(DevicesCommandTest, InitializationFailureExitsOne) {
  // Cards with 1 GiB free of 8: preallocating 2 × 768 MiB cannot work.
  auto context = MakeContextWithFakeGpus({FakeGpuSpec{"Small", 8ull << 30, 1ull << 30, ""}});
  Result result = RunDevices(*context, {"--memory-growth=false", "--virtual-gpus=2", "--memory-limit=768"});
  EXPECT_EQ(result.code, 1);
  EXPECT_THAT(result.err, HasSubstr("could not reserve 768 MiB"));
}

TEST(DevicesCommandTest, HelpListsFlags) {
  auto context = TwoCards();
  Result result = RunDevices(*context, {"--help"});
  EXPECT_EQ(result.code, 0);
  EXPECT_THAT(result.out, HasSubstr("--virtual-gpus=<int>"));
  EXPECT_THAT(result.out, HasSubstr("--json=<bool>"));
}

}  // namespace
}  // namespace tower
