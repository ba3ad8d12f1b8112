// Two processes × two GPUs under mpirun: each worker sees two GPUs of its own
// (CUDA_VISIBLE_DEVICES per process, as on a 4-GPU machine), so the strategy makes one NCCL
// communicator over all four, across processes. It must train like one GPU on the global
// batch; a worker killed during setup or during a collective must be named by the survivors,
// who end the job within the deadline. With --deterministic, every GPU topology — 1 GPU, NCCL
// over 2–4 GPUs in one process, 2 processes × 2 GPUs over NCCL or sharing cards over MPI —
// saves the same bytes.
//
// Under the emulation on 4 emulated cards (CUDAEMU_GPUS, passed to every worker); on a real
// machine on its own cards: a case (or a topology) needing more cards than it has skips,
// saying so, and the killed workers' cases, which need the emulation's fault injection
// (CUDAEMU_NCCL_DIE), skip.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/emulation.h"
#include "tests/testing/gpu.h"
#include "tests/testing/reduced_round.h"
#include "tests/testing/run_program.h"
#include "tests/testing/tower_cli.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::ProgramOutput;

std::string Dir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp ? tmp : "/tmp";
}

const std::string kTrain =
    " train --data=synthetic:mlp:rows=600 --layers=32:tanh,16:relu,1 --steps=20 "
    "--global-batch=30 --verbose=0";

// `timeout S mpirun` with the flags every launch here shares; under the emulation every
// worker gets its emulated cards (CUDAEMU_GPUS).
std::string Mpirun(int timeout_s) {
  return "timeout " + std::to_string(timeout_s) +
         " mpirun --allow-run-as-root --oversubscribe --bind-to none" +
         (testing::kEmulatedGpus ? " -x CUDAEMU_GPUS" : "");
}

// CUDA_VISIBLE_DEVICES for cards [first, first + count) of those this process sees (the
// machine's, or those its own CUDA_VISIBLE_DEVICES names).
std::string Cards(int first, int count) {
  std::vector<std::string> visible;
  if (const char* own = std::getenv("CUDA_VISIBLE_DEVICES"); own != nullptr && *own != '\0') {
    std::stringstream list(own);
    for (std::string card; std::getline(list, card, ',');) visible.push_back(card);
  }
  std::string cards;
  for (int c = first; c < first + count; ++c) {
    if (!cards.empty()) cards += ",";
    cards += static_cast<size_t>(c) < visible.size() ? visible[c] : std::to_string(c);
  }
  return cards;
}

// The cards the workers can use: each case needs some, and skips (saying how many it needs)
// where the machine has fewer; without any, the test skips for want of a GPU
// (TOWER_REQUIRE_GPU=1 makes that a failure).
class MpiGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cards_ = testing::CountCards(); }
  void SetUp() override {
    if (cards_ == 0) {
      TOWER_SKIP_WITHOUT_GPU("no GPU on this machine; tower devices says:\n"
                             << testing::Tower("devices").text);
    }
  }
  static int cards_;
};
int MpiGpuTest::cards_ = 0;

#define TOWER_SKIP_WITHOUT_CARDS(needed)                                                \
  do {                                                                                  \
    if (cards_ < (needed)) {                                                            \
      GTEST_SKIP() << "needs " << (needed) << " cards; this machine has " << cards_;    \
    }                                                                                   \
  } while (0)

// Worker 0 on GPUs 0 and 1, worker 1 on GPUs 2 and 3; `env` is passed to both. With
// `survivors_report`, mpirun does not end the job when a worker dies, so the survivors must
// end it themselves, with their own report.
ProgramOutput TwoWorkers(const std::string& args, const std::string& env = "",
                         bool survivors_report = false, int timeout_s = 5) {
  const std::string tower = testing::Runfile("tools/tower");
  std::string command = env + " " + Mpirun(120);
  if (survivors_report) command += " --mca orte_abort_on_non_zero_status 0";
  if (!env.empty()) command += " -x " + env.substr(0, env.find('='));
  const std::string flags =
      kTrain + " --replicas=2 --collective-timeout=" + std::to_string(timeout_s) + args;
  command += " -np 1 -x CUDA_VISIBLE_DEVICES=" + Cards(0, 2) + " " + tower + flags +
             " : -np 1 -x CUDA_VISIBLE_DEVICES=" + Cards(2, 2) + " " + tower + flags;
  return testing::RunCommand(command);
}

TEST_F(MpiGpuTest, TwoProcessesTimesTwoGpusOverNcclTrainLikeOneGpu) {
  TOWER_SKIP_WITHOUT_CARDS(4);
  const std::string multi = Dir() + "/multi.safetensors";
  const std::string single = Dir() + "/single.safetensors";
  ProgramOutput out = TwoWorkers(" --save=" + multi);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Across processes: one NCCL communicator over 4 GPUs"));
  EXPECT_THAT(out.text, HasSubstr("4 replicas in sync"));
  ProgramOutput one =
      testing::RunCommand(testing::Runfile("tools/tower") + kTrain + " --replicas=1 --save=" + single);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  EXPECT_LE(testing::SavedWeightsRelativeDifference(multi, single), 1e-5);  // false for NaN
}

// Both workers on the same two cards (no CUDA_VISIBLE_DEVICES): NCCL cannot span them, so
// each worker reduces on its cards with NCCL and the workers sum over MPI on the host.
TEST_F(MpiGpuTest, TwoProcessesSharingTwoCardsReduceOverMpiAndTrainLikeOneGpu) {
  TOWER_SKIP_WITHOUT_CARDS(2);
  const std::string shared = Dir() + "/shared_cards.safetensors";
  const std::string single = Dir() + "/single_for_shared.safetensors";
  const std::string tower = testing::Runfile("tools/tower");
  ProgramOutput out = testing::RunCommand(Mpirun(60) + " -np 2 " + tower + kTrain +
                                          " --replicas=2 --save=" + shared);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Across processes: MPI on the host (not NCCL: card"));
  EXPECT_THAT(out.text, HasSubstr("4 replicas in sync"));
  ProgramOutput one = testing::RunCommand(tower + kTrain + " --replicas=1 --save=" + single);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  EXPECT_LE(testing::SavedWeightsRelativeDifference(shared, single), 1e-5);  // false for NaN
}

// Both workers on the same two cards with NCCL asked for: refused, naming NCCL's switch for
// two ranks on one GPU, unless every worker sets it; then one NCCL communicator spans the 4
// replicas on 2 cards, and trains like one GPU. (On a machine with one card, the only way to
// run NCCL across processes.)
TEST_F(MpiGpuTest, TwoProcessesSharingCardsUseNcclWhereEveryWorkerLetsRanksShareAGpu) {
  TOWER_SKIP_WITHOUT_CARDS(2);
  const std::string tower = testing::Runfile("tools/tower");
  const std::string launch = Mpirun(60) + " ";
  const std::string flags = kTrain + " --replicas=2 --cross-device-ops=nccl";
  ProgramOutput refused = testing::RunCommand(
      "env -u NCCL_MULTI_RANK_GPU_ENABLE " + launch + "-np 2 " + tower + flags);
  EXPECT_NE(refused.exit_code, 0) << refused.text;
  EXPECT_THAT(refused.text, HasSubstr("NCCL refuses two ranks on one GPU unless every worker "
                                      "sets NCCL_MULTI_RANK_GPU_ENABLE=1, and rank 0"));
  // One worker with the switch and one without: refused alike by both.
  ProgramOutput half = testing::RunCommand(
      "env -u NCCL_MULTI_RANK_GPU_ENABLE " + launch + "-np 1 -x NCCL_MULTI_RANK_GPU_ENABLE=1 " +
      tower + flags + " : -np 1 " + tower + flags);
  EXPECT_NE(half.exit_code, 0) << half.text;
  EXPECT_THAT(half.text, HasSubstr("and rank 1"));
  const std::string shared = Dir() + "/nccl_shared_cards.safetensors";
  const std::string single = Dir() + "/single_for_nccl_shared.safetensors";
  ProgramOutput out = testing::RunCommand("NCCL_MULTI_RANK_GPU_ENABLE=1 " + launch +
                                          "-x NCCL_MULTI_RANK_GPU_ENABLE -np 2 " + tower + flags +
                                          " --save=" + shared);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Across processes: one NCCL communicator over 4 GPUs"));
  ProgramOutput one = testing::RunCommand(tower + kTrain + " --replicas=1 --save=" + single);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  EXPECT_LE(testing::SavedWeightsRelativeDifference(shared, single), 1e-5);  // false for NaN
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(MpiGpuTest, DeterministicModeGivesTheBytesOfOneGpuOnEveryGpuTopology) {
  TOWER_SKIP_WITHOUT_CARDS(2);  // one GPU alone compares nothing
  // 4 virtual shards: 2 steps of 96 rows per epoch plus a last batch of 20.
  const std::string det =
      " train --data=synthetic:mlp:rows=500:seed=3 --layers=32:relu,16:tanh,1 --epochs=2 "
      "--global-batch=96 --shuffle --seed=7 --optimizer=adam --lr=0.001 --verbose=0 "
      "--deterministic --virtual-shards=4";
  const std::string tower = testing::Runfile("tools/tower");
  const std::string reference = Dir() + "/det_one_gpu.safetensors";
  ProgramOutput one = testing::RunCommand(tower + det + " --replicas=1 --save=" + reference);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  const std::string expected = Bytes(reference);
  ASSERT_FALSE(expected.empty());
  struct Run {
    std::string name, command, log;
    int cards;
  };
  const std::string np1 = " -np 1 -x CUDA_VISIBLE_DEVICES=";
  const std::vector<Run> runs = {
      {"NCCL over 2 GPUs", tower + det + " --replicas=2", "nccl", 2},
      {"NCCL over 3 GPUs", tower + det + " --replicas=3", "nccl", 3},
      {"NCCL over 4 GPUs", tower + det + " --replicas=4", "nccl", 4},
      {"2 processes x 2 GPUs over NCCL",
       Mpirun(60) + np1 + Cards(0, 2) + " " + tower + det + " --replicas=2 SAVE :" + np1 +
           Cards(2, 2) + " " + tower + det + " --replicas=2",
       "one NCCL communicator over 4 GPUs", 4},
      {"2 processes sharing 2 cards, MPI between them",
       Mpirun(60) + " -np 2 " + tower + det + " --replicas=2", "MPI on the host", 2},
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].cards > cards_) {  // a real machine with fewer cards
      std::printf("left out: %s (needs %d cards; this machine has %d)\n", runs[i].name.c_str(),
                  runs[i].cards, cards_);
      continue;
    }
    // A reduced round (TOWER_REDUCED_ROUND=1: CI's sanitizer stages) keeps NCCL over 3 GPUs
    // of the three in-process NCCL runs, and both runs across processes.
    if (testing::ReducedRound() && (runs[i].name == "NCCL over 2 GPUs" ||
                                    runs[i].name == "NCCL over 4 GPUs")) {
      continue;
    }
    const std::string saved = Dir() + "/det_gpu" + std::to_string(i) + ".safetensors";
    // Every worker gets --save (the chief writes): at SAVE, and at the end.
    std::string command = runs[i].command + " --save=" + saved;
    const size_t at = command.find("SAVE");
    if (at != std::string::npos) command.replace(at, 4, "--save=" + saved);
    ProgramOutput out = testing::RunCommand(command);
    ASSERT_EQ(out.exit_code, 0) << runs[i].name << "\n" << out.text;
    EXPECT_THAT(out.text, HasSubstr(runs[i].log)) << runs[i].name;
    EXPECT_TRUE(Bytes(saved) == expected) << runs[i].name << " saved other bytes than one GPU";
  }
}

TEST_F(MpiGpuTest, AWorkerKilledMidCollectiveIsNamedByTheSurvivors) {
  if (!testing::kEmulatedGpus) {
    TOWER_SKIP_NEEDS_EMULATION("fault injection (CUDAEMU_NCCL_DIE: an NCCL rank that dies "
                               "in its third collective)");
  }
  const auto start = std::chrono::steady_clock::now();
  // NCCL rank 2 (worker 1's first GPU) dies in its third collective.
  ProgramOutput out = TwoWorkers("", "CUDAEMU_NCCL_DIE=2:collective:3");
  // Up to 2.5 s with TSan-built workers in CI (2026-11-29): a bound against a hang.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.exit_code, 124) << "timed out: the job hung\n" << out.text;
  // Worker 0's own report, from the NCCL error: the lost rank and which worker holds it.
  EXPECT_THAT(out.text, HasSubstr("error: "));
  EXPECT_THAT(out.text, HasSubstr("closed its connection"));
  EXPECT_THAT(out.text, HasSubstr("NCCL rank k is worker k / 2"));
}

TEST_F(MpiGpuTest, AWorkerKilledDuringSetupIsNamedByTheSurvivor) {
  if (!testing::kEmulatedGpus) {
    TOWER_SKIP_NEEDS_EMULATION("fault injection (CUDAEMU_NCCL_DIE: an NCCL rank that dies "
                               "before joining setup)");
  }
  const auto start = std::chrono::steady_clock::now();
  // NCCL rank 2 (worker 1) dies after the NCCL id was shared, before joining.
  ProgramOutput out =
      TwoWorkers("", "CUDAEMU_NCCL_DIE=2:init", /*survivors_report=*/true, /*timeout_s=*/2);
  // Two deadlines of 2 s: NCCL setup, then the round over MPI that names who is missing. Up
  // to 9 s with TSan-built workers in CI (2026-11-29); 60 s is 6.7 times that.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.exit_code, 124) << "timed out: the job hung\n" << out.text;
  EXPECT_THAT(out.text, HasSubstr("NCCL setup across processes"));
  EXPECT_THAT(out.text, HasSubstr("did not complete within 2000 ms"));
  EXPECT_THAT(out.text, HasSubstr("rank 1 (host"));
}

}  // namespace
}  // namespace tower
