// MirroredStrategy: synchronous data parallelism over the logical devices of one process
// (TensorFlow's tf.distribute.MirroredStrategy).
//
//   auto strategy = tower::MirroredStrategy::Create();  // all logical GPUs, else all CPUs
//   {
//     tower::DistributionScope scope(**strategy);       // `with strategy.scope():`
//     model.Compile(...);                               // variables mirrored per replica
//   }
//   model.Fit(dataset);                                 // data-parallel, no other change
//
// One replica per device, each driven by its own thread (replica 0 by the calling thread), or,
// for host replicas that outnumber the cores, by fibers on one thread per core; all meeting
// in the all-reduce; every replica computes its own shard (batch_replica_rows, an opt-in,
// computes colocated host replicas' rows as one batch instead). The all-reduce path is chosen
// once, from the devices (strategy/collectives/cross_device_ops_selection.h), and logged with its
// reason.
//
// A strategy runs over a World (strategy/runtime/world.h): this process alone, or every worker of
// an MPI job (MultiWorkerMirroredStrategy, strategy/mpi). Everything that depends on the
// other workers (the global replica count and index, the shard layout, Reduce, the
// consistency check, the chief) is written once, here, against the world.
#ifndef TOWER_STRATEGY_MIRRORED_STRATEGY_H_
#define TOWER_STRATEGY_MIRRORED_STRATEGY_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "strategy/step/distribution.h"
#include "strategy/collectives/cross_device_ops.h"
#include "strategy/collectives/cross_device_ops_selection.h"
#include "strategy/reducers/gradient_reducer.h"
#include "strategy/per_replica.h"
#include "strategy/runtime/replica_scheduler.h"
#include "strategy/reducers/tree_gradient_reducer.h"
#include "strategy/runtime/world.h"
#include "util/cache_line.h"

namespace tower {

struct MirroredStrategyOptions {
  // Device names ("/GPU:0", "/CPU:1", full names...). Empty: every logical GPU, else every
  // logical CPU.
  std::vector<std::string> devices;
  CrossDeviceOpsKind cross_device_ops = CrossDeviceOpsKind::kAuto;
  // Every collective gives up after this long, naming the replicas it waited for.
  std::chrono::milliseconds collective_timeout = std::chrono::minutes(5);
  // Gradients are all-reduced in buckets of about this many bytes during backward.
  int64_t bucket_bytes = 25ll << 20;
  // Deterministic (topology-invariant) training when positive: each global batch is cut
  // into this many fixed virtual shards and every sum follows one fixed tree over them
  // (Distribution::virtual_shards), so the weights have the same bits on 1 device or any
  // number of replicas and workers up to this count, with any bucket size and on any
  // cross-device path. Keep it the same across the runs to compare; it must be at least
  // the number of replicas in sync. 0: off (one pass per replica, sums in path order).
  int virtual_shards = 0;
  // Across workers (MultiWorkerMirroredStrategy): the wall clocks are compared when the
  // strategy is made. Training never depends on them (each worker times its own deadlines),
  // but logs and file times from hosts whose clocks disagree mislead: a skew over 2 s is
  // logged, and one over this limit is refused, naming both workers. 0: never refused.
  std::chrono::milliseconds max_clock_skew{0};
  // How many OS threads run host (CPU) replicas: 0 = tower::config's inter-op setting, whose
  // default is one per core. Host replicas beyond it run as fibers on those threads
  // (strategy/runtime/replica_scheduler.h): 8 replicas on 2 cores cost about what 2 do. GPU
  // replicas always have a thread each (they mostly wait for their streams). 1 puts every
  // host replica on one thread: strategy.Run then runs the replicas' own code one after
  // another on it (a model's batched steps are the same either way: batch_threads).
  int replica_threads = 0;
  // Host replicas of one process share one copy of each variable (and of the optimizer's
  // slots) instead of holding one each: every replica reads the same weights, and each step
  // updates them once, every replica its own slice, right as the all-reduce sums it
  // (Distribution::ReplicasShareVariables). The bits are those of a copy per replica.
  // Off: a copy per replica, as on GPUs. Across workers each process keeps its own copies.
  bool share_variables = true;
  // Host replicas that run as fibers (more of them than replica threads) fold their
  // gradients: the replicas of one thread add theirs into one running sum, and the
  // all-reduce reads one sum per thread (strategy/reducers/gradient_folding.h). Less memory and
  // fewer
  // reads per step; the bits are still the same run after run for the same replicas and
  // threads, but not those of a thread per replica (off), which adds every replica's
  // gradients in replica order whatever the threads. Deterministic mode never folds.
  bool fold_replica_gradients = true;
  // Off (the default): every replica runs its own shard of each step, its own forward,
  // backward and gradient reducer, and the all-reduce sums across replicas, as on as many
  // GPUs: what MirroredStrategy promises and what a run on N logical CPUs simulates.
  // On: faster, does not simulate devices. Host replicas that share their variables compute
  // a model's training and evaluation steps as batches of their rows
  // (Distribution::RunOnReplicaBatches): a batch's first replica runs the layers once over
  // the shards of every member, and the all-reduce and the update run among the batches
  // only. How many batches: batch_threads below; by default one, whose kernels use every
  // core (intra-op threads), so a step of R replicas on C cores pays its per-op costs once
  // and sums nothing across cores (2 replicas on 2 cores: 1.08-1.11x for `mlp`, 1.15x for
  // `linreg` against off; 8 replicas cost about what 2 do; a Zen 5 host, docs/BENCHMARKS.md,
  // runs AH and AI). Each replica's rows are still its shard of every global batch; the
  // update is the same sum of the same rows' gradients, summed in another order, so its
  // bits are not those of off, but the same run after run for the same replicas, batches
  // and threads. Needs fold_replica_gradients (which consents to that order) and no
  // deterministic mode; a batch's activations live on its first replica's device. Steps of
  // several passes (gradient accumulation), check-numerics (which names the replica of a
  // non-finite value) and custom loops (strategy.Run) run every replica on its own thread or
  // fiber either way.
  bool batch_replica_rows = false;
  // How many batches (and replica threads) compute a batched step: batch b is replicas b,
  // b + batch_threads, … (util/round_robin.h), computed by replica b on its thread with
  // kernels split over cores / batch_threads intra-op threads (an explicit intra-op setting
  // is taken as it is). 0: one batch. At most the replica threads.
  int batch_threads = 0;
  // Reduced-precision all-reduce across workers (MultiWorkerMirroredStrategy over MPI):
  // bfloat16 or float16 sends each gradient in 16 bits and sums in float32 (half the bytes
  // of float32, each sum rounded once to 16 bits;
  // strategy/collectives/mpi/cross_process_all_reduce.h).
  // Sums among one process's replicas move no bytes between hosts and stay float32. Every
  // worker must give the same value. float32: off.
  DType cross_process_dtype = DType::kFloat32;
  // Context to take devices from; nullptr: Context::Default().
  Context* context = nullptr;
};

// One replica's shard of a global batch, on the replica's device.
struct ReplicaBatch {
  Tensor features;  // [rows, feature_dim]
  Tensor targets;   // [rows, target_dim], as the data holds them
  RowRange rows;    // which rows of the global batch these are
  int64_t global_batch_size = 0;
};

enum class ReduceOp { kSum, kMean };

class DistributedDataset;

class MirroredStrategy : public Distribution {
 public:
  // Over this process alone.
  static StatusOr<std::unique_ptr<MirroredStrategy>> Create(
      const MirroredStrategyOptions& options = MirroredStrategyOptions());
  ~MirroredStrategy() override;

  // ---- Distribution (what models use)
  std::string Describe() const override;
  int num_local_replicas() const override { return static_cast<int>(devices_.size()); }
  int num_replicas_in_sync() const override { return world_->size() * num_local_replicas(); }
  int first_global_replica() const override { return world_->rank() * num_local_replicas(); }
  Device* replica_device(int replica) const override { return devices_[replica]; }
  bool is_chief() const override { return world_->rank() == 0; }
  int virtual_shards() const override { return virtual_shards_; }
  // Whether its replicas fold their gradients (MirroredStrategyOptions::fold_replica_gradients,
  // and the replicas run as fibers on the in-process all-reduce).
  bool folds_replica_gradients() const { return folding_ != nullptr; }
  // MirroredStrategyOptions::batch_replica_rows: the batches (batch_threads), when
  // the replicas are batched; else 0.
  int batched_groups() const override { return static_cast<int>(batches_.size()); }
  bool ReplicasShareVariables() const override {
    return share_variables_ && world_->size() == 1;
  }
  Status CheckConsistent(const std::string& model_signature) override;
  void Abort(int exit_code) override { world_->AbortJob(exit_code); }
  int worker_rank() const override { return world_->rank(); }
  int num_workers() const override { return world_->size(); }
  std::string DescribeWorker(int rank) const override { return world_->Describe(rank); }
  StatusOr<std::vector<std::string>> GatherFromWorkers(const std::string& mine) override {
    return world_->AllGather(mine, timeout_, "gathering every worker's report");
  }
  Status RunOnReplicas(const std::function<Status(ReplicaContext&)>& fn) override;
  Status RunOnReplicaBatches(const std::function<Status(ReplicaContext&)>& fn) override;

  // ---- TensorFlow's strategy API
  // `with strategy.scope():`
  std::unique_ptr<DistributionScope> Scope() { return std::make_unique<DistributionScope>(*this); }
  // strategy.run(fn): fn runs on every local replica (under a DeviceScope of its device)
  // and its values come back per local replica.
  template <typename T>
  StatusOr<PerReplica<T>> Run(const std::function<StatusOr<T>(ReplicaContext&)>& fn);
  // strategy.reduce: the sum, or the mean over num_replicas_in_sync(), of one value per
  // replica of every worker (`values` holds this worker's local replicas'), on /CPU:0 (or
  // `destination`). Across workers it is a collective: every worker calls it in turn.
  StatusOr<Tensor> Reduce(ReduceOp op, const PerReplica<Tensor>& values,
                          Device* destination = nullptr);
  StatusOr<double> Reduce(ReduceOp op, const PerReplica<double>& values);
  // strategy.experimental_distribute_dataset: each global batch split into per-replica
  // shards (Distribution::ShardRows), in order, on the local replicas' devices. Every
  // worker iterates the same global batches and takes its own replicas' rows.
  DistributedDataset DistributeDataset(const data::Dataset& dataset);

  const std::vector<Device*>& devices() const { return devices_; }
  World& world() const { return *world_; }
  int64_t bucket_bytes() const { return bucket_bytes_; }
  std::chrono::milliseconds collective_timeout() const { return timeout_; }
  CrossDeviceOps& cross_device_ops() const { return *cross_device_ops_; }
  const CrossDeviceOpsChoice& cross_device_ops_choice() const { return choice_; }
  // The replica name used in errors: "replica 1 (/job:localhost/replica:0/task:0/device:CPU:1)".
  const std::string& replica_name(int replica) const { return names_[replica]; }

  // ---- For factories of strategies over other worlds (strategy/mpi).
  // This process's devices, their names, and the all-reduce among them.
  struct LocalSetup {
    Context* context = nullptr;
    int64_t bucket_bytes = 25ll << 20;
    int virtual_shards = 0;
    std::chrono::milliseconds timeout{0};
    std::vector<Device*> devices;
    std::vector<std::string> names;
    CrossDeviceOpsChoice choice;
    std::unique_ptr<CrossDeviceOps> ops;
    bool spin = false;
    int threads = 1;  // OS threads for the local replicas (fibers when fewer than replicas)
    int intra_op_threads = 1;  // threads each replica's CPU kernels may use
    bool share_variables = false;  // several host replicas, sharing asked for
    int fold_groups = 0;  // > 0: gradients folded into this many groups, if `ops` can
    // The all-reduce among the batches of replicas (MirroredStrategyOptions::
    // batch_replica_rows), one per batch thread, named by batch_names; null: no
    // batches.
    std::unique_ptr<CrossDeviceOps> batch_ops;
    std::vector<std::string> batch_names;
    int batch_intra_op_threads = 1;  // threads each batch's CPU kernels may use
    DType cross_process_dtype = DType::kFloat32;
  };
  static StatusOr<LocalSetup> PrepareLocal(const std::string& kind,
                                           const MirroredStrategyOptions& options);
  // The strategy `kind` over `world` (which outlives it), with `setup.ops` carrying every
  // collective; logs "Using <kind> with devices (...)" and the cross-device ops. Fails when
  // deterministic mode has fewer virtual shards than replicas in sync.
  static StatusOr<std::unique_ptr<MirroredStrategy>> Assemble(std::string kind, World* world,
                                                              LocalSetup setup);

 private:
  class Replica;
  MirroredStrategy(std::string kind, World* world, LocalSetup setup);
  // A run of `fn` on every replica, or on the batches' first replicas.
  Status RunOn(const std::function<Status(ReplicaContext&)>& fn, bool batches);
  Status RunReplica(Replica& replica, const std::function<Status(ReplicaContext&)>& fn);
  static void RunScheduled(void* self, int replica);
  static void RunScheduledBatch(void* self, int first_replica);

  const std::string kind_;
  World* const world_;
  const std::vector<Device*> devices_;
  Context* const context_;
  std::vector<std::string> names_;
  const CrossDeviceOpsChoice choice_;
  const std::unique_ptr<CrossDeviceOps> cross_device_ops_;
  const int64_t bucket_bytes_;
  const int virtual_shards_;
  const DType cross_process_dtype_;
  const std::chrono::milliseconds timeout_;
  const int intra_op_threads_;
  const int batch_intra_op_threads_;
  const bool share_variables_;
  // Gradient folding, when on (null otherwise); before replicas_, which point to it.
  std::unique_ptr<GradientFolding> folding_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  // Batched steps: the all-reduce among the batches, and the batches as their first
  // replicas see them (replica b computes batch b); empty when not batched.
  const std::unique_ptr<CrossDeviceOps> batch_ops_;
  const std::vector<std::string> batch_names_;
  std::vector<std::unique_ptr<Replica>> batches_;

  // The run in progress: fn_ on every replica, through the scheduler. Every replica thread
  // reads it each run; the caller writes it only when it changes (a training loop passes
  // the same function object step after step).
  const std::function<Status(ReplicaContext&)>* fn_ = nullptr;
  std::unique_ptr<ReplicaScheduler> scheduler_;
  // The caller's own state of a run, written every run (its locks, the failure it resets),
  // on lines of its own: beside fn_ and replicas_ it cost every replica thread a miss on
  // them each step. A replica thread writes here only when it fails.
  alignas(kCacheLineBytes) std::mutex run_mu_;  // one Run at a time
  std::mutex failure_mu_;
  Status first_failure_;  // guarded by failure_mu_: the root cause when replicas fail
  // Whether first_failure_ holds a failure (set with it, cleared when a run takes it): a
  // run without one reads this flag instead of taking failure_mu_ twice on the caller's
  // path between steps.
  std::atomic<bool> failed_{false};
};

// TensorFlow's OneDeviceStrategy: one replica, on the calling thread.
class OneDeviceStrategy {
 public:
  static StatusOr<std::unique_ptr<MirroredStrategy>> Create(const std::string& device,
                                                            Context* context = nullptr);
};

// Iterates a dataset as per-replica shards (see MirroredStrategy::DistributeDataset).
class DistributedDataset {
 public:
  DistributedDataset(MirroredStrategy* strategy, data::Dataset dataset)
      : strategy_(strategy), dataset_(std::move(dataset)) {}
  // Starts a pass (epoch `epoch`).
  Status Begin(int64_t epoch = 0);
  // The next global batch as shards (a replica may get zero rows on an uneven final batch),
  // or nullopt at the end of the pass.
  StatusOr<std::optional<PerReplica<ReplicaBatch>>> Next();

 private:
  MirroredStrategy* strategy_;
  data::Dataset dataset_;
  std::unique_ptr<data::Iterator> iterator_;
};

template <typename T>
StatusOr<PerReplica<T>> MirroredStrategy::Run(
    const std::function<StatusOr<T>(ReplicaContext&)>& fn) {
  std::vector<std::optional<T>> values(devices_.size());
  TOWER_RETURN_IF_ERROR(RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    StatusOr<T> value = fn(ctx);
    if (!value.ok()) return value.status();
    values[ctx.replica_id()] = std::move(value).value();
    return OkStatus();
  }));
  std::vector<T> out;
  out.reserve(values.size());
  for (auto& value : values) out.push_back(std::move(*value));
  return PerReplica<T>(std::move(out));
}

}  // namespace tower

#endif  // TOWER_STRATEGY_MIRRORED_STRATEGY_H_
