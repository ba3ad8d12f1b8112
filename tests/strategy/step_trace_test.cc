// StepTrace in one process: 4 replicas as fibers on 2 threads (and 1 replica without a
// strategy) give one lane per replica, the traced steps only, correctly nested events, one
// all-reduce per bucket per step, and the input pipeline on the training loop's lane.
#include "model/trace_callback.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/synthetic.h"
#include "device/testing/fake_gpu_platform.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"
#include "util/trace.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

data::Dataset Batches() {
  data::SyntheticOptions options;
  options.name = "mlp";
  options.rows = 64 * 8;
  options.seed = 5;
  return data::Dataset::Synthetic(options)->Batch(64);
}

// Trains 6 steps with a trace of steps 2..4 on `replicas` replicas (0: no strategy), the
// replicas of a thread batched or not, and returns the trace.
nlohmann::json TraceOf(int replicas, int replica_threads, const std::string& path,
                       bool batch = false, int batch_threads = 0) {
  auto context = testing::MakeContextWithFakeGpus({});
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0],
      std::vector<LogicalDeviceConfiguration>(std::max(replicas, 1))));
  ScopedDefaultContext use(*context);
  Sequential model({Dense(16, "relu"), Dense(8, "relu"), Dense(1)}, 3);
  std::unique_ptr<MirroredStrategy> strategy;
  if (replicas > 0) {
    MirroredStrategyOptions options;
    options.context = context.get();
    options.bucket_bytes = 1;  // a bucket per gradient: 6
    options.replica_threads = replica_threads;
    options.batch_replica_rows = batch;
    options.batch_threads = batch_threads;
    strategy = std::move(MirroredStrategy::Create(options)).value();
    auto scope = strategy->Scope();
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)));
  } else {
    TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)));
  }
  auto trace = std::make_shared<StepTrace>(path, 2, 4);
  FitOptions fit;
  fit.epochs = 1;
  fit.max_steps = 6;
  fit.verbose = 0;
  fit.callbacks = {trace};
  TOWER_CHECK_OK(model.Fit(Batches(), fit).status());
  EXPECT_TRUE(trace->written());
  EXPECT_FALSE(trace::Recording());
  std::ifstream file(path);
  return nlohmann::json::parse(file);
}

struct Lane {
  std::vector<nlohmann::json> events;
};

std::map<int, Lane> Lanes(const nlohmann::json& trace) {
  std::map<int, Lane> lanes;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    if (event.at("ph") == "X") {
      EXPECT_EQ(event.at("pid"), 0);
      lanes[event.at("tid")].events.push_back(event);
    }
  }
  return lanes;
}

void ExpectNestedAndPerStep(const Lane& lane, int tid) {
  std::vector<nlohmann::json> events = lane.events;
  std::sort(events.begin(), events.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    if (a.at("ts") != b.at("ts")) return a.at("ts").get<double>() < b.at("ts").get<double>();
    return a.at("dur").get<double>() > b.at("dur").get<double>();
  });
  std::vector<double> open_ends;
  for (const nlohmann::json& event : events) {
    const double start = event.at("ts"), end = start + event.at("dur").get<double>();
    EXPECT_GE(start, 0);
    while (!open_ends.empty() && open_ends.back() <= start + 0.002) open_ends.pop_back();
    if (!open_ends.empty()) EXPECT_LE(end, open_ends.back() + 0.002) << event.dump();
    open_ends.push_back(end);
  }
  // Steps 2, 3 and 4, each with buckets 0..5 once and 3 forwards and backwards.
  std::map<int, std::pair<double, double>> steps;
  for (const nlohmann::json& event : events) {
    if (event.at("cat") == "step") {
      const double ts = event.at("ts");
      steps[event.at("args").at("step")] = {ts, ts + event.at("dur").get<double>()};
    }
  }
  ASSERT_EQ(steps.size(), 3u) << "lane " << tid;
  EXPECT_EQ(steps.begin()->first, 2);
  EXPECT_EQ(steps.rbegin()->first, 4);
  for (const auto& [step, span] : steps) {
    std::multiset<int> buckets;
    int forwards = 0, backwards = 0, updates = 0;
    for (const nlohmann::json& event : events) {
      const double ts = event.at("ts");
      if (ts < span.first || ts > span.second) continue;
      if (event.at("cat") == "all-reduce") buckets.insert(event.at("args").at("bucket").get<int>());
      forwards += event.at("cat") == "forward";
      backwards += event.at("cat") == "backward";
      updates += event.at("cat") == "optimizer";
    }
    EXPECT_EQ(buckets, (std::multiset<int>{0, 1, 2, 3, 4, 5})) << "lane " << tid << " step " << step;
    EXPECT_EQ(forwards, 3) << "lane " << tid << " step " << step;
    EXPECT_EQ(backwards, 3) << "lane " << tid << " step " << step;
  }
}

TEST(StepTraceTest, FourReplicasAsFibersOnTwoThreadsHaveALaneEach) {
  const nlohmann::json trace = TraceOf(4, 2, TempPath("fibers.json"));
  std::map<int, Lane> lanes = Lanes(trace);
  for (int tid = 0; tid < 4; ++tid) {
    ASSERT_TRUE(lanes.count(tid)) << tid;
    ExpectNestedAndPerStep(lanes[tid], tid);
  }
  // The training loop's lane: a batch read and a train step per traced step.
  ASSERT_TRUE(lanes.count(trace::kMainLane));
  int reads = 0;
  for (const nlohmann::json& event : lanes[trace::kMainLane].events) reads += event.at("cat") == "data";
  EXPECT_EQ(reads, 3);
  std::set<std::string> names;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    if (event.at("ph") == "M" && event.at("name") == "thread_name") names.insert(event.at("args").at("name"));
  }
  EXPECT_TRUE(names.count("replica 3 (/job:localhost/replica:0/task:0/device:CPU:3)"))
      << trace.dump().substr(0, 2000);
}

TEST(StepTraceTest, BatchedFibersRunOnTheFirstReplicaOfEachBatchThread) {
  // Replicas 0 and 2 on thread 0, 1 and 3 on thread 1: in 2 batches, 0 and 1 compute their
  // batch's rows and sum its gradients; 2 and 3 run nothing, so have no lane.
  const nlohmann::json trace =
      TraceOf(4, 2, TempPath("batched.json"), /*batch=*/true, /*batch_threads=*/2);
  std::map<int, Lane> lanes = Lanes(trace);
  for (int tid = 0; tid < 2; ++tid) {
    ASSERT_TRUE(lanes.count(tid)) << tid;
    ExpectNestedAndPerStep(lanes[tid], tid);
  }
  EXPECT_FALSE(lanes.count(2));
  EXPECT_FALSE(lanes.count(3));
}

TEST(StepTraceTest, OneBatchIsReplicaZerosLaneNamedForTheBatch) {
  // One batch (the default): replica 0 computes every replica's rows; its lane's name says so.
  const nlohmann::json trace = TraceOf(4, 2, TempPath("one_batch.json"), /*batch=*/true);
  std::map<int, Lane> lanes = Lanes(trace);
  ASSERT_TRUE(lanes.count(0));
  ExpectNestedAndPerStep(lanes[0], 0);
  for (int tid = 1; tid < 4; ++tid) EXPECT_FALSE(lanes.count(tid)) << tid;
  std::set<std::string> names;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    if (event.at("ph") == "M" && event.at("name") == "thread_name") names.insert(event.at("args").at("name"));
  }
  EXPECT_TRUE(names.count("replica 0 (/job:localhost/replica:0/task:0/device:CPU:0), computing "
                          "the batch of replicas 0, 1, 2, 3 in batched steps"))
      << trace.dump().substr(0, 2000);
}

TEST(StepTraceTest, OneReplicaWithoutAStrategyIsLaneZero) {
  const nlohmann::json trace = TraceOf(0, 0, TempPath("single.json"));
  std::map<int, Lane> lanes = Lanes(trace);
  ASSERT_TRUE(lanes.count(0));
  // One device: no all-reduce, but the layers and the update of each step.
  int forwards = 0, updates = 0;
  for (const nlohmann::json& event : lanes[0].events) {
    forwards += event.at("cat") == "forward";
    updates += event.at("cat") == "optimizer";
  }
  EXPECT_EQ(forwards, 9);
  EXPECT_EQ(updates, 3);
}

TEST(StepTraceTest, ABadFolderIsRefusedBeforeTrainingAndBadStepsAreNamed) {
  Sequential model({Dense(1)});
  TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)));
  FitOptions fit;
  fit.verbose = 0;
  fit.callbacks = {std::make_shared<StepTrace>("/no/such/folder/trace.json", 1, 2)};
  const Status status = model.Fit(Batches(), fit).status();
  EXPECT_THAT(status.message(), HasSubstr("the folder '/no/such/folder' does not exist"));
  EXPECT_FALSE(ParseTraceSteps("3").ok());
  EXPECT_FALSE(ParseTraceSteps("0:2").ok());
  EXPECT_FALSE(ParseTraceSteps("4:3").ok());
  EXPECT_FALSE(ParseTraceSteps("2:x").ok());
  EXPECT_THAT(ParseTraceSteps("a:b").status().message(), HasSubstr("A:B"));
  ASSERT_TRUE(ParseTraceSteps("5:8").ok());
  EXPECT_EQ(ParseTraceSteps("5:8")->second, 8);
}

}  // namespace
}  // namespace tower
