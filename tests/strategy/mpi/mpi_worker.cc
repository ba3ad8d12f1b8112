// A worker for the multi-process tests, run under mpirun by mpi_test.cc:
//
//   mpi_worker <scenario> <local replicas> [collective timeout ms]
//
// Scenarios:
//   allreduce  closed-form sums over processes × local replicas, many sizes; prints
//              "rank R: allreduce OK"
//   die        rank 1 kills itself (SIGKILL) before the 3rd all-reduce; the others must fail
//   stall      rank 1 sleeps 120 s (far past the deadline) before the 3rd all-reduce
//   skip       8 steps of one all-reduce each; rank 1 skips step 5's (its next one is step
//              6's): every rank must stop at once, each writing its flight recorder file
//              ($TOWER_FLIGHT_RECORDER_DIR) for `tower doctor`
//   shape      as skip, but at step 5 rank 2 sends one tensor with one element more
//   late-shape as shape, and rank 0 reaches step 5's all-reduce only once ranks 1 and 2 have
//              seen the divergence and written their files: those first ranks must not end
//              the job before rank 0 has seen it too and written its own
//   closed-socket  every rank writes to a socket whose other end is closed, as Open MPI does
//              when a peer's process dies mid-transfer: the write must fail with EPIPE,
//              not end the worker (SIGPIPE); then the allreduce rounds
//   own-sigpipe-handler  as closed-socket, with a SIGPIPE handler installed before MPI
//              starts: MPI must keep it, so the write calls it
//   mismatch   rank 1 builds a different model; every rank must report it
//   replicas-mismatch  rank 1 has one local replica more; every rank must refuse to start
//   buckets-mismatch   rank 1 sums gradients in other buckets; every rank must report it
//   api        DistributeDataset, Run and Reduce (sum and mean, tensor and scalar) over 11
//              rows in global batches of 4 (the last one uneven), checked against closed
//              forms on every rank; rank 0 prints each batch's reductions ("rank 0: batch
//              B: ...") for the test to compare with one process. Runs without mpirun too.
//   loss-scale mixed_float16 training with dynamic loss scaling; at step 10 rank 1's first
//              replica overflows (an Inf in its gradients). Every rank prints, after each
//              step, "rank R: step S scale X iterations I weights H copies C" (H: a hash
//              of every variable's bits; C: "equal" when every local replica's copy has
//              them): the lines must agree across ranks.
// Exit code 0 on success, 1 on a (reported) error.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "data/dataset.h"
#include "device/context.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/strategy_from_environment.h"
#include "tests/testing/inject_nonfinite_layer.h"
#include "strategy/collectives/flight_recorder.h"

namespace tower {
namespace {

// Replica g (global), element i of tensor t: (g + 1) · (i % 5 + t); summed over G replicas:
// G(G + 1)/2 · (i % 5 + t), exact in float32.
float Value(int g, int t, int64_t i) { return (g + 1) * static_cast<float>(i % 5 + t); }

Status AllReduceRounds(MirroredStrategy& strategy, int rounds, const std::string& fault) {
  const std::vector<int64_t> sizes = {0, 1, 7, 1000, 100000};
  const int world = strategy.num_replicas_in_sync();
  const float factor = world * (world + 1) / 2.0f;
  const int rank = strategy.extended().world().rank();
  for (int round = 0; round < rounds; ++round) {
    // A custom loop's step, as Fit sets it: collectives carry it in their fingerprints.
    SetCurrentStep(round + 1);
    if (round == 2 && rank == 1) {
      if (fault == "die") raise(SIGKILL);
      if (fault == "stall") std::this_thread::sleep_for(std::chrono::seconds(120));
    }
    if (round == 4 && rank == 1 && fault == "skip") continue;
    // Step 5 on rank 2 of the shape faults: tensor 3 has one element more.
    const bool shape_fault = fault == "shape" || fault == "late-shape";
    const bool longer = round == 4 && rank == 2 && shape_fault;
    if (round == 4 && rank == 0 && fault == "late-shape") {
      // Late by an event, not a time: the others have failed at the divergence and wait for
      // rank 0 to record it before they end the job.
      const char* recorder_dir = std::getenv("TOWER_FLIGHT_RECORDER_DIR");
      if (recorder_dir == nullptr) {
        return InvalidArgumentError("late-shape needs TOWER_FLIGHT_RECORDER_DIR");
      }
      const std::string dir = recorder_dir;
      for (int waited_ms = 0; waited_ms < 60000; waited_ms += 5) {
        if (access((dir + "/flight_recorder.rank1.json").c_str(), F_OK) == 0 &&
            access((dir + "/flight_recorder.rank2.json").c_str(), F_OK) == 0) {
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    TOWER_RETURN_IF_ERROR(strategy.extended().RunOnReplicas([&](ReplicaContext& ctx) -> Status {
      std::vector<Tensor> tensors;
      for (size_t t = 0; t < sizes.size(); ++t) {
        const int64_t size = sizes[t] + (longer && t == 3 ? 1 : 0);
        std::vector<float> values(static_cast<size_t>(size));
        for (int64_t i = 0; i < size; ++i) values[i] = Value(ctx.global_replica_id(), t, i);
        TOWER_ASSIGN_OR_RETURN(Tensor tensor, Tensor::FromHost(ctx.device(), Shape{size}, values));
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

Status Mismatch(MirroredStrategy& strategy, bool same_model) {
  const int64_t units = strategy.extended().world().rank() == 1 && !same_model ? 32 : 16;
  Sequential model({Dense(units, "relu"), Dense(1)});
  {
    auto scope = strategy.Scope();
    TOWER_RETURN_IF_ERROR(model.Compile(MeanSquaredErrorLoss(), SGD(0.01f)));
  }
  return model.Build(8);
}

// Row i (0-based) of the api scenario: features (i + 1, (i + 1)²), target 10·(i + 1).
StatusOr<data::Dataset> ApiData(int64_t rows) {
  std::vector<float> features, targets;
  for (int64_t i = 0; i < rows; ++i) {
    features.push_back(static_cast<float>(i + 1));
    features.push_back(static_cast<float>((i + 1) * (i + 1)));
    targets.push_back(static_cast<float>(10 * (i + 1)));
  }
  return data::Dataset::FromTensors(features, 2, targets, 1);
}

Status Expect(const std::string& what, double got, double want) {
  if (!(std::abs(got - want) <= 1e-6 * std::max(1.0, std::abs(want)))) {
    return InternalError(what + " = " + std::to_string(got) + ", want " + std::to_string(want));
  }
  return OkStatus();
}

Status Api(MirroredStrategy& strategy) {
  constexpr int64_t kRows = 11, kBatch = 4;
  TOWER_ASSIGN_OR_RETURN(data::Dataset dataset, ApiData(kRows));
  DistributedDataset batches = strategy.DistributeDataset(dataset.Batch(kBatch));
  TOWER_RETURN_IF_ERROR(batches.Begin(0));
  const double replicas = strategy.num_replicas_in_sync();
  const double ids = replicas * (replicas + 1) / 2;  // Σ (g + 1) over global replicas
  int64_t first_row = 0;
  for (int b = 0;; ++b) {
    TOWER_ASSIGN_OR_RETURN(auto shards, batches.Next());
    if (!shards.has_value()) break;
    // Per replica: [Σ x1, Σ x2, Σ y, rows, g + 1] of its shard, computed from what it got.
    TOWER_ASSIGN_OR_RETURN(
        PerReplica<Tensor> sums,
        strategy.Run<Tensor>([&](ReplicaContext& ctx) -> StatusOr<Tensor> {
          const ReplicaBatch& shard = (*shards)[ctx.replica_id()];
          TOWER_ASSIGN_OR_RETURN(std::vector<float> x, shard.features.ToHost());
          TOWER_ASSIGN_OR_RETURN(std::vector<float> y, shard.targets.ToHost());
          std::vector<float> v = {0, 0, 0, static_cast<float>(y.size()),
                                  static_cast<float>(ctx.global_replica_id() + 1)};
          for (size_t i = 0; i < y.size(); ++i) {
            v[0] += x[2 * i];
            v[1] += x[2 * i + 1];
            v[2] += y[i];
          }
          return Tensor::FromHost(ctx.device(), Shape{5}, v);
        }));
    TOWER_ASSIGN_OR_RETURN(
        PerReplica<double> counts,
        strategy.Run<double>([&](ReplicaContext& ctx) -> StatusOr<double> {
          return static_cast<double>((*shards)[ctx.replica_id()].features.shape().dim(0)) +
                 1000.0 * (ctx.global_replica_id() + 1);
        }));
    TOWER_ASSIGN_OR_RETURN(Tensor sum, strategy.Reduce(ReduceOp::kSum, sums));
    TOWER_ASSIGN_OR_RETURN(Tensor mean, strategy.Reduce(ReduceOp::kMean, sums));
    TOWER_ASSIGN_OR_RETURN(double count_sum, strategy.Reduce(ReduceOp::kSum, counts));
    TOWER_ASSIGN_OR_RETURN(double count_mean, strategy.Reduce(ReduceOp::kMean, counts));
    // The closed forms over the global batch's rows first_row + 1 .. first_row + n.
    const int64_t n = std::min(kBatch, kRows - first_row);
    double x1 = 0, x2 = 0, y = 0;
    for (int64_t i = first_row + 1; i <= first_row + n; ++i) {
      x1 += i;
      x2 += i * i;
      y += 10 * i;
    }
    first_row += n;
    const std::vector<double> want = {x1, x2, y, static_cast<double>(n), ids};
    TOWER_ASSIGN_OR_RETURN(std::vector<float> got_sum, sum.ToHost());
    TOWER_ASSIGN_OR_RETURN(std::vector<float> got_mean, mean.ToHost());
    std::string line = "rank " + std::to_string(strategy.extended().world().rank()) + ": batch " +
                       std::to_string(b) + ":";
    for (size_t k = 0; k < want.size(); ++k) {
      const std::string at = "batch " + std::to_string(b) + " element " + std::to_string(k);
      TOWER_RETURN_IF_ERROR(Expect("Reduce(sum) " + at, got_sum[k], want[k]));
      TOWER_RETURN_IF_ERROR(Expect("Reduce(mean) " + at, got_mean[k], want[k] / replicas));
      char text[64];
      std::snprintf(text, sizeof(text), " %.9g %.9g", got_sum[k], got_mean[k]);
      line += text;
    }
    TOWER_RETURN_IF_ERROR(Expect("Reduce(sum) of scalars, batch " + std::to_string(b),
                                 count_sum, n + 1000 * ids));
    TOWER_RETURN_IF_ERROR(Expect("Reduce(mean) of scalars, batch " + std::to_string(b),
                                 count_mean, (n + 1000 * ids) / replicas));
    char text[64];
    std::snprintf(text, sizeof(text), " %.17g %.17g", count_sum, count_mean);
    std::printf("%s%s\n", line.c_str(), text);
  }
  if (first_row != kRows) return InternalError("the batches covered " + std::to_string(first_row) +
                                               " rows, not " + std::to_string(kRows));
  return OkStatus();
}

Status LossScale(MirroredStrategy& strategy) {
  const int rank = strategy.extended().world().rank();
  Sequential model({Dense(16, "tanh"), Dense(8, "relu"),
                    std::make_shared<testing::InjectNonFiniteLayer>(rank == 1 ? 0 : -1,
                                                                    std::set<int>{10}),
                    Dense(1)},
                   3);
  {
    auto scope = strategy.Scope();
    TOWER_RETURN_IF_ERROR(model.Compile(MeanSquaredErrorLoss(), Adam(0.003f)));
  }
  TOWER_RETURN_IF_ERROR(model.SetPrecisionPolicy(PrecisionPolicy::kMixedFloat16));
  TOWER_RETURN_IF_ERROR(model.SetLossScaling(LossScaleOptions{1024, 4}));
  data::SyntheticOptions synthetic;
  synthetic.name = "mlp";
  synthetic.rows = 24 * 16;
  synthetic.seed = 5;
  TOWER_ASSIGN_OR_RETURN(data::Dataset dataset, data::Dataset::Synthetic(synthetic));
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<data::Iterator> batches,
                         dataset.Batch(24).MakeIterator());
  for (int step = 1;; ++step) {
    TOWER_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, batches->Next());
    if (!batch.has_value()) break;
    TOWER_RETURN_IF_ERROR(model.TrainStep(*batch).status());
    // FNV-1a over every variable's bits (replica 0's copy).
    uint64_t hash = 1469598103934665603ull;
    bool copies_equal = true;
    std::vector<Variable*> all = model.trainable_variables();
    for (Variable* slot : model.optimizer()->slots()) all.push_back(slot);
    for (Variable* variable : all) {
      TOWER_ASSIGN_OR_RETURN(std::vector<float> values, variable->Read());
      for (int r = 1; r < variable->num_replicas(); ++r) {
        TOWER_ASSIGN_OR_RETURN(std::vector<float> copy, variable->value(r).ToHost());
        if (copy != values) copies_equal = false;
      }
      const unsigned char* bytes = reinterpret_cast<const unsigned char*>(values.data());
      for (size_t i = 0; i < values.size() * sizeof(float); ++i) {
        hash = (hash ^ bytes[i]) * 1099511628211ull;
      }
    }
    std::printf("rank %d: step %d scale %g iterations %lld weights %016llx copies %s\n", rank,
                step, model.loss_scale()->scale(),
                static_cast<long long>(model.optimizer()->iterations()),
                static_cast<unsigned long long>(hash), copies_equal ? "equal" : "DIFFER");
  }
  std::fflush(stdout);
  return OkStatus();
}

// Set by the own-sigpipe-handler scenario's handler.
volatile sig_atomic_t sigpipe_handled = 0;
void CountSigpipe(int) { sigpipe_handled = 1; }

// The closed-socket scenario, once the strategy has started MPI.
Status WriteToAClosedSocket() {
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, ends) != 0) {
    return InternalError(std::string("socketpair: ") + std::strerror(errno));
  }
  close(ends[1]);
  const char byte = 0;
  const ssize_t written = write(ends[0], &byte, 1);
  const int error = errno;
  close(ends[0]);
  if (written != -1 || error != EPIPE) {
    return InternalError("a write to a closed socket returned " + std::to_string(written) +
                         " (" + std::strerror(error) + "), not EPIPE");
  }
  return OkStatus();
}

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: mpi_worker <scenario> <local replicas> [timeout ms]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const int replicas = std::atoi(argv[2]);
  const int timeout_ms = argc > 3 ? std::atoi(argv[3]) : 60000;
  // The rank before MPI starts (mpirun's environment), for the mismatch scenarios.
  const char* rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  const bool odd_one = rank_env != nullptr && std::string(rank_env) == "1";
  if (scenario == "own-sigpipe-handler") signal(SIGPIPE, CountSigpipe);
  const int local = replicas + (scenario == "replicas-mismatch" && odd_one ? 1 : 0);
  Context& context = Context::Global();
  Status status = context.SetLogicalDeviceConfiguration(
      context.ListPhysicalDevices("CPU")[0], std::vector<LogicalDeviceConfiguration>(local));
  MirroredStrategyOptions options;
  options.collective_timeout = std::chrono::milliseconds(timeout_ms);
  if (scenario == "buckets-mismatch" && odd_one) options.bucket_bytes = 1 << 20;
  StatusOr<std::unique_ptr<MirroredStrategy>> strategy =
      status.ok() ? CreateStrategyFromEnvironment(options)
                  : StatusOr<std::unique_ptr<MirroredStrategy>>(status);
  if (!strategy.ok()) {
    std::fprintf(stderr, "rank %s error: %s\n", rank_env != nullptr ? rank_env : "?",
                 strategy.status().ToString().c_str());
    return 1;
  }
  const int rank = (*strategy)->extended().world().rank();
  if (scenario == "mismatch" || scenario == "buckets-mismatch") {
    status = Mismatch(**strategy, /*same_model=*/scenario != "mismatch");
  } else if (scenario == "api") {
    status = Api(**strategy);
  } else if (scenario == "closed-socket" || scenario == "own-sigpipe-handler") {
    status = WriteToAClosedSocket();
    if (status.ok() && scenario == "own-sigpipe-handler" && !sigpipe_handled) {
      status = InternalError("the program's own SIGPIPE handler was not called");
    }
    if (status.ok()) status = AllReduceRounds(**strategy, 5, scenario);
  } else if (scenario == "loss-scale") {
    status = LossScale(**strategy);
  } else {
    status = AllReduceRounds(**strategy, scenario == "skip" || scenario == "shape" || scenario == "late-shape" ? 8 : 5,
                             scenario);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d error: %s\n", rank, status.ToString().c_str());
    std::fflush(stderr);
    (*strategy)->extended().world().AbortJob(1);  // end every worker now, stalled ones included
  }
  std::printf("rank %d: %s OK (%d replicas in sync)\n", rank, scenario.c_str(),
              (*strategy)->num_replicas_in_sync());
  return 0;
}

}  // namespace
}  // namespace tower

int main(int argc, char** argv) { return tower::Main(argc, argv); }
