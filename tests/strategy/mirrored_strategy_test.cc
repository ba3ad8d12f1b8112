#include "strategy/mirrored_strategy.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/cpu_platform.h"
#include "device/intra_op.h"
#include "device/testing/fake_gpu_platform.h"
#include "ops/array_ops.h"
#include "util/logging.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::MakeContextWithFakeGpus;

std::unique_ptr<Context> Cpus(int n) { return testing::MakeContextWithLogicalCpus(n); }

std::unique_ptr<MirroredStrategy> Strategy(Context& context, std::vector<std::string> devices = {},
                                           std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  MirroredStrategyOptions options;
  options.context = &context;
  options.devices = std::move(devices);
  options.collective_timeout = timeout;
  StatusOr<std::unique_ptr<MirroredStrategy>> strategy = MirroredStrategy::Create(options);
  TOWER_CHECK_OK(strategy.status());
  return std::move(strategy).value();
}

TEST(MirroredStrategyTest, DefaultsToEveryLogicalCpuAndLogsItsChoice) {
  auto context = Cpus(4);
  ScopedLogCapture capture;
  auto strategy = Strategy(*context);
  EXPECT_EQ(strategy->num_replicas_in_sync(), 4);
  EXPECT_THAT(capture.text(),
              HasSubstr("Using MirroredStrategy with devices (/job:localhost/replica:0/task:0/device:CPU:0, "
                        "/job:localhost/replica:0/task:0/device:CPU:1, "
                        "/job:localhost/replica:0/task:0/device:CPU:2, "
                        "/job:localhost/replica:0/task:0/device:CPU:3)"));
  EXPECT_THAT(capture.text(), HasSubstr("Cross-device ops: in-process (4 replicas in host memory"));
  EXPECT_EQ(strategy->extended().cross_device_ops().name(), "in-process");
}

TEST(MirroredStrategyTest, BadDeviceListsAreRejected) {
  auto context = Cpus(2);
  MirroredStrategyOptions options;
  options.context = context.get();
  options.devices = {"/CPU:0", "/cpu:0"};
  EXPECT_THAT(MirroredStrategy::Create(options).status().message(), HasSubstr("is listed twice"));
  options.devices = {"/CPU:0", "/CPU:7"};
  EXPECT_TRUE(IsNotFound(MirroredStrategy::Create(options).status()));
  options.devices = {"/job:localhost"};
  EXPECT_THAT(MirroredStrategy::Create(options).status().message(), HasSubstr("names no device"));
  options.devices = {"/CPU:0", "/CPU:1"};
  options.cross_device_ops = CrossDeviceOpsKind::kNccl;
  EXPECT_TRUE(IsInvalidArgument(MirroredStrategy::Create(options).status()));
}

TEST(MirroredStrategyTest, RunGivesEachReplicaItsThreadDeviceAndCollectives) {
  auto context = Cpus(3);
  auto strategy = Strategy(*context);
  StatusOr<PerReplica<Tensor>> values = strategy->Run<Tensor>([](ReplicaContext& ctx) -> StatusOr<Tensor> {
    // No device given: the replica's device scope places the constant.
    TOWER_ASSIGN_OR_RETURN(Tensor t, ops::Constant({float(ctx.replica_id() + 1), 10.0f}, Shape{2}));
    if (t.device() != ctx.device()) return InternalError("constant not on the replica's device");
    Tensor* list[] = {&t};
    TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(list));
    return t;
  });
  ASSERT_TRUE(values.ok()) << values.status();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(*(*values)[r].ToHost(), (std::vector<float>{6, 30}));
    EXPECT_EQ((*values)[r].device(), strategy->extended().replica_device(r));
  }
  StatusOr<Tensor> sum = strategy->Reduce(ReduceOp::kSum, *values);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(*sum->ToHost(), (std::vector<float>{18, 90}));
  EXPECT_EQ(*strategy->Reduce(ReduceOp::kMean, *values)->ToHost(), (std::vector<float>{6, 30}));
  EXPECT_DOUBLE_EQ(*strategy->Reduce(ReduceOp::kMean, PerReplica<double>({1, 2, 6})), 3.0);
  EXPECT_DOUBLE_EQ(*strategy->Reduce(ReduceOp::kSum, PerReplica<double>({1, 2, 6})), 9.0);
  EXPECT_FALSE(strategy->Reduce(ReduceOp::kSum, PerReplica<double>({1, 2})).ok());
  // Threads: three distinct ones, the first being the caller's.
  std::vector<std::thread::id> ids(3);
  ASSERT_TRUE(strategy->extended()
                  .RunOnReplicas([&](ReplicaContext& ctx) {
                    ids[ctx.replica_id()] = std::this_thread::get_id();
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(ids[0], std::this_thread::get_id());
  EXPECT_NE(ids[1], ids[0]);
  EXPECT_NE(ids[2], ids[1]);
}

TEST(MirroredStrategyTest, AFailingReplicaIsNamedAndTheOthersDoNotHang) {
  auto context = Cpus(4);
  auto strategy = Strategy(*context);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const auto start = std::chrono::steady_clock::now();
    Status status = strategy->extended().RunOnReplicas([](ReplicaContext& ctx) -> Status {
      if (ctx.replica_id() == 2) return InvalidArgumentError("bad shard");
      TOWER_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(ctx.device(), Shape{4}));
      Tensor* list[] = {&t};
      return ctx.AllReduceSum(list);  // the others wait here for replica 2
    });
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_TRUE(IsInvalidArgument(status)) << status;
    EXPECT_THAT(status.message(),
                HasSubstr("replica 2 (/job:localhost/replica:0/task:0/device:CPU:2): bad shard"));
  }
  // The strategy works again afterwards.
  EXPECT_TRUE(strategy->extended().RunOnReplicas([](ReplicaContext& ctx) -> Status {
    TOWER_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(ctx.device(), Shape{4}));
    Tensor* list[] = {&t};
    return ctx.AllReduceSum(list);
  }).ok());
}

// Four replicas on one thread (fibers): each keeps its own device scope across the
// collectives where it hands the thread to the others, and the sums are right.
TEST(MirroredStrategyTest, ReplicasOnFewerThreadsKeepTheirDevicesThroughCollectives) {
  auto context = Cpus(4);
  for (int threads : {1, 2}) {
    MirroredStrategyOptions options;
    options.context = context.get();
    options.replica_threads = threads;
    auto strategy = std::move(MirroredStrategy::Create(options)).value();
    std::vector<std::thread::id> ids(4);
    StatusOr<PerReplica<Tensor>> values =
        strategy->Run<Tensor>([&](ReplicaContext& ctx) -> StatusOr<Tensor> {
          ids[ctx.replica_id()] = std::this_thread::get_id();
          Tensor t;
          for (int round = 0; round < 3; ++round) {
            TOWER_ASSIGN_OR_RETURN(t, ops::Constant({float(ctx.replica_id() + 1)}, Shape{1}));
            if (t.device() != ctx.device()) {
              return InternalError("round " + std::to_string(round) + ": constant on " +
                                   t.device()->full_name());
            }
            Tensor* list[] = {&t};
            TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(list));
          }
          return t;
        });
    ASSERT_TRUE(values.ok()) << values.status();
    for (int r = 0; r < 4; ++r) EXPECT_EQ(*(*values)[r].ToHost(), (std::vector<float>{10}));
    EXPECT_EQ(ids[0], std::this_thread::get_id());
    EXPECT_EQ(ids[2], ids[0]);
    EXPECT_EQ(ids[1] == ids[0], threads == 1);
  }
  MirroredStrategyOptions options;
  options.context = context.get();
  options.replica_threads = -1;
  EXPECT_THAT(MirroredStrategy::Create(options).status().message(),
              HasSubstr("replica_threads must be 0 (one per core) or positive, not -1"));
}

// Kernels split only into the cores the replicas leave idle: with the intra-op setting at
// its default, each of R replica threads gets cores / R threads (at least 1).
TEST(MirroredStrategyTest, EachReplicaThreadGetsItsShareOfTheCoresForItsKernels) {
  ASSERT_EQ(Context::Global().GetIntraOpParallelismThreads(), 0);
  const int cores = std::max(1, UsableCores());
  auto context = Cpus(8);
  for (int threads : {1, 2, 4}) {
    MirroredStrategyOptions options;
    options.context = context.get();
    options.replica_threads = threads;
    auto strategy = std::move(MirroredStrategy::Create(options)).value();
    std::vector<int> budgets(8, -1);
    ASSERT_TRUE(strategy->extended().RunOnReplicas([&](ReplicaContext& ctx) {
      budgets[ctx.replica_id()] = CurrentIntraOpThreads();
      return OkStatus();
    }).ok());
    EXPECT_EQ(budgets, std::vector<int>(8, std::max(1, cores / threads))) << threads;
  }
  EXPECT_EQ(CurrentIntraOpThreads(), cores);  // outside the replicas: the whole machine
}

TEST(MirroredStrategyTest, AnExceptionInAReplicaBecomesAnError) {
  auto context = Cpus(2);
  auto strategy = Strategy(*context);
  Status status = strategy->extended().RunOnReplicas([](ReplicaContext& ctx) -> Status {
    if (ctx.replica_id() == 1) throw std::runtime_error("index out of range");
    return OkStatus();
  });
  EXPECT_THAT(status.message(), HasSubstr("replica 1 (/job:localhost/replica:0/task:0/device:CPU:1): "
                                          "threw an exception: index out of range"));
}

TEST(MirroredStrategyTest, AStalledReplicaTimesOutNamedInTheCollective) {
  auto context = Cpus(3);
  auto strategy = Strategy(*context, {}, std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  Status status = strategy->extended().RunOnReplicas([](ReplicaContext& ctx) -> Status {
    if (ctx.replica_id() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return OkStatus();  // never calls the collective
    }
    TOWER_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(ctx.device(), Shape{4}));
    Tensor* list[] = {&t};
    return ctx.AllReduceSum(list);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("replica 1 (/job:localhost/replica:0/task:0/device:CPU:1), "
                                          "which never arrived"));
  // No thread is left behind: the strategy can be dropped and a new one built and used.
  strategy.reset();
  strategy = Strategy(*context, {}, std::chrono::milliseconds(300));
  EXPECT_TRUE(strategy->extended().RunOnReplicas([](ReplicaContext& ctx) -> Status {
    TOWER_ASSIGN_OR_RETURN(Tensor t, Tensor::FromHost(ctx.device(), Shape{4}, {1, 1, 1, 1}));
    Tensor* list[] = {&t};
    TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(list));
    TOWER_ASSIGN_OR_RETURN(std::vector<float> sum, t.ToHost());
    return sum == std::vector<float>(4, 3.0f) ? OkStatus() : InternalError("wrong sum");
  }).ok());
}

TEST(MirroredStrategyTest, DistributeDatasetShardsInOrderEvenlyWithEmptyReplicas) {
  auto context = Cpus(4);
  auto strategy = Strategy(*context);
  std::vector<float> x(14), y(14);
  for (int i = 0; i < 14; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(100 + i);
  }
  // Batches of 10 then 4 rows: shards 3,3,2,2 then 1,1,1,1.
  auto dataset = data::Dataset::FromTensors(x, 1, y, 1)->Batch(10);
  DistributedDataset distributed = strategy->DistributeDataset(dataset);
  ASSERT_TRUE(distributed.Begin(0).ok());
  auto first = distributed.Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  const std::vector<std::vector<float>> expected = {{0, 1, 2}, {3, 4, 5}, {6, 7}, {8, 9}};
  for (int r = 0; r < 4; ++r) {
    const ReplicaBatch& shard = (**first)[r];
    EXPECT_EQ(*shard.features.ToHost(), expected[r]) << r;
    EXPECT_EQ(shard.features.device(), strategy->extended().replica_device(r));
    EXPECT_EQ(shard.global_batch_size, 10);
    EXPECT_EQ(shard.targets.ToHost()->front(), 100 + expected[r][0]);
  }
  auto second = distributed.Next();
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((**second)[3].features.shape(), (Shape{1, 1}));
  EXPECT_FALSE(distributed.Next()->has_value());
  // Two rows over four replicas: the last two get none.
  auto tiny = strategy->DistributeDataset(data::Dataset::FromTensors({1, 2}, 1, {3, 4}, 1)->Batch(2));
  auto only = tiny.Next();
  ASSERT_TRUE(only.ok() && only->has_value());
  EXPECT_EQ((**only)[1].features.shape(), (Shape{1, 1}));
  EXPECT_EQ((**only)[2].features.shape(), (Shape{0, 1}));
  EXPECT_EQ((**only)[3].features.shape(), (Shape{0, 1}));
}

TEST(OneDeviceStrategyTest, RunsInlineOnItsDevice) {
  auto context = Cpus(2);
  StatusOr<std::unique_ptr<MirroredStrategy>> strategy = OneDeviceStrategy::Create("/CPU:1", context.get());
  ASSERT_TRUE(strategy.ok());
  EXPECT_THAT((*strategy)->Describe(), HasSubstr("OneDeviceStrategy(/job:localhost/replica:0/task:0/device:CPU:1)"));
  StatusOr<PerReplica<int>> ids = (*strategy)->Run<int>([](ReplicaContext& ctx) -> StatusOr<int> {
    return ctx.device()->id();
  });
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)[0], 1);
}

}  // namespace
}  // namespace tower
