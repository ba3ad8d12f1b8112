// `tower train` on GPUs: four virtual GPUs carved out of one card train like that card alone
// on the global batch, through the same-card reduction (chosen and logged); and the memory
// flags take effect on the card (a limit too small for the model is a clear error).
#include <cstdlib>
#include <fstream>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/gpu.h"
#include "tests/testing/run_program.h"
#include "tests/testing/tower_cli.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::ProgramOutput;

std::string Path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

ProgramOutput Tower(const std::string& args) { return testing::RunProgram("tools/tower", args); }

class TrainOnGpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ProgramOutput devices = Tower("devices");
    if (devices.text.find("GPU:0") == std::string::npos) {
      TOWER_SKIP_WITHOUT_GPU(devices.text);
    }
  }
};

TEST_F(TrainOnGpusTest, FourVirtualGpusOnOneCardTrainLikeTheCard) {
  const std::string one = Path("gpu1.safetensors");
  const std::string four = Path("gpu4.safetensors");
  const std::string common = "train --data=synthetic:mlp:rows=512 --layers=32:tanh,16:relu,1 "
                             "--steps=24 --global-batch=30 --verbose=1 --save=";
  ProgramOutput single = Tower(common + one + " --replicas=1");
  ASSERT_EQ(single.exit_code, 0) << single.text;
  EXPECT_THAT(single.text, HasSubstr("device:GPU:0"));
  // GPU replicas leave the host's cores free: by default the pipeline reads ahead.
  EXPECT_THAT(single.text, HasSubstr("Input pipeline: 2 batches read ahead"));
  ProgramOutput out = Tower(common + four + " --replicas=4 --virtual-gpus=4");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Cross-device ops: same-card"));
  EXPECT_THAT(out.text, HasSubstr("Input pipeline: 2 batches read ahead"));
  EXPECT_LE(testing::SavedWeightsRelativeDifference(four, one), 1e-5);  // false for NaN
}

TEST_F(TrainOnGpusTest, DeterministicGivesTheSameBytesOnOneGpuAndOnVirtualGpus) {
  // --deterministic: 1 GPU, and 2, 3, 4 virtual GPUs on it (the same-card reduction
  // evaluating the summation tree), save the same bytes; 4 of 8 virtual shards per batch
  // hold no rows on the last, 4-row batch.
  const std::string common =
      "train --data=synthetic:mlp:rows=484:seed=3 --layers=32:relu,16:tanh,1 --epochs=2 "
      "--global-batch=96 --shuffle --seed=7 --optimizer=adam --lr=0.001 --verbose=1 "
      "--deterministic --save=";
  std::string expected;
  for (int replicas : {1, 2, 3, 4}) {
    const std::string saved = Path("det" + std::to_string(replicas) + ".safetensors");
    ProgramOutput out = Tower(common + saved + " --replicas=" + std::to_string(replicas) +
                              (replicas > 1 ? " --virtual-gpus=" + std::to_string(replicas) : ""));
    ASSERT_EQ(out.exit_code, 0) << out.text;
    if (replicas > 1) EXPECT_THAT(out.text, HasSubstr("Cross-device ops: same-card"));
    std::ifstream in(saved, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    ASSERT_FALSE(bytes.empty());
    if (replicas == 1) {
      expected = bytes;
    } else {
      EXPECT_TRUE(bytes == expected) << replicas << " virtual GPUs saved other bytes than one";
    }
  }
}

// NCCL on two virtual GPUs of one card: refused, naming NCCL's switch, unless the switch lets
// NCCL put two ranks on one GPU; then NCCL's all-reduce trains like the card alone. (On a
// machine with one card, the only way to run NCCL's code.)
TEST_F(TrainOnGpusTest, NcclOnVirtualGpusOfOneCardWhereNcclLetsRanksShareIt) {
  const std::string one = Path("nccl_gpu1.safetensors");
  const std::string two = Path("nccl_gpu2.safetensors");
  const std::string common = "train --data=synthetic:mlp:rows=512 --layers=32:tanh,16:relu,1 "
                             "--steps=24 --global-batch=30 --verbose=1 --save=";
  const std::string nccl = " --replicas=2 --virtual-gpus=2 --cross-device-ops=nccl";
  ProgramOutput refused = testing::RunCommand("env -u NCCL_MULTI_RANK_GPU_ENABLE " +
                                              testing::Runfile("tools/tower") + " " + common +
                                              two + nccl);
  EXPECT_NE(refused.exit_code, 0) << refused.text;
  EXPECT_THAT(refused.text, HasSubstr("unless NCCL_MULTI_RANK_GPU_ENABLE=1"));
  ProgramOutput single = Tower(common + one + " --replicas=1");
  ASSERT_EQ(single.exit_code, 0) << single.text;
  ProgramOutput out = testing::RunCommand("NCCL_MULTI_RANK_GPU_ENABLE=1 " +
                                          testing::Runfile("tools/tower") + " " + common + two +
                                          nccl);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Cross-device ops: nccl"));
  EXPECT_LE(testing::SavedWeightsRelativeDifference(two, one), 1e-5);  // false for NaN
}

TEST_F(TrainOnGpusTest, AMemoryLimitTooSmallForTheModelIsAClearError) {
  // 1 MiB per virtual GPU cannot hold a 4096-wide layer's weights (64 MiB).
  ProgramOutput out = Tower("train --data=synthetic:mlp:rows=64 --layers=4096:relu,1 --steps=1 "
                            "--replicas=2 --virtual-gpus=2 --memory-limit=1 --verbose=0");
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("error:"));
  EXPECT_THAT(out.text, HasSubstr("GPU:"));
}

}  // namespace
}  // namespace tower
