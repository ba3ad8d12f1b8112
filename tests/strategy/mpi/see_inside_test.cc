// Seeing inside a multi-worker run, under mpirun: the flight recorder and `tower doctor` on
// injected faults (a rank that skips an all-reduce, a rank that sends another shape, a rank
// that stalls), and a 2-process × 2-replica trace of `tower train` merged into one file.
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/run_program.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::ProgramOutput;
using testing::Runfile;

std::string FreshDirectory(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  testing::RunCommand("rm -rf '" + dir + "' && mkdir -p '" + dir + "'");
  return dir;
}

// 3 workers of 2 replicas each, `scenario` with a collective deadline of `deadline_ms`,
// flight recorder files into `dir`. Returns the output and how long the job took.
std::pair<ProgramOutput, double> RunFault(const std::string& scenario, int deadline_ms,
                                          const std::string& dir) {
  const auto start = std::chrono::steady_clock::now();
  ProgramOutput out = testing::RunCommand(
      "timeout 150 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 3 "
      "-x TOWER_FLIGHT_RECORDER_DIR=" + dir + " " + Runfile("tests/strategy/mpi/mpi_worker") +
      " " + scenario + " 2 " + std::to_string(deadline_ms));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {out, seconds};
}

bool Exists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

// The fingerprint rank `rank` recorded for collective `sequence` (its flight recorder file),
// or "".
std::string FingerprintAt(const std::string& dir, int rank, const std::string& sequence) {
  std::ifstream file(dir + "/flight_recorder.rank" + std::to_string(rank) + ".json");
  if (!file.good() || sequence.empty()) return "";
  const nlohmann::json dump = nlohmann::json::parse(file);
  for (const nlohmann::json& record : dump.at("records")) {
    if (record.at("scope") == "workers" && std::to_string(record.at("sequence").get<uint64_t>()) == sequence) {
      return record.at("fingerprint");
    }
  }
  return "";
}

// The sequence number of the collective the workers' errors name.
std::string DivergedAt(const std::string& text) {
  std::smatch match;
  if (!std::regex_search(text, match, std::regex("the workers diverged at collective ([0-9]+)"))) {
    return "";
  }
  return match[1];
}

// A divergence fault (`scenario`, rank `faulty` astray) under mpirun -np 3 with a 20 s
// deadline: the job ends at once, every rank writes its file, and the fingerprints the
// ranks recorded for the collective the errors name differ on `faulty` only. Returns that
// collective, the expected fingerprint and `faulty`'s, and tower doctor's output.
struct Divergence {
  std::string sequence, expected, actual;
  ProgramOutput doctor;
};

Divergence RunDivergence(const std::string& scenario, int faulty) {
  const std::string dir = FreshDirectory(scenario);
  // Long enough that the whole job, start-up included, ends well before it unless somebody
  // waits for it: the fingerprints differ at once. The job took up to 6.7 s with TSan-built
  // workers in CI (2026-11-29); 60 s is 9 times that.
  const int deadline_ms = 60000;
  auto [out, seconds] = RunFault(scenario, deadline_ms, dir);
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.exit_code, 124) << "timed out: the job hung\n" << out.text;
  EXPECT_LT(seconds, deadline_ms / 1000.0) << out.text;
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(Exists(dir + "/flight_recorder.rank" + std::to_string(r) + ".json")) << r;
  }
  Divergence divergence;
  // Whichever rank printed its error first (MPI_Abort may end the others before they do).
  divergence.sequence = DivergedAt(out.text);
  EXPECT_FALSE(divergence.sequence.empty()) << out.text;
  const int good = faulty == 0 ? 1 : 0;
  divergence.expected = FingerprintAt(dir, good, divergence.sequence);
  divergence.actual = FingerprintAt(dir, faulty, divergence.sequence);
  EXPECT_FALSE(divergence.expected.empty());
  EXPECT_FALSE(divergence.actual.empty());
  EXPECT_NE(divergence.expected, divergence.actual);
  for (int r = 0; r < 3; ++r) {
    if (r != faulty) EXPECT_EQ(FingerprintAt(dir, r, divergence.sequence), divergence.expected) << r;
  }
  // The error a rank printed names the odd fingerprint.
  EXPECT_THAT(out.text, HasSubstr(divergence.actual));
  divergence.doctor = testing::RunCommand(Runfile("tools/tower") + " doctor " + dir);
  EXPECT_EQ(divergence.doctor.exit_code, 1) << divergence.doctor.text;
  const std::string& text = divergence.doctor.text;
  EXPECT_EQ(text.find("rank " + std::to_string(faulty) + " (host "), 0u) << text;  // named first
  EXPECT_THAT(text, HasSubstr(") diverged at collective " + divergence.sequence + ": it ran "));
  EXPECT_THAT(text, HasSubstr("(expected " + divergence.expected + ", actual " +
                              divergence.actual + ")"));
  return divergence;
}

TEST(SeeInsideTest, TowerDoctorNamesTheRankThatSkippedAnAllReduce) {
  const Divergence divergence = RunDivergence("skip", 1);
  const std::string& text = divergence.doctor.text;
  EXPECT_THAT(text, HasSubstr("step 6"));
  EXPECT_THAT(text, HasSubstr("it skipped a collective of step 5"));
  // ... and what every rank was doing.
  for (int r = 0; r < 3; ++r) EXPECT_THAT(text, HasSubstr("rank " + std::to_string(r) + " (host "));
  EXPECT_THAT(text, HasSubstr("replicas stopped: replica 0 in its all-reduce of step 5"));
}

TEST(SeeInsideTest, TowerDoctorNamesTheRankThatSentAnotherShape) {
  const Divergence divergence = RunDivergence("shape", 2);
  // 101009 floats where the others sum 101008.
  EXPECT_THAT(divergence.doctor.text,
              HasSubstr("it sends 404036 bytes where the others send 404032"));
}

// Rank 0 comes late to the collective where rank 2 sends another shape, once ranks 1 and 2
// have seen the divergence and written their files: they wait for rank 0 to see it and write
// its file before the job ends (before, rank 0 was killed first, and left no record of that
// collective).
TEST(SeeInsideTest, ALateRankStillRecordsTheDivergence) {
  const Divergence divergence = RunDivergence("late-shape", 2);
  EXPECT_THAT(divergence.doctor.text,
              HasSubstr("it sends 404036 bytes where the others send 404032"));
}

TEST(SeeInsideTest, TowerDoctorNamesTheRankThatNeverArrived) {
  const std::string dir = FreshDirectory("stall");
  const int deadline_ms = 1500;
  auto [out, seconds] = RunFault("stall", deadline_ms, dir);
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.exit_code, 124) << "timed out: the job hung\n" << out.text;
  // Rank 1 sleeps 120 s; the others give up at the deadline (plus the probe's second): the
  // job took up to 7.9 s with TSan-built workers in CI (2026-11-29), 60 s is 7.6 times that.
  EXPECT_LT(seconds, 60) << out.text;
  ASSERT_TRUE(Exists(dir + "/flight_recorder.rank0.json")) << out.text;
  ASSERT_TRUE(Exists(dir + "/flight_recorder.rank2.json")) << out.text;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(out.text, match,
                                std::regex("never reached collective ([0-9]+)")))
      << out.text;
  const std::string sequence = match[1];
  ProgramOutput doctor = testing::RunCommand(Runfile("tools/tower") + " doctor " + dir);
  EXPECT_EQ(doctor.exit_code, 1) << doctor.text;
  EXPECT_EQ(doctor.text.find("rank 1"), 0u) << doctor.text;
  EXPECT_THAT(doctor.text, HasSubstr("step 3"));
  // The stalled rank writes its file when mpirun ends it (SIGTERM), unless mpirun's SIGKILL
  // comes first (seen once under CI's load): the doctor names it either way.
  if (Exists(dir + "/flight_recorder.rank1.json")) {
    EXPECT_THAT(doctor.text, HasSubstr(") never reached collective " + sequence + " ("));
    EXPECT_THAT(doctor.text, HasSubstr("SIGTERM"));
  } else {
    EXPECT_THAT(doctor.text, HasSubstr("rank 1 wrote no file, and "));
    EXPECT_THAT(doctor.text, HasSubstr(" never saw collective " + sequence + " ("));
  }
}

// Every complete event of one lane either contains the next or ends before it starts.
void ExpectNested(const std::vector<const nlohmann::json*>& lane, const std::string& where) {
  std::vector<const nlohmann::json*> events = lane;
  std::sort(events.begin(), events.end(), [](const nlohmann::json* a, const nlohmann::json* b) {
    const double ta = a->at("ts"), tb = b->at("ts");
    if (ta != tb) return ta < tb;
    return a->at("dur").get<double>() > b->at("dur").get<double>();  // parents first
  });
  std::vector<double> open_ends;  // the ends of the enclosing events
  const double slack = 0.002;     // µs: the printed times' rounding
  for (const nlohmann::json* event : events) {
    const double start = event->at("ts"), end = start + event->at("dur").get<double>();
    while (!open_ends.empty() && open_ends.back() <= start + slack) open_ends.pop_back();
    if (!open_ends.empty()) {
      EXPECT_LE(end, open_ends.back() + slack)
          << where << ": " << event->dump() << " overlaps its enclosing event";
    }
    open_ends.push_back(end);
  }
}

TEST(SeeInsideTest, ATwoProcessTimesTwoReplicaTraceHasEveryLaneAndEveryBucket) {
  const std::string dir = FreshDirectory("trace");
  const std::string path = dir + "/trace.json";
  // 3 dense layers = 6 gradients; buckets of 1 byte: one bucket each.
  ProgramOutput out = testing::RunCommand(
      "timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 " +
      Runfile("tools/tower") +
      " train --data=synthetic:mlp --layers=16:relu,16:relu,1 --replicas=2 --global-batch=32 "
      "--steps=6 --verbose=0 --bucket-mb=0.000001 --trace=" + path + " --trace-steps=3:5");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << out.text;
  nlohmann::json trace;
  ASSERT_NO_THROW(trace = nlohmann::json::parse(file));
  const nlohmann::json& events = trace.at("traceEvents");
  // (pid, tid) -> complete events; the named lanes.
  std::map<std::pair<int, int>, std::vector<const nlohmann::json*>> lanes;
  std::map<std::pair<int, int>, std::string> lane_names;
  for (const nlohmann::json& event : events) {
    const std::string phase = event.at("ph");
    const int pid = event.at("pid");
    const int tid = event.value("tid", -100);
    if (phase == "M" && event.at("name") == "thread_name") {
      lane_names[{pid, tid}] = event.at("args").at("name");
    } else if (phase == "X") {
      lanes[{pid, tid}].push_back(&event);
    }
  }
  // 4 replica lanes (2 workers × 2 replicas), each named after its replica and device.
  for (int pid = 0; pid < 2; ++pid) {
    for (int tid = 0; tid < 2; ++tid) {
      ASSERT_TRUE(lanes.count({pid, tid})) << "no events of worker " << pid << " replica " << tid;
      EXPECT_THAT(lane_names[std::make_pair(pid, tid)],
                  HasSubstr("replica " + std::to_string(tid) + " (/job:worker/replica:0/task:" +
                            std::to_string(pid)));
    }
  }
  int replica_lanes = 0;
  for (const auto& [lane, list] : lanes) {
    replica_lanes += lane.second >= 0 && lane.second < 1000;
    ExpectNested(list, "worker " + std::to_string(lane.first) + " lane " +
                           std::to_string(lane.second));
  }
  EXPECT_EQ(replica_lanes, 4);
  // On every replica lane, steps 3, 4 and 5, each with one all-reduce per bucket (0..5),
  // inside the step, and a forward and a backward per layer.
  for (int pid = 0; pid < 2; ++pid) {
    for (int tid = 0; tid < 2; ++tid) {
      const auto& list = lanes[{pid, tid}];
      std::map<int, std::pair<double, double>> steps;  // step -> [start, end]
      for (const nlohmann::json* event : list) {
        if (event->at("cat") == "step") {
          const double ts = event->at("ts");
          steps[event->at("args").at("step")] = {ts, ts + event->at("dur").get<double>()};
        }
      }
      ASSERT_EQ(steps.size(), 3u) << "worker " << pid << " replica " << tid;
      EXPECT_EQ(steps.begin()->first, 3);
      for (const auto& [step, span] : steps) {
        std::multiset<int> buckets;
        int forwards = 0, backwards = 0;
        for (const nlohmann::json* event : list) {
          const double ts = event->at("ts");
          if (ts < span.first || ts > span.second) continue;
          if (event->at("cat") == "all-reduce") buckets.insert(event->at("args").at("bucket").get<int>());
          forwards += event->at("cat") == "forward";
          backwards += event->at("cat") == "backward";
        }
        EXPECT_EQ(buckets, (std::multiset<int>{0, 1, 2, 3, 4, 5}))
            << "worker " << pid << " replica " << tid << " step " << step;
        EXPECT_EQ(forwards, 3);
        EXPECT_EQ(backwards, 3);
      }
    }
  }
}

}  // namespace
}  // namespace tower
