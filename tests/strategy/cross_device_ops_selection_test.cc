// Every row of the selection table (strategy/collectives/cross_device_ops_selection.h), from fake
// device descriptions.
#include "strategy/collectives/cross_device_ops_selection.h"

#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tower {
namespace {

using ::testing::HasSubstr;

ReplicaDeviceInfo Cpu(int i) { return {"/device:CPU:" + std::to_string(i), false, true, ""}; }
ReplicaDeviceInfo Gpu(int i, const std::string& card) {
  return {"/device:GPU:" + std::to_string(i), true, false, card};
}

CrossDeviceOpsKind Pick(const std::vector<ReplicaDeviceInfo>& devices, bool built = true) {
  StatusOr<CrossDeviceOpsChoice> choice =
      ChooseCrossDeviceOps(devices, CrossDeviceOpsKind::kAuto, built, false);
  TOWER_CHECK_OK(choice.status());
  return choice->kind;
}

TEST(CrossDeviceOpsSelectionTest, TheTable) {
  EXPECT_EQ(Pick({Cpu(0), Cpu(1), Cpu(2), Cpu(3)}), CrossDeviceOpsKind::kInProcess);
  EXPECT_EQ(Pick({Gpu(0, "GPU-a"), Gpu(1, "GPU-b")}), CrossDeviceOpsKind::kNccl);
  EXPECT_EQ(Pick({Gpu(0, "GPU-a"), Gpu(1, "GPU-a")}), CrossDeviceOpsKind::kSameCard);
  EXPECT_EQ(Pick({Cpu(0), Gpu(0, "GPU-a")}), CrossDeviceOpsKind::kToCpu);
  // Two cards with two virtual GPUs each: neither NCCL nor one-card.
  EXPECT_EQ(Pick({Gpu(0, "GPU-a"), Gpu(1, "GPU-a"), Gpu(2, "GPU-b"), Gpu(3, "GPU-b")}),
            CrossDeviceOpsKind::kToCpu);
  // Without CUDA collectives in the binary, GPUs reduce on the CPU.
  EXPECT_EQ(Pick({Gpu(0, "GPU-a"), Gpu(1, "GPU-b")}, false), CrossDeviceOpsKind::kToCpu);
  // One replica: nothing to reduce; no one-rank NCCL communicator for one GPU.
  EXPECT_EQ(Pick({Gpu(0, "GPU-a")}), CrossDeviceOpsKind::kInProcess);
  EXPECT_EQ(Pick({Gpu(0, "GPU-a")}, false), CrossDeviceOpsKind::kInProcess);
  EXPECT_EQ(Pick({Cpu(0)}), CrossDeviceOpsKind::kInProcess);
}

TEST(CrossDeviceOpsSelectionTest, SharedCardIsDecidedByUuidNotByCount) {
  // Two GPUs with the same UUID are one card even if named like two.
  StatusOr<CrossDeviceOpsChoice> choice = ChooseCrossDeviceOps(
      {Gpu(0, "GPU-1234"), Gpu(1, "GPU-1234")}, CrossDeviceOpsKind::kAuto, true, false);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->kind, CrossDeviceOpsKind::kSameCard);
  EXPECT_THAT(choice->reason, HasSubstr("share card GPU-1234"));
  EXPECT_THAT(choice->reason, HasSubstr("NCCL refuses two ranks on one GPU"));
}

TEST(CrossDeviceOpsSelectionTest, ExplicitRequestsAreValidated) {
  StatusOr<CrossDeviceOpsChoice> nccl = ChooseCrossDeviceOps(
      {Gpu(0, "GPU-a"), Gpu(1, "GPU-a")}, CrossDeviceOpsKind::kNccl, true, false);
  EXPECT_TRUE(IsInvalidArgument(nccl.status()));
  EXPECT_THAT(nccl.status().message(),
              HasSubstr("/device:GPU:0 and /device:GPU:1 share card GPU-a"));
  EXPECT_THAT(nccl.status().message(), HasSubstr("Use same-card"));
  EXPECT_TRUE(IsInvalidArgument(ChooseCrossDeviceOps({Gpu(0, "a"), Gpu(1, "b")},
                                                     CrossDeviceOpsKind::kSameCard, true, false)
                                    .status()));
  EXPECT_TRUE(IsInvalidArgument(
      ChooseCrossDeviceOps({Gpu(0, "a")}, CrossDeviceOpsKind::kInProcess, true, false).status()));
  EXPECT_THAT(ChooseCrossDeviceOps({Gpu(0, "a")}, CrossDeviceOpsKind::kNccl, false, false)
                  .status()
                  .message(),
              HasSubstr("--config=cuda"));
  EXPECT_EQ(ChooseCrossDeviceOps({Cpu(0), Cpu(1)}, CrossDeviceOpsKind::kToCpu, false, false)->kind,
            CrossDeviceOpsKind::kToCpu);
  EXPECT_TRUE(
      IsInvalidArgument(ChooseCrossDeviceOps({}, CrossDeviceOpsKind::kAuto, true, false).status()));
}

// NCCL's own switch for two ranks on one GPU: nccl asked for on one card is then taken as
// asked, and says so; auto still picks same-card. Without it, the refusal names the switch.
TEST(CrossDeviceOpsSelectionTest, NcclOnOneCardWhereNcclLetsRanksShareAGpu) {
  const std::vector<ReplicaDeviceInfo> one_card = {Gpu(0, "GPU-a"), Gpu(1, "GPU-a")};
  StatusOr<CrossDeviceOpsChoice> nccl =
      ChooseCrossDeviceOps(one_card, CrossDeviceOpsKind::kNccl, true, true);
  ASSERT_TRUE(nccl.ok()) << nccl.status().message();
  EXPECT_EQ(nccl->kind, CrossDeviceOpsKind::kNccl);
  EXPECT_THAT(nccl->reason, HasSubstr("NCCL_MULTI_RANK_GPU_ENABLE=1"));
  EXPECT_EQ(ChooseCrossDeviceOps(one_card, CrossDeviceOpsKind::kAuto, true, true)->kind,
            CrossDeviceOpsKind::kSameCard);
  StatusOr<CrossDeviceOpsChoice> refused =
      ChooseCrossDeviceOps(one_card, CrossDeviceOpsKind::kNccl, true, false);
  EXPECT_TRUE(IsInvalidArgument(refused.status()));
  EXPECT_THAT(refused.status().message(), HasSubstr("unless NCCL_MULTI_RANK_GPU_ENABLE=1"));
  // The switch does not make a build without CUDA able to use NCCL.
  EXPECT_TRUE(IsInvalidArgument(
      ChooseCrossDeviceOps(one_card, CrossDeviceOpsKind::kNccl, false, true).status()));
}

// The switch as NCCL reads it: a non-zero integer.
TEST(CrossDeviceOpsSelectionTest, TheSwitchIsReadFromTheEnvironment) {
  struct Case {
    const char* value;  // null: unset
    bool on;
  };
  for (const Case& c : {Case{nullptr, false}, Case{"0", false}, Case{"1", true},
                        Case{"2", true}, Case{"yes", false}, Case{"", false}}) {
    if (c.value == nullptr) {
      unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
    } else {
      setenv("NCCL_MULTI_RANK_GPU_ENABLE", c.value, 1);
    }
    EXPECT_EQ(NcclRanksMayShareGpu(), c.on) << (c.value ? c.value : "(unset)");
  }
  unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
}

TEST(CrossDeviceOpsSelectionTest, Names) {
  for (auto kind : {CrossDeviceOpsKind::kAuto, CrossDeviceOpsKind::kInProcess,
                    CrossDeviceOpsKind::kNccl, CrossDeviceOpsKind::kSameCard,
                    CrossDeviceOpsKind::kToCpu}) {
    EXPECT_EQ(*ParseCrossDeviceOps(CrossDeviceOpsName(kind)), kind);
  }
  EXPECT_THAT(ParseCrossDeviceOps("ring").status().message(), HasSubstr("unknown cross-device ops 'ring'"));
}

}  // namespace
}  // namespace tower
