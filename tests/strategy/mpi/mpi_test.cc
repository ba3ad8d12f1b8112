// Several processes under Open MPI's mpirun: closed-form cross-process all-reduces, the
// 1-process-vs-N equivalence of `tower train`, a killed worker, a stalled worker and a
// mismatched worker — the last three must end the job with a named error, not a hang.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/checkpoint/safetensors.h"
#include "tests/testing/reduced_round.h"
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
  // A reduced round (TOWER_REDUCED_ROUND=1: CI's sanitizer stages) keeps 3 processes × 2
  // replicas, the layout with both kinds of peers on each side.
  std::vector<std::pair<int, int>> layouts = {{2, 1}, {2, 2}, {3, 1}, {3, 2}};
  if (testing::ReducedRound()) layouts = {{3, 2}};
  for (const auto& [processes, replicas] : layouts) {
    ProgramOutput out = Worker(processes, "allreduce " + std::to_string(replicas));
    ASSERT_EQ(out.exit_code, 0) << processes << "x" << replicas << "\n" << out.text;
    for (int r = 0; r < processes; ++r) {
      EXPECT_THAT(out.text, HasSubstr("rank " + std::to_string(r) + ": allreduce OK (" +
                                      std::to_string(processes * replicas) + " replicas in sync)"));
    }
    EXPECT_THAT(out.text, HasSubstr("[rank 1] "));  // every worker's log lines carry its rank
  }
}

TEST(MpiTest, AKilledWorkerIsNamedByTheSurvivorsWithinTheDeadline) {
  // mpirun would end the job itself when a process dies, before any survivor could say
  // which: told not to, it leaves the report to Tower's own deadline.
  const auto start = std::chrono::steady_clock::now();
  ProgramOutput out = Shell("timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none "
                            "--mca orte_abort_on_non_zero_status 0 -np 3 " +
                            Runfile("tests/strategy/mpi/mpi_worker") + " die 1 5000");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.exit_code, 124) << "timed out: the job hung\n" << out.text;
  // A surviving worker's own error, naming the dead one.
  const size_t report = std::min(out.text.find("rank 0 error: "), out.text.find("rank 2 error: "));
  ASSERT_NE(report, std::string::npos) << out.text;
  const std::string line = out.text.substr(report, out.text.find('\n', report) - report);
  EXPECT_THAT(line, HasSubstr("rank 1 (host")) << out.text;
}

// Open MPI's TCP transport writes to a peer that died mid-transfer with writev: SIGPIPE's
// default action would end the writing worker silently, before it could name the dead peer
// (a killed host's survivor did so now and then). Every worker must get EPIPE instead.
TEST(MpiTest, AWriteToADeadPeersSocketFailsInsteadOfEndingTheWorker) {
  ProgramOutput out = Worker(2, "closed-socket 1");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(out.text, HasSubstr("rank " + std::to_string(r) +
                                    ": closed-socket OK (2 replicas in sync)"));
  }
  // A program that handles SIGPIPE itself keeps its handler.
  ProgramOutput own = Worker(2, "own-sigpipe-handler 1");
  ASSERT_EQ(own.exit_code, 0) << own.text;
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(own.text, HasSubstr("rank " + std::to_string(r) +
                                    ": own-sigpipe-handler OK (2 replicas in sync)"));
  }
}

TEST(MpiTest, AStalledWorkerIsNamedByTheOthers) {
  const auto start = std::chrono::steady_clock::now();
  ProgramOutput out = Worker(2, "stall 1 1500");
  // Rank 1 sleeps 120 s: the job must end long before, when rank 0 gives up. It took up to
  // 6.7 s with TSan-built workers in CI (2026-11-29); 60 s is 9 times that.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.exit_code, 124) << "timed out: the job hung\n" << out.text;
  EXPECT_THAT(out.text, HasSubstr("rank 0 error: DEADLINE_EXCEEDED: "));
  EXPECT_THAT(out.text, HasSubstr("rank 1 (host"));
  EXPECT_THAT(out.text, HasSubstr("never reached collective"));
  // At half the deadline, before giving up, rank 0 said whom it was waiting for.
  EXPECT_THAT(out.text, HasSubstr("has waited 750 ms, half the deadline, at collective"));
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

// What README promises: workers with other replica counts or other gradient buckets are
// refused on every rank, naming both sides.
TEST(MpiTest, WorkersWithOtherReplicaCountsOrBucketsAreRefusedOnEveryRank) {
  ProgramOutput replicas = Worker(2, "replicas-mismatch 1");
  EXPECT_NE(replicas.exit_code, 0);
  EXPECT_NE(replicas.exit_code, 124) << "timed out: the job hung\n" << replicas.text;
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(replicas.text, HasSubstr("rank " + std::to_string(r) +
                                         " error: INVALID_ARGUMENT: workers disagree on local "
                                         "replicas: rank 0 (host "));
  }
  EXPECT_THAT(replicas.text, HasSubstr(") has 1, rank 1 (host "));
  EXPECT_THAT(replicas.text, HasSubstr(") has 2; give every worker the same --replicas"));

  ProgramOutput buckets = Worker(2, "buckets-mismatch 1");
  EXPECT_NE(buckets.exit_code, 0);
  EXPECT_NE(buckets.exit_code, 124) << "timed out: the job hung\n" << buckets.text;
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(buckets.text, HasSubstr("rank " + std::to_string(r) +
                                        " error: INVALID_ARGUMENT: workers disagree before the "
                                        "first step"));
  }
  EXPECT_THAT(buckets.text, HasSubstr("gradient buckets of 26214400 bytes"));
  EXPECT_THAT(buckets.text, HasSubstr("gradient buckets of 1048576 bytes"));
}

std::vector<float> Weights(const std::string& path, const std::string& name) {
  StatusOr<checkpoint::File> file = checkpoint::Load(path);
  TOWER_CHECK_OK(file.status());
  return *checkpoint::ToFloats(*file->Find(name));
}

// ‖a − b‖ / ‖b‖ over the named weights of two saved models; NaN (which fails every ≤)
// when their sizes differ or a value is NaN.
double RelativeError(const std::string& a_path, const std::string& b_path,
                     const std::vector<std::string>& names) {
  double num = 0, den = 0;
  for (const std::string& name : names) {
    const std::vector<float> a = Weights(a_path, name);
    const std::vector<float> b = Weights(b_path, name);
    if (a.size() != b.size()) return NAN;
    for (size_t i = 0; i < a.size(); ++i) {
      num += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
      den += double{b[i]} * b[i];
    }
  }
  return std::sqrt(num / den);
}

// The numbers after "<prefix>" on each line that starts with it, line by line.
std::vector<std::vector<double>> NumbersAfter(const std::string& text, const std::string& prefix) {
  std::vector<std::vector<double>> lines;
  size_t at = 0;
  while ((at = text.find(prefix, at)) != std::string::npos) {
    if (at > 0 && text[at - 1] != '\n') {
      at += prefix.size();
      continue;
    }
    const size_t end = text.find('\n', at);
    std::istringstream in(text.substr(at + prefix.size(), end - at - prefix.size()));
    std::vector<double> numbers;
    std::string word;
    while (in >> word) {
      char* rest = nullptr;
      const double value = std::strtod(word.c_str(), &rest);
      if (rest != word.c_str() && *rest == '\0') numbers.push_back(value);
    }
    lines.push_back(numbers);
    at = end;
  }
  return lines;
}

// Every number of `a` within `tolerance` (relative) of `b`'s; a NaN never is.
void ExpectClose(const std::vector<std::vector<double>>& a,
                 const std::vector<std::vector<double>>& b, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << what << ", line " << i;
    for (size_t k = 0; k < a[i].size(); ++k) {
      EXPECT_TRUE(std::abs(a[i][k] - b[i][k]) <= tolerance * std::max(1.0, std::abs(b[i][k])))
          << what << ", line " << i << ", number " << k << ": " << a[i][k] << " vs " << b[i][k];
    }
  }
}

// DistributeDataset, Run and Reduce (sum and mean, tensor and
// scalar) under mpirun -np 2 with 2 replicas each give what 4 replicas give in one process,
// including the uneven final batch (11 rows in batches of 4), and both match closed forms
// (checked inside the worker, on every rank).
TEST(MpiTest, RunReduceAndDistributeDatasetAcrossWorkersMatchOneProcess) {
  ProgramOutput local = Shell(Runfile("tests/strategy/mpi/mpi_worker") + " api 4");
  ASSERT_EQ(local.exit_code, 0) << local.text;
  EXPECT_THAT(local.text, HasSubstr("rank 0: api OK (4 replicas in sync)"));
  ProgramOutput multi = Worker(2, "api 2");
  ASSERT_EQ(multi.exit_code, 0) << multi.text;
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(multi.text, HasSubstr("rank " + std::to_string(r) + ": api OK (4 replicas in sync)"));
  }
  const auto expected = NumbersAfter(local.text, "rank 0: batch ");
  ASSERT_EQ(expected.size(), 3u) << local.text;  // batches of 4, 4 and 3 rows
  ExpectClose(NumbersAfter(multi.text, "rank 0: batch "), expected, 1e-5, "rank 0");
  ExpectClose(NumbersAfter(multi.text, "rank 1: batch "), expected, 1e-5, "rank 1");
}

// The custom-loop example: 2 workers × 2 replicas train as 4 replicas in one process.
TEST(MpiTest, CustomTrainingLoopOnTwoWorkersTrainsLikeFourLocalReplicas) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp ? tmp : "/tmp";
  const std::string example = Runfile("examples/custom_training_loop");
  ProgramOutput local = Shell(example + " --replicas=4 --save=" + dir + "/loop_local.safetensors");
  ASSERT_EQ(local.exit_code, 0) << local.text;
  ProgramOutput multi =
      Shell(Mpirun(2) + example + " --replicas=2 --save=" + dir + "/loop_multi.safetensors");
  ASSERT_EQ(multi.exit_code, 0) << multi.text;
  EXPECT_THAT(multi.text, HasSubstr("MultiWorkerMirroredStrategy"));
  EXPECT_THAT(multi.text, HasSubstr("over 10 steps on 4 replicas"));
  ExpectClose(NumbersAfter(multi.text, "epoch "), NumbersAfter(local.text, "epoch "), 1e-5,
              "the epochs' losses");
  EXPECT_LE(RelativeError(dir + "/loop_multi.safetensors", dir + "/loop_local.safetensors",
                          {"layers.0.kernel", "layers.0.bias", "layers.1.kernel", "layers.1.bias"}),
            1e-5);
}

// The Done-when of the multi-worker issue, at test size: 2 processes × 2 replicas save what
// 4 replicas in one process save, and what one device saves on the same global batches.
TEST(MpiTest, TwoProcessesTimesTwoReplicasTrainLikeFourLocalReplicas) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp ? tmp : "/tmp";
  const std::string tower = Runfile("tools/tower");
  const std::string common = " train --data=synthetic:mlp:rows=600 --layers=32:tanh,16:relu,1 "
                             "--steps=20 --global-batch=30 --verbose=0 --metrics=mae "
                             "--save=";
  ProgramOutput local = Shell(tower + common + dir + "/local.safetensors --replicas=4 "
                              "--metrics-out=" + dir + "/local.csv");
  ASSERT_EQ(local.exit_code, 0) << local.text;
  ProgramOutput multi = Shell(Mpirun(2) + tower + common + dir + "/multi.safetensors --replicas=2 "
                              "--metrics-out=" + dir + "/multi.csv");
  ASSERT_EQ(multi.exit_code, 0) << multi.text;
  EXPECT_THAT(multi.text, HasSubstr("MultiWorkerMirroredStrategy"));
  // Two workers of one job (not two processes each training alone on the whole batch).
  for (int r = 0; r < 2; ++r) {
    const std::string worker = "] Worker rank " + std::to_string(r) + " (host ";
    const size_t at = multi.text.find(worker);
    ASSERT_NE(at, std::string::npos) << multi.text;
    EXPECT_THAT(multi.text.substr(at, multi.text.find('\n', at) - at),
                ::testing::EndsWith(" of 2: 4 replicas in sync"));
  }
  // The chief's metrics cover every worker's rows, not only its own: the epoch's loss and
  // mean absolute error are those of 4 local replicas. (The CSV's header, and its first
  // row's numbers.)
  auto csv = [](const std::string& path, std::string* header) {
    std::ifstream in(path);
    std::string row;
    std::getline(in, *header);
    std::getline(in, row);
    std::replace(row.begin(), row.end(), ',', ' ');
    return NumbersAfter("row " + row + "\n", "row ");
  };
  std::string local_header, multi_header;
  const auto local_row = csv(dir + "/local.csv", &local_header);
  const auto multi_row = csv(dir + "/multi.csv", &multi_header);
  EXPECT_EQ(local_header, "epoch,loss,mae");
  EXPECT_EQ(multi_header, local_header);
  ASSERT_EQ(local_row.size(), 1u);
  ASSERT_EQ(local_row[0].size(), 3u);
  ExpectClose(multi_row, local_row, 1e-5, "epoch 1's loss and mae");
  ProgramOutput single = Shell(tower + common + dir + "/single.safetensors --replicas=1");
  ASSERT_EQ(single.exit_code, 0) << single.text;
  const std::vector<std::string> weights = {"layers.0.kernel", "layers.0.bias",
                                            "layers.1.kernel", "layers.1.bias",
                                            "layers.2.kernel", "layers.2.bias"};
  EXPECT_LE(RelativeError(dir + "/multi.safetensors", dir + "/local.safetensors", weights), 1e-5);
  // And as one device on the whole global batch.
  EXPECT_LE(RelativeError(dir + "/multi.safetensors", dir + "/single.safetensors", weights), 1e-5);
}

// Gradient accumulation across workers: 2 processes × 2 replicas, each shard in 4
// micro-batches of at most 16 rows, one all-reduce per step, against one device taking each
// global batch of 256 whole (with clipping by global norm, which needs the sums of both
// workers before any update).
TEST(MpiTest, AccumulatedMicroBatchesOnTwoWorkersTrainLikeOneDeviceOnTheWholeBatch) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp ? tmp : "/tmp";
  const std::string tower = Runfile("tools/tower");
  const std::string common = " train --data=synthetic:mlp:rows=1100 --layers=32:tanh,16:relu,1 "
                             "--steps=8 --global-batch=256 --verbose=0 --optimizer=adam "
                             "--lr=0.003 --clip-norm=0.5 --save=";
  ProgramOutput single = Shell(tower + common + dir + "/whole.safetensors --replicas=1");
  ASSERT_EQ(single.exit_code, 0) << single.text;
  ProgramOutput multi = Shell(Mpirun(2) + tower + common + dir +
                              "/accumulated.safetensors --replicas=2 --accumulate=4");
  ASSERT_EQ(multi.exit_code, 0) << multi.text;
  EXPECT_THAT(multi.text, HasSubstr("MultiWorkerMirroredStrategy"));
  const std::vector<std::string> weights = {"layers.0.kernel", "layers.0.bias",
                                            "layers.1.kernel", "layers.1.bias",
                                            "layers.2.kernel", "layers.2.bias"};
  EXPECT_LE(RelativeError(dir + "/accumulated.safetensors", dir + "/whole.safetensors", weights),
            1e-5);
}

// Loss scaling across workers: rank 1's first replica overflows at step 10 of a
// mixed_float16 run (2 workers × 2 replicas). Every rank skips that step (the counter stays),
// the scale halves on every rank, the weights stay equal everywhere (every rank prints the
// same hash of them, each over its replicas' equal copies), and the run goes on.
TEST(MpiTest, AnOverflowOnOneWorkerSkipsTheStepOnEveryWorker) {
  ProgramOutput out = Worker(2, "loss-scale 2");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  std::vector<std::string> lines[2];
  std::istringstream text(out.text);
  for (std::string line; std::getline(text, line);) {
    for (int r = 0; r < 2; ++r) {
      const std::string prefix = "rank " + std::to_string(r) + ": step ";
      if (line.rfind(prefix, 0) == 0) lines[r].push_back(line.substr(prefix.size()));
    }
  }
  ASSERT_EQ(lines[0].size(), 16u) << out.text;
  EXPECT_EQ(lines[0], lines[1]) << "the ranks disagree:\n" << out.text;
  // Scale 1024 doubling after 4 good steps: 4096 after step 8; step 10 overflows: 2048.
  EXPECT_THAT(lines[0][8], HasSubstr("9 scale 4096 iterations 9 "));
  EXPECT_THAT(lines[0][9], HasSubstr("10 scale 2048 iterations 9 "));
  EXPECT_THAT(lines[0][15], HasSubstr("16 scale 4096 iterations 15 "));
  // The skipped step left the weights as they were; the next one moved them.
  auto hash = [](const std::string& line) {
    const size_t at = line.find(" weights ") + 9;
    return line.substr(at, line.find(' ', at) - at);
  };
  EXPECT_EQ(hash(lines[0][9]), hash(lines[0][8]));
  EXPECT_NE(hash(lines[0][10]), hash(lines[0][9]));
  for (const std::string& line : lines[0]) EXPECT_THAT(line, ::testing::EndsWith("copies equal"));
}

// The reduced-precision all-reduce across workers: bfloat16 on the wire, summed in
// float32. Each worker sends half the bytes of a float32 all-reduce (counted by the
// cross-process all-reduce), and the loss after training is within 2% of float32's.
TEST(MpiTest, ABfloat16AllReduceSendsHalfTheBytesAndTrainsAsFloat32Does) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp ? tmp : "/tmp";
  const std::string tower = Runfile("tools/tower");
  const std::string common = " train --data=synthetic:mlp:rows=2560 --layers=64:relu,64:relu,1 "
                             "--epochs=4 --global-batch=64 --optimizer=adam --lr=0.003 "
                             "--replicas=1 --verbose=2 --metrics-out=";
  double loss[2] = {0, 0};
  int64_t bytes[2][2] = {{0, 0}, {0, 0}};
  const char* dtypes[2] = {"float32", "bfloat16"};
  for (int d = 0; d < 2; ++d) {
    const std::string csv = dir + "/wire_" + dtypes[d] + ".csv";
    ProgramOutput run = Shell(Mpirun(2) + tower + common + csv + " --all-reduce-dtype=" +
                              dtypes[d]);
    ASSERT_EQ(run.exit_code, 0) << run.text;
    for (int r = 0; r < 2; ++r) {
      const std::string line = "Worker " + std::to_string(r) + " sent ";
      const size_t at = run.text.find(line);
      ASSERT_NE(at, std::string::npos) << run.text;
      bytes[d][r] = std::atoll(run.text.c_str() + at + line.size());
      EXPECT_THAT(run.text.substr(at, run.text.find('\n', at) - at),
                  HasSubstr(std::string("(") + dtypes[d] + ")"));
    }
    std::ifstream in(csv);
    std::string header, row, last;
    std::getline(in, header);
    while (std::getline(in, row)) last = row;
    ASSERT_FALSE(last.empty()) << csv;
    loss[d] = std::atof(last.c_str() + last.find(',') + 1);  // epoch,loss
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_GT(bytes[0][r], 0);
    EXPECT_EQ(2 * bytes[1][r], bytes[0][r]) << "worker " << r;
  }
  ASSERT_LT(loss[0], 10) << "float32 did not train (the loss starts near 250)";
  EXPECT_LE(std::fabs(loss[1] - loss[0]), 0.02 * loss[0])  // fails on NaN
      << "bfloat16 all-reduce loss " << loss[1] << " against float32's " << loss[0];
}

}  // namespace
}  // namespace tower
