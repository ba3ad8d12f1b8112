// The strategy flags of `tower train` and train_bench (strategy/strategy_flags.h): every check
// names its flag, and the options are what the flags say, on a context of fake devices.
#include "strategy/strategy_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device/testing/fake_gpu_platform.h"

namespace tower {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Parsed {
  FlagParser parser{"test"};
  StrategyFlags flags;
  DeviceFlags device;
  Status status;
};

std::unique_ptr<Parsed> Parse(const std::vector<std::string>& args) {
  auto parsed = std::make_unique<Parsed>();
  AddStrategyFlags(&parsed->parser, &parsed->flags);
  AddDeviceFlags(&parsed->parser, &parsed->device);
  parsed->status = parsed->parser.Parse(args);
  return parsed;
}

Status Check(const std::vector<std::string>& args, bool virtual_shards_used = false) {
  std::unique_ptr<Parsed> parsed = Parse(args);
  TOWER_RETURN_IF_ERROR(parsed->status);
  return CheckStrategyFlags(parsed->flags, parsed->parser, virtual_shards_used);
}

TEST(StrategyFlagsTest, EveryCheckNamesItsFlag) {
  EXPECT_TRUE(Check({}).ok());
  EXPECT_TRUE(Check({"--deterministic", "--virtual-shards=16", "--bucket-mb=0.5"}).ok());
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--replicas=2", "--devices=/CPU:0"}, "give --replicas or --devices, not both"},
      {{"--batch-threads=2"}, "--batch-threads needs --batch-replica-rows"},
      {{"--bucket-mb=0"}, "--bucket-mb must be between"},
      {{"--bucket-mb=2000000"}, "--bucket-mb must be between"},
      {{"--virtual-shards=4"}, "--virtual-shards needs --deterministic"},
      {{"--deterministic", "--virtual-shards=0"}, "--virtual-shards must be between 1 and 65536"},
      {{"--collective-timeout=0"}, "--collective-timeout must be between"},
      {{"--max-clock-skew=-1"}, "--max-clock-skew must be between"},
      {{"--cross-device-ops=ring"}, "ring"},
      {{"--all-reduce-dtype=int8"}, "--all-reduce-dtype='int8': use float32, bfloat16 or float16"},
  };
  for (const auto& [args, message] : bad) {
    const Status status = Check(args);
    EXPECT_TRUE(IsInvalidArgument(status)) << args[0] << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr(message)) << args[0];
  }
  // The benchmark's --ab-deterministic uses --virtual-shards too.
  EXPECT_TRUE(Check({"--virtual-shards=4"}, /*virtual_shards_used=*/true).ok());
}

TEST(StrategyFlagsTest, OptionsAreWhatTheFlagsSay) {
  std::unique_ptr<Parsed> parsed =
      Parse({"--devices=/CPU:0,/CPU:1", "--cross-device-ops=to-cpu", "--bucket-mb=2",
             "--deterministic", "--virtual-shards=12", "--fold-gradients=false",
             "--batch-replica-rows", "--batch-threads=2", "--collective-timeout=1.5",
             "--max-clock-skew=3", "--all-reduce-dtype=bfloat16"});
  ASSERT_TRUE(parsed->status.ok()) << parsed->status;
  ASSERT_TRUE(CheckStrategyFlags(parsed->flags, parsed->parser).ok());
  auto context = testing::MakeContextWithFakeGpus({});
  StatusOr<MirroredStrategyOptions> options =
      ApplyStrategyFlags(parsed->flags, parsed->device, *context);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_THAT(options->devices, ElementsAre("/CPU:0", "/CPU:1"));
  EXPECT_EQ(options->cross_device_ops, CrossDeviceOpsKind::kToCpu);
  EXPECT_EQ(options->bucket_bytes, 2 << 20);
  EXPECT_EQ(options->virtual_shards, 12);
  EXPECT_FALSE(options->fold_replica_gradients);
  EXPECT_TRUE(options->batch_replica_rows);
  EXPECT_EQ(options->batch_threads, 2);
  EXPECT_EQ(options->collective_timeout.count(), 1500);
  EXPECT_EQ(options->max_clock_skew.count(), 3000);
  EXPECT_EQ(options->cross_process_dtype, DType::kBFloat16);
}

TEST(StrategyFlagsTest, ReplicasBecomeLogicalDevicesAndOneDeterministicDeviceIsNamed) {
  {
    std::unique_ptr<Parsed> parsed = Parse({"--replicas=3", "--virtual-shards=5"});
    ASSERT_TRUE(parsed->status.ok());
    auto context = testing::MakeContextWithFakeGpus({});
    StatusOr<MirroredStrategyOptions> options =
        ApplyStrategyFlags(parsed->flags, parsed->device, *context);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->devices.size(), 3u);
    EXPECT_EQ(options->virtual_shards, 0) << "virtual shards without --deterministic";
  }
  {
    std::unique_ptr<Parsed> parsed = Parse({"--deterministic"});
    auto context = testing::MakeContextWithFakeGpus({});
    StatusOr<MirroredStrategyOptions> options =
        ApplyStrategyFlags(parsed->flags, parsed->device, *context);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_THAT(options->devices, ElementsAre("/CPU:0"));
    EXPECT_EQ(options->virtual_shards, 8);
  }
  {
    std::unique_ptr<Parsed> parsed = Parse({});
    auto context = testing::MakeContextWithFakeGpus({});
    StatusOr<MirroredStrategyOptions> options =
        ApplyStrategyFlags(parsed->flags, parsed->device, *context);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_TRUE(options->devices.empty()) << "one replica: no strategy devices";
  }
}

}  // namespace
}  // namespace tower
