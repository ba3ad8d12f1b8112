// `tower train --deterministic` on every GPU topology of one process saves the bytes one GPU
// saves: 2, 3 and 4 virtual GPUs on one card (the same-card tree kernel), 2, 3 and 4 cards
// (NCCL: all-gather, then the tree kernel on every card), and 2 cards of 2 virtual GPUs each
// (reduced on the host along the same tree: the kernel's bits are the host's). With the
// default 8 virtual shards, and with 10 (3 replicas then hold [0,4), [4,7), [7,10): the
// tree's [6,8) straddles two of them). Without --deterministic the same runs differ, so the
// equality is the mode's doing. Under cudaemu: 4 emulated cards; on a real machine the runs
// needing more cards than it has are skipped.
#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/gpu.h"
#include "tests/testing/reduced_round.h"
#include "tests/testing/tower_cli.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::CountCards;
using testing::ProgramOutput;
using testing::ReadBytes;
using testing::TempPath;
using testing::Tower;

const char kTrain[] =
    "train --data=synthetic:mlp:rows=1000:seed=3 --layers=64:relu,32:tanh,1 --epochs=2 "
    "--global-batch=96 --shuffle --seed=7 --optimizer=adam --lr=0.001 --verbose=1";

struct Topology {
  std::string name;
  std::string flags;
  int cards;         // physical GPUs it needs
  std::string path;  // the cross-device ops it must log ("" for one GPU: no strategy)
};

const std::vector<Topology>& Topologies() {
  static const std::vector<Topology> topologies = {
      {"1 GPU", "--replicas=1", 1, ""},
      {"2 virtual GPUs on one card", "--replicas=2 --virtual-gpus=2", 1, "same-card"},
      {"3 virtual GPUs on one card", "--replicas=3 --virtual-gpus=3", 1, "same-card"},
      {"4 virtual GPUs on one card", "--replicas=4 --virtual-gpus=4", 1, "same-card"},
      {"2 cards", "--replicas=2", 2, "nccl"},
      {"3 cards", "--replicas=3", 3, "nccl"},
      {"4 cards", "--replicas=4", 4, "nccl"},
      {"2 cards of 2 virtual GPUs", "--replicas=4 --virtual-gpus=2", 2, "to-cpu"},
  };
  return topologies;
}

// Trains on `topology` and returns the saved file's bytes (empty on failure, reported).
std::string Train(const Topology& topology, const std::string& extra, const std::string& file) {
  const std::string saved = TempPath(file);
  const ProgramOutput out =
      Tower(std::string(kTrain) + " " + topology.flags + extra + " --save=" + saved);
  EXPECT_EQ(out.exit_code, 0) << topology.name << "\n" << out.text;
  if (!topology.path.empty()) {
    EXPECT_THAT(out.text, HasSubstr("Cross-device ops: " + topology.path)) << topology.name;
  }
  return out.exit_code == 0 ? ReadBytes(saved) : "";
}

class DeterministicOnGpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gpus_ = CountCards();
    if (gpus_ == 0) TOWER_SKIP_WITHOUT_GPU(Tower("devices").text);
  }
  int gpus_ = 0;
};

// Every topology this machine has cards for, with `shards` added to --deterministic, saves
// the bytes of the first (one GPU).
void ExpectEveryTopologySavesTheBytesOfOneGpu(int gpus, const std::string& shards) {
  const std::string extra = " --deterministic" + shards;
  std::string expected;
  int file = 0;
  // A reduced round (TOWER_REDUCED_ROUND=1: CI's sanitizer stages) keeps one topology of each
  // cross-device path: 3 virtual GPUs (same-card), 3 cards (NCCL), 2 cards of 2 (to-cpu).
  const std::vector<std::string> reduced = {"1 GPU", "3 virtual GPUs on one card", "3 cards",
                                            "2 cards of 2 virtual GPUs"};
  for (const Topology& topology : Topologies()) {
    if (topology.cards > gpus) continue;  // a real machine with fewer cards
    if (testing::ReducedRound() &&
        std::find(reduced.begin(), reduced.end(), topology.name) == reduced.end()) {
      continue;
    }
    const std::string bytes =
        Train(topology, extra, "det" + std::to_string(file++) + ".safetensors");
    ASSERT_FALSE(bytes.empty()) << topology.name;
    if (expected.empty()) {
      expected = bytes;  // one GPU
    } else {
      EXPECT_TRUE(bytes == expected) << topology.name << " saved other bytes than one GPU";
    }
  }
}

// Which topologies run depends on the count of cards: splitting them into virtual GPUs must
// not change it. (On a real one-card machine the count once included the logical GPU's line,
// so the test ran the 2-card topologies on one card and failed.)
TEST_F(DeterministicOnGpusTest, CountsCardsNotLogicalGpus) {
  EXPECT_EQ(CountCards("--virtual-gpus=2"), gpus_);
  EXPECT_EQ(CountCards("--virtual-gpus=3"), gpus_);
}

TEST_F(DeterministicOnGpusTest, EveryGpuTopologySavesTheBytesOfOneGpu) {
  ExpectEveryTopologySavesTheBytesOfOneGpu(gpus_, "");  // 8 virtual shards, the default
}

// Other shard boundaries (with 3 replicas the tree's [6,8) straddles two of them), on the
// same threads and streams: CI's TSan run, where each training takes about 10 s, leaves
// this case out (.ci/stages.py); the plain, shaken and ASan runs keep it.
TEST_F(DeterministicOnGpusTest, EveryGpuTopologySavesTheBytesOfOneGpuWithTenVirtualShards) {
  ExpectEveryTopologySavesTheBytesOfOneGpu(gpus_, " --virtual-shards=10");
}

TEST_F(DeterministicOnGpusTest, WithoutTheModeTheTopologiesDiffer) {
  // What the test above would see if the mode did nothing: one GPU against 3 virtual GPUs and
  // 3 cards (each shard's sum associates the batch differently).
  const std::string one = Train(Topologies()[0], "", "plain1.safetensors");
  ASSERT_FALSE(one.empty());
  EXPECT_FALSE(Train(Topologies()[2], "", "plain_same_card.safetensors") == one);
  if (gpus_ >= 3) EXPECT_FALSE(Train(Topologies()[5], "", "plain_nccl.safetensors") == one);
}

}  // namespace
}  // namespace tower
