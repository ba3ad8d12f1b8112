// A worker for the multi-process tests, run under mpirun by mpi_test.cc:
//
//   mpi_worker <scenario> <local replicas> [collective timeout ms]
//
// Scenarios:
//   allreduce  closed-form sums over processes × local replicas, many sizes; prints
//              "rank R: allreduce OK"
//   die        rank 1 kills itself (SIGKILL) before the 3rd all-reduce; the others must fail
//   stall      rank 1 sleeps past the deadline before the 3rd all-reduce
//   mismatch   rank 1 builds a different model; every rank must report it
// Exit code 0 on success, 1 on a (reported) error.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "device/context.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mpi/multi_worker_mirrored_strategy.h"

namespace tower {
namespace {

// Replica g (global), element i of tensor t: (g + 1) · (i % 5 + t); summed over G replicas:
// G(G + 1)/2 · (i % 5 + t), exact in float32.
float Value(int g, int t, int64_t i) { return (g + 1) * static_cast<float>(i % 5 + t); }

Status AllReduceRounds(MultiWorkerMirroredStrategy& strategy, int rounds, const std::string& fault) {
  const std::vector<int64_t> sizes = {0, 1, 7, 1000, 100000};
  const int world = strategy.num_replicas_in_sync();
  const float factor = world * (world + 1) / 2.0f;
  for (int round = 0; round < rounds; ++round) {
    if (round == 2 && strategy.world().rank() == 1) {
      if (fault == "die") raise(SIGKILL);
      if (fault == "stall") std::this_thread::sleep_for(std::chrono::seconds(30));
    }
    TOWER_RETURN_IF_ERROR(strategy.RunOnReplicas([&](ReplicaContext& ctx) -> Status {
      std::vector<Tensor> tensors;
      for (size_t t = 0; t < sizes.size(); ++t) {
        std::vector<float> values(static_cast<size_t>(sizes[t]));
        for (int64_t i = 0; i < sizes[t]; ++i) values[i] = Value(ctx.global_replica_id(), t, i);
        TOWER_ASSIGN_OR_RETURN(Tensor tensor, Tensor::FromHost(ctx.device(), Shape{sizes[t]}, values));
        tensors.push_back(std::move(tensor));
      }
      std::vector<Tensor*> pointers;
      for (Tensor& t : tensors) pointers.push_back(&t);
      TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(pointers));
      for (size_t t = 0; t < sizes.size(); ++t) {
        TOWER_ASSIGN_OR_RETURN(std::vector<float> got, tensors[t].ToHost());
        for (int64_t i = 0; i < sizes[t]; ++i) {
          const float want = factor * static_cast<float>(i % 5 + t);
          if (got[i] != want) {
            return InternalError("tensor " + std::to_string(t) + "[" + std::to_string(i) + "] = " +
                                 std::to_string(got[i]) + ", want " + std::to_string(want));
          }
        }
      }
      return OkStatus();
    }));
  }
  return OkStatus();
}

Status Mismatch(MultiWorkerMirroredStrategy& strategy) {
  const int64_t units = strategy.world().rank() == 1 ? 32 : 16;
  Sequential model({Dense(units, "relu"), Dense(1)});
  {
    auto scope = strategy.Scope();
    TOWER_RETURN_IF_ERROR(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)));
  }
  return model.Build(8);
}

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: mpi_worker <scenario> <local replicas> [timeout ms]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const int replicas = std::atoi(argv[2]);
  const int timeout_ms = argc > 3 ? std::atoi(argv[3]) : 60000;
  Context& context = Context::Global();
  Status status = context.SetLogicalDeviceConfiguration(
      context.ListPhysicalDevices("CPU")[0], std::vector<LogicalDeviceConfiguration>(replicas));
  MirroredStrategyOptions options;
  options.collective_timeout = std::chrono::milliseconds(timeout_ms);
  StatusOr<std::unique_ptr<MultiWorkerMirroredStrategy>> strategy =
      status.ok() ? MultiWorkerMirroredStrategy::Create(options)
                  : StatusOr<std::unique_ptr<MultiWorkerMirroredStrategy>>(status);
  if (!strategy.ok()) {
    std::fprintf(stderr, "error: %s\n", strategy.status().ToString().c_str());
    return 1;
  }
  const int rank = (*strategy)->world().rank();
  if (scenario == "mismatch") {
    status = Mismatch(**strategy);
  } else {
    status = AllReduceRounds(**strategy, 5, scenario);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d error: %s\n", rank, status.ToString().c_str());
    std::fflush(stderr);
    (*strategy)->world().AbortJob(1);  // end every worker now, stalled ones included
  }
  std::printf("rank %d: %s OK (%d replicas in sync)\n", rank, scenario.c_str(),
              (*strategy)->num_replicas_in_sync());
  return 0;
}

}  // namespace
}  // namespace tower

int main(int argc, char** argv) { return tower::Main(argc, argv); }
