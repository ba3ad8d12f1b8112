// Deterministic mode (`tower train --deterministic`, MirroredStrategyOptions::virtual_shards):
// the saved weights and optimizer state are the same bytes whatever the topology — 1 device;
// 2, 3, 4 and 8 replicas; mpirun -np 2 × 2 replicas and -np 4 × 1; 1 KB and 25 MB gradient
// buckets; the in-process and the reduce-to-CPU paths — over 100+ steps with an uneven
// final batch (one smaller than the virtual shard count, too), and a run killed and resumed
// on another replica count or process count ends with the bytes of an uninterrupted one.
// Workers that disagree on the virtual shard count are refused.
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/reduced_round.h"
#include "tests/testing/run_program.h"
#include "tests/testing/tower_cli.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::BackgroundProgram;
using testing::ProgramOutput;
using testing::ReadBytes;
using testing::Runfile;
using testing::TempPath;

// An mlp-shaped model with Adam: 1000 rows in batches of 96 make 11 steps per epoch, the
// last of 40 rows; 10 epochs, 110 steps.
const std::string kAdam =
    "train --data=synthetic:mlp:rows=1000:seed=3 --layers=128:relu,64:tanh,1 --epochs=10 "
    "--global-batch=96 --shuffle --seed=7 --optimizer=adam --lr=0.001 --verbose=0 "
    "--deterministic ";
// SGD with Nesterov momentum; 1061 rows: the last batch has 5 rows, so 3 of the 8 virtual
// shards are empty. 12 steps per epoch, 120 steps.
const std::string kMomentum =
    "train --data=synthetic:mlp:rows=1061:seed=5 --layers=96:tanh,48:relu,1 --epochs=10 "
    "--global-batch=96 --shuffle --seed=11 --optimizer=sgd --momentum=0.9 --nesterov "
    "--lr=0.002 --verbose=0 --deterministic ";

// mpirun with what these machines need (root, more processes than cores), bounded in time.
std::string Mpirun(int processes) {
  return "timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np " +
         std::to_string(processes) + " ";
}

struct Topology {
  std::string name;
  int processes;      // 0: one process, no mpirun
  std::string flags;  // replicas (per process), path, buckets
};

// Every topology, or those TOWER_DETERMINISTIC_TOPOLOGIES names: "one-process" or "mpirun"
// (the first topology, 1 device, is in both: the reference). BUILD runs the cases as two
// tests: under ASan the mpirun half needs LeakSanitizer's slow unwinder (Open MPI,
// .ci/stages.py), which slowed every process of the whole test. Under ASan on this 2-core
// machine (2026-11-26): 116 s as one test, 39 s + 64 s as two.
//
// In a reduced round (TOWER_REDUCED_ROUND=1: CI's sanitizer stages), one topology of each
// path besides the reference: 3 replicas with 1 KB buckets (in-process, uneven shards, many
// buckets), 3 replicas reduced to the CPU, and mpirun -np 2 × 2 replicas with 1 KB buckets.
const std::vector<Topology>& Topologies() {
  static const std::vector<Topology> topologies = [] {
    std::vector<Topology> all = {
        {"1 device", 0, "--replicas=1"},
        {"2 replicas", 0, "--replicas=2"},
        {"3 replicas", 0, "--replicas=3"},
        {"4 replicas", 0, "--replicas=4"},
        {"8 replicas", 0, "--replicas=8"},
        {"4 replicas reduced to the CPU", 0, "--replicas=4 --cross-device-ops=to-cpu"},
        {"3 replicas reduced to the CPU", 0, "--replicas=3 --cross-device-ops=to-cpu"},
        {"3 replicas, 1 KB buckets", 0, "--replicas=3 --bucket-mb=0.0009765625"},
        {"2 replicas, 25 MB buckets", 0, "--replicas=2 --bucket-mb=25"},
        {"mpirun -np 2, 2 replicas each", 2, "--replicas=2"},
        {"mpirun -np 4, 1 replica each", 4, "--replicas=1"},
        {"mpirun -np 2, 2 replicas each, 1 KB buckets", 2, "--replicas=2 --bucket-mb=0.0009765625"},
    };
    if (testing::ReducedRound()) {
      const std::vector<std::string> kept = {"1 device", "3 replicas, 1 KB buckets",
                                             "3 replicas reduced to the CPU",
                                             "mpirun -np 2, 2 replicas each, 1 KB buckets"};
      std::vector<Topology> reduced;
      for (const Topology& topology : all) {
        if (std::find(kept.begin(), kept.end(), topology.name) != kept.end()) {
          reduced.push_back(topology);
        }
      }
      EXPECT_EQ(reduced.size(), kept.size());
      all = reduced;
    }
    const char* subset = std::getenv("TOWER_DETERMINISTIC_TOPOLOGIES");
    if (subset == nullptr) return all;
    const bool mpirun = std::string(subset) == "mpirun";
    EXPECT_TRUE(mpirun || std::string(subset) == "one-process")
        << "TOWER_DETERMINISTIC_TOPOLOGIES=" << subset << ": one-process or mpirun";
    std::vector<Topology> chosen = {all[0]};
    for (size_t i = 1; i < all.size(); ++i) {
      if ((all[i].processes > 0) == mpirun) chosen.push_back(all[i]);
    }
    return chosen;
  }();
  return topologies;
}

ProgramOutput Train(const std::string& run, const Topology& topology, const std::string& save) {
  const std::string args = run + topology.flags + " --save=" + save;
  if (topology.processes == 0) return testing::Tower(args);
  return testing::RunCommand(Mpirun(topology.processes) + Runfile("tools/tower") + " " + args);
}

void ExpectTheSameBytesOnEveryTopology(const std::string& run, const std::string& tag) {
  std::string reference;
  for (size_t i = 0; i < Topologies().size(); ++i) {
    const Topology& topology = Topologies()[i];
    const std::string save = TempPath(tag + std::to_string(i) + ".safetensors");
    ProgramOutput out = Train(run, topology, save);
    ASSERT_EQ(out.exit_code, 0) << topology.name << "\n" << out.text;
    const std::string bytes = ReadBytes(save);
    ASSERT_FALSE(bytes.empty()) << topology.name;
    if (i == 0) {
      reference = bytes;
      continue;
    }
    EXPECT_TRUE(bytes == reference)
        << tag << ": " << topology.name << " saved other bytes than " << Topologies()[0].name;
  }
}

TEST(DeterministicTest, AdamGivesTheSameBytesOnEveryTopology) {
  ExpectTheSameBytesOnEveryTopology(kAdam, "adam");
}

TEST(DeterministicTest, MomentumWithEmptyVirtualShardsGivesTheSameBytesOnEveryTopology) {
  ExpectTheSameBytesOnEveryTopology(kMomentum, "momentum");
}

TEST(DeterministicTest, WithoutItTopologiesDifferAndWithItTheMathIsTheSame) {
  // Without --deterministic, the replica count changes the rounding when each replica
  // computes its own shard, the default (what the mode is for: without this the byte
  // comparisons above would prove nothing)...
  const std::string unbatched = kAdam.substr(0, kAdam.find("--deterministic"));
  std::vector<std::string> saved;
  for (int replicas : {1, 3}) {
    const std::string save = TempPath("plain" + std::to_string(replicas) + ".safetensors");
    ProgramOutput out = testing::Tower(unbatched + "--replicas=" + std::to_string(replicas) +
                                       " --save=" + save);
    ASSERT_EQ(out.exit_code, 0) << out.text;
    saved.push_back(save);
  }
  EXPECT_NE(ReadBytes(saved[0]), ReadBytes(saved[1]));
  // ...but not with --batch-replica-rows on one host, where CPU replicas compute each step
  // as one batch of every replica's rows, in the global batch's order, with the same
  // intra-op threads as 1 replica: 1, 3 and 8 replicas save the same bytes (deterministic
  // mode, which never batches, is for other topologies: several workers, GPUs, another
  // bucket size).
  const std::string batched = unbatched + "--batch-replica-rows ";
  std::string one_replica;
  for (int replicas : {1, 3, 8}) {
    const std::string save = TempPath("batched" + std::to_string(replicas) + ".safetensors");
    ProgramOutput out = testing::Tower(batched + "--replicas=" + std::to_string(replicas) +
                                       " --save=" + save);
    ASSERT_EQ(out.exit_code, 0) << out.text;
    const std::string bytes = ReadBytes(save);
    ASSERT_FALSE(bytes.empty());
    if (replicas == 1) {
      one_replica = bytes;
    } else {
      EXPECT_TRUE(bytes == one_replica) << replicas << " replicas in one batch";
    }
  }
  // ...and the deterministic run trains the same model, to float rounding.
  const std::string det = TempPath("det1.safetensors");
  ASSERT_EQ(testing::Tower(kAdam + "--replicas=1 --save=" + det).exit_code, 0);
  for (const std::string name : {"layers.0.kernel", "layers.2.bias"}) {
    const std::vector<float> a = testing::SavedTensor(saved[0], name);
    const std::vector<float> b = testing::SavedTensor(det, name);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], 1e-3 * (1 + std::abs(a[i]))) << name << "[" << i << "]";
    }
  }
}

// Killed after a few backups on one topology, resumed on another: the bytes of the
// uninterrupted run. 20 epochs of 11 steps.
constexpr int64_t kKillSteps = 220;

void KillAndResume(const Topology& killed_on, const Topology& resumed_on, const std::string& tag) {
  // Bigger layers, more epochs and a backup every second step keep the run long enough to
  // be killed mid-way; the model is otherwise kAdam's.
  const std::string run =
      "train --data=synthetic:mlp:rows=1000:seed=3 --layers=384:relu,256:tanh,1 --epochs=20 "
      "--global-batch=96 --shuffle --seed=7 --optimizer=adam --lr=0.0005 --deterministic "
      "--backup-every=2 --resume ";
  const std::string reference = TempPath(tag + "_reference.safetensors");
  ProgramOutput uninterrupted =
      testing::Tower(run + "--verbose=0 --replicas=1 --backup=" + TempPath(tag + "_ref_backup.st") +
                     " --save=" + reference);
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.text;
  const std::string backup = TempPath(tag + "_backup.safetensors");
  const std::string saved = TempPath(tag + "_resumed.safetensors");
  bool killed = false;
  for (int attempt = 0; attempt < 4 && !killed; ++attempt) {
    std::remove(backup.c_str());
    std::remove(saved.c_str());
    const std::string args =
        run + "--verbose=0 " + killed_on.flags + " --backup=" + backup + " --save=" + saved;
    const std::string line = killed_on.processes == 0
                                 ? Runfile("tools/tower") + " " + args
                                 : Mpirun(killed_on.processes) + Runfile("tools/tower") + " " + args;
    BackgroundProgram job(BackgroundProgram::ShellCommand{line},
                          TempPath(tag + "_killed" + std::to_string(attempt) + ".log"));
    ASSERT_TRUE(job.started());
    // mpirun ends its workers when it is terminated; a lone process is killed outright.
    const int signal = killed_on.processes == 0 ? SIGKILL : SIGTERM;
    if (!testing::KillAfterBackups(job, backup, attempt == 0 ? 5 : 1, 0, signal)) continue;
    job.Wait();
    // mpirun takes a moment to end its workers: they may have finished meanwhile.
    killed = testing::BackupPosition(backup).total_steps < kKillSteps;
  }
  ASSERT_TRUE(killed) << tag << ": every run ended before the kill";
  const int64_t killed_at = testing::BackupPosition(backup).total_steps;
  EXPECT_GT(killed_at, 0);
  EXPECT_LT(killed_at, kKillSteps);
  ProgramOutput resumed = Train(run + "--verbose=1 --backup=" + backup + " ", resumed_on, saved);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.text;
  EXPECT_THAT(resumed.text, HasSubstr("Resuming from " + backup));
  EXPECT_TRUE(ReadBytes(saved) == ReadBytes(reference))
      << tag << ": killed on " << killed_on.name << " after step " << killed_at
      << ", resumed on " << resumed_on.name << ": other bytes than the uninterrupted run";
}

TEST(DeterministicTest, KilledOnFourReplicasAndResumedOnTwoGivesTheSameBytes) {
  KillAndResume({"4 replicas", 0, "--replicas=4"}, {"2 replicas", 0, "--replicas=2"}, "r4to2");
}

TEST(DeterministicTest, KilledOnTwoProcessesAndResumedOnOneGivesTheSameBytes) {
  KillAndResume({"mpirun -np 2, 2 replicas each", 2, "--replicas=2"},
                {"1 process, 3 replicas", 0, "--replicas=3"}, "p2to1");
}

TEST(DeterministicTest, TooFewVirtualShardsForTheReplicasIsRefused) {
  ProgramOutput out = testing::Tower(kAdam + "--replicas=4 --virtual-shards=3");
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_THAT(out.text, HasSubstr("3 virtual shards cannot feed 4 replicas"));
  out = testing::Tower("train --data=synthetic:linreg --epochs=1 --virtual-shards=4");
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_THAT(out.text, HasSubstr("--virtual-shards needs --deterministic"));
}

TEST(DeterministicTest, WorkersWithOtherVirtualShardCountsAreRefusedOnEveryRank) {
  const std::string tower = Runfile("tools/tower") + " " + kAdam + "--replicas=1 ";
  ProgramOutput out = testing::RunCommand(Mpirun(1) + tower + "--virtual-shards=8 : -np 1 " +
                                          tower + "--virtual-shards=4");
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.exit_code, 124) << "timed out: the job hung\n" << out.text;
  EXPECT_THAT(out.text, HasSubstr("workers disagree before the first step"));
  EXPECT_THAT(out.text, HasSubstr("virtual shards 8"));
  EXPECT_THAT(out.text, HasSubstr("virtual shards 4"));
}

}  // namespace
}  // namespace tower
