// Several processes under Open MPI's mpirun: closed-form cross-process all-reduces, the
// 1-process-vs-N equivalence of `tower train`, a killed worker, a stalled worker and a
// mismatched worker — the last three must end the job with a named error, not a hang.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/checkpoint/safetensors.h"
#include "tests/testing/run_program.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::ProgramOutput;

// mpirun with what these machines need: run as root, more processes than cores, and a
// wall-clock bound so a broken fault path fails the test instead of hanging CI.
std::string Mpirun(int processes) {
  return "timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np " +
         std::to_string(processes) + " ";
}

using testing::Runfile;

ProgramOutput Shell(const std::string& command) { return testing::RunCommand(command); }

ProgramOutput Worker(int processes, const std::string& args) {
  return Shell(Mpirun(processes) + Runfile("tests/strategy/mpi/mpi_worker") + " " + args);
}

TEST(MpiTest, AllReduceAcrossProcessesAndReplicas) {
  for (const auto& [processes, replicas] : std::vector<std::pair<int, int>>{{2, 1}, {2, 2}, {3, 1}, {3, 2}}) {
    ProgramOutput out = Worker(processes, "allreduce " + std::to_string(replicas));
    ASSERT_EQ(out.exit_code, 0) << processes << "x" << replicas << "\n" << out.text;
    for (int r = 0; r < processes; ++r) {
      EXPECT_THAT(out.text, HasSubstr("rank " + std::to_string(r) + ": allreduce OK (" +
                                      std::to_string(processes * replicas) + " replicas in sync)"));
    }
    EXPECT_THAT(out.text, HasSubstr("[rank 1] "));  // every worker's log lines carry its rank
  }
}

TEST(MpiTest, AKilledWorkerEndsTheJobWithinTheDeadline) {
  const auto start = std::chrono::steady_clock::now();
  ProgramOutput out = Worker(3, "die 1 5000");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.exit_code, 124) << "timed out: the job hung\n" << out.text;
  // Either our deadline named rank 1, or mpirun saw it die and ended the job first.
  EXPECT_THAT(out.text, ::testing::AnyOf(HasSubstr("rank 1 (host"), HasSubstr("rank 1 with PID"),
                                         HasSubstr("exited on signal 9")));
}

TEST(MpiTest, AStalledWorkerIsNamedByTheOthers) {
  const auto start = std::chrono::steady_clock::now();
  ProgramOutput out = Worker(2, "stall 1 1500");
  // Rank 1 sleeps 30 s: the job must end long before, when rank 0 gives up.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.exit_code, 124) << "timed out: the job hung\n" << out.text;
  EXPECT_THAT(out.text, HasSubstr("rank 0 error: DEADLINE_EXCEEDED: "));
  EXPECT_THAT(out.text, HasSubstr("rank 1 (host"));
  EXPECT_THAT(out.text, HasSubstr("never reached collective"));
}

TEST(MpiTest, AMismatchedWorkerIsReportedOnEveryRank) {
  ProgramOutput out = Worker(2, "mismatch 1");
  EXPECT_NE(out.exit_code, 0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(out.text, HasSubstr("rank " + std::to_string(r) +
                                    " error: INVALID_ARGUMENT: workers disagree before the first step"));
  }
  EXPECT_THAT(out.text, HasSubstr("layers.0.kernel [8, 16]"));
  EXPECT_THAT(out.text, HasSubstr("layers.0.kernel [8, 32]"));
}

std::vector<float> Weights(const std::string& path, const std::string& name) {
  StatusOr<checkpoint::File> file = checkpoint::Load(path);
  TOWER_CHECK_OK(file.status());
  return *checkpoint::ToFloats(*file->Find(name));
}

// The Done-when of the multi-worker issue, at test size: 2 processes × 2 replicas save what
// 4 replicas in one process save, and what one device saves on the same global batches.
TEST(MpiTest, TwoProcessesTimesTwoReplicasTrainLikeFourLocalReplicas) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp ? tmp : "/tmp";
  const std::string tower = Runfile("tools/tower");
  const std::string common = " train --data=synthetic:mlp:rows=600 --layers=32:tanh,16:relu,1 "
                             "--steps=20 --global-batch=30 --verbose=0 --save=";
  ProgramOutput local = Shell(tower + common + dir + "/local.safetensors --replicas=4");
  ASSERT_EQ(local.exit_code, 0) << local.text;
  ProgramOutput multi = Shell(Mpirun(2) + tower + common + dir + "/multi.safetensors --replicas=2");
  ASSERT_EQ(multi.exit_code, 0) << multi.text;
  EXPECT_THAT(multi.text, HasSubstr("MultiWorkerMirroredStrategy"));
  ProgramOutput single = Shell(tower + common + dir + "/single.safetensors --replicas=1");
  ASSERT_EQ(single.exit_code, 0) << single.text;
  // ‖a − b‖ / ‖b‖ over every weight.
  auto relative_error = [&](const std::string& a_path, const std::string& b_path) {
    double num = 0, den = 0;
    for (const char* name : {"layers.0.kernel", "layers.0.bias", "layers.1.kernel",
                             "layers.1.bias", "layers.2.kernel", "layers.2.bias"}) {
      const std::vector<float> a = Weights(a_path, name);
      const std::vector<float> b = Weights(b_path, name);
      EXPECT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        num += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
        den += double{b[i]} * b[i];
      }
    }
    return std::sqrt(num / den);
  };
  EXPECT_LE(relative_error(dir + "/multi.safetensors", dir + "/local.safetensors"), 1e-5);
  // And as one device on the whole global batch.
  EXPECT_LE(relative_error(dir + "/multi.safetensors", dir + "/single.safetensors"), 1e-5);
}

}  // namespace
}  // namespace tower
