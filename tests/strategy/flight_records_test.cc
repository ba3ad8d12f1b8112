// What the flight recorder keeps of a strategy's collectives in one process: each replica's
// sums (custom loop and Fit's buckets) with replica, step, bucket and fingerprint; and the
// dump a failing replica triggers, naming it.
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
#include "strategy/collectives/flight_recorder.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Context> CpuContext(int replicas) {
  auto context = testing::MakeContextWithFakeGpus({});
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0], std::vector<LogicalDeviceConfiguration>(replicas)));
  return context;
}

// 3 replicas on 2 threads (fibers): each replica's sums, or batched, each batch's (its first
// replica's): in 2 batches, 0 for replicas 0 and 2, 1 for replica 1; in one batch, 0.
TEST(FlightRecordsTest, EveryReplicasBucketSumIsRecordedWithItsStepAndBucket) {
  for (const int batches : {0, 2, 1}) {  // 0: not batched
    const bool batch = batches > 0;
    auto context = CpuContext(3);
    ScopedDefaultContext use(*context);
    MirroredStrategyOptions options;
    options.context = context.get();
    options.bucket_bytes = 1;  // a bucket per gradient: 4 for two Dense layers
    options.replica_threads = 2;
    options.batch_replica_rows = batch;
    options.batch_threads = batches;
    auto strategy = std::move(MirroredStrategy::Create(options)).value();
    Sequential model({Dense(8, "relu"), Dense(1)}, 3);
    {
      auto scope = strategy->Scope();
      TOWER_CHECK_OK(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)));
    }
    data::SyntheticOptions data;
    data.name = "linreg";
    data.rows = 4 * 30;
    FitOptions fit;
    fit.verbose = 0;
    fit.max_steps = 4;
    FlightRecorder::Get().Clear();
    TOWER_CHECK_OK(model.Fit(data::Dataset::Synthetic(data)->Batch(30), fit).status());
    // (step, bucket) -> replicas; every record done, every fingerprint of a (step, bucket)
    // the same on every replica.
    std::map<std::pair<int64_t, int>, std::set<int>> sums;
    std::map<std::pair<int64_t, int>, std::set<uint64_t>> fingerprints;
    for (const CollectiveRecord& record : FlightRecorder::Get().Records()) {
      ASSERT_STREQ(record.scope, "replicas");
      EXPECT_EQ(record.state, CollectiveState::kDone);
      EXPECT_GE(record.end_unix_ns, record.start_unix_ns);
      sums[{record.step, record.bucket}].insert(record.replica);
      fingerprints[{record.step, record.bucket}].insert(record.fingerprint);
    }
    ASSERT_EQ(sums.size(), 4u * 4u) << batches;  // 4 steps × 4 buckets
    const std::set<int> summing = batches == 2   ? std::set<int>{0, 1}
                                  : batches == 1 ? std::set<int>{0}
                                                 : std::set<int>{0, 1, 2};
    for (const auto& [key, replicas] : sums) {
      EXPECT_EQ(replicas, summing) << "step " << key.first << " bucket " << key.second << ", "
                                   << batches << " batches";
      EXPECT_EQ(fingerprints[key].size(), 1u);
    }
    EXPECT_EQ(sums.begin()->first.first, 1);  // steps 1..4
    const std::pair<int64_t, int> step1{1, 0}, step2{2, 0};
    EXPECT_NE(*fingerprints[step1].begin(), *fingerprints[step2].begin());  // the step is in it
  }
}

TEST(FlightRecordsTest, AFailingReplicaWritesTheRingNamingIt) {
  auto context = CpuContext(2);
  ScopedDefaultContext use(*context);
  MirroredStrategyOptions options;
  options.context = context.get();
  auto strategy = std::move(MirroredStrategy::Create(options)).value();
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/failing";
  std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str());
  FlightRecorder::Get().Clear();
  FlightRecorder::Get().SetDumpDirectory(dir);
  const Status status = strategy->extended().RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    for (int round = 0; round < 3; ++round) {
      if (round == 2 && ctx.replica_id() == 1) return InternalError("a bad shard");
      TOWER_ASSIGN_OR_RETURN(Tensor t, Tensor::FromHost(ctx.device(), Shape{4}, {1, 2, 3, 4}));
      Tensor* tensors[] = {&t};
      TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(tensors));
    }
    return OkStatus();
  });
  ASSERT_FALSE(status.ok());
  std::ifstream file(dir + "/flight_recorder.rank0.json");
  ASSERT_TRUE(file.good());
  const nlohmann::json dump = nlohmann::json::parse(file);
  EXPECT_THAT(dump.at("reason").get<std::string>(), HasSubstr("replica 1 ("));
  EXPECT_THAT(dump.at("reason").get<std::string>(), HasSubstr("a bad shard"));
  // Written once every replica stopped: 2 sums of each done, and replica 0's third sum
  // failed (aborted when replica 1 gave up).
  int done = 0, failed = 0;
  for (const nlohmann::json& record : dump.at("records")) {
    done += record.at("state") == "done";
    failed += record.at("state") == "failed" && record.at("replica") == 0;
  }
  EXPECT_EQ(done, 4);
  EXPECT_EQ(failed, 1);
}

}  // namespace
}  // namespace tower
