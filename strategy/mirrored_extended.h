// MirroredExtended: the implementer's side of a MirroredStrategy (TensorFlow's
// `strategy.extended`, tf.distribute.StrategyExtended): the Distribution that a model's step
// runner (strategy/step/step_runner.h) runs replicas on, the world and collectives beneath
// it, and the factories other worlds build strategies with (strategy/collectives/mpi). What
// users call is MirroredStrategy (mirrored_strategy.h); it owns one of these.
//
// One replica per device, each driven by its own thread (replica 0 by the calling thread), or,
// for host replicas that outnumber the cores, by fibers on one thread per core; all meeting
// in the all-reduce; every replica computes its own shard (batch_replica_rows, an opt-in,
// computes colocated host replicas' rows as one batch instead). The all-reduce path is chosen
// once, from the devices (strategy/collectives/cross_device_ops_selection.h), and logged with
// its reason.
//
// It runs over a World (strategy/runtime/world.h): this process alone, or every worker of an
// MPI job (MultiWorkerMirroredStrategy, strategy/collectives/mpi). Everything that depends on
// the other workers (the global replica count and index, the shard layout, the consistency
// check, the chief) is written once, here, against the world.
#ifndef TOWER_STRATEGY_MIRRORED_EXTENDED_H_
#define TOWER_STRATEGY_MIRRORED_EXTENDED_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "strategy/collectives/cross_device_ops.h"
#include "strategy/collectives/cross_device_ops_selection.h"
#include "strategy/mirrored_strategy_options.h"
#include "strategy/reducers/gradient_reducer.h"
#include "strategy/runtime/replica_scheduler.h"
#include "strategy/runtime/world.h"
#include "strategy/step/distribution.h"
#include "util/cache_line.h"

namespace tower {

class MirroredExtended : public Distribution {
 public:
  ~MirroredExtended() override;

  // ---- Distribution (what the step runner uses)
  std::string Describe() const override;
  int num_local_replicas() const override { return static_cast<int>(devices_.size()); }
  int num_replicas_in_sync() const override { return world_->size() * num_local_replicas(); }
  int first_global_replica() const override { return world_->rank() * num_local_replicas(); }
  Device* replica_device(int replica) const override { return devices_[replica]; }
  bool is_chief() const override { return world_->rank() == 0; }
  int virtual_shards() const override { return virtual_shards_; }
  // MirroredStrategyOptions::batch_replica_rows: the batches (batch_threads), when
  // the replicas are batched; else 0.
  int batched_groups() const override { return static_cast<int>(batches_.size()); }
  bool ReplicasShareVariables() const override { return share_variables_ && world_->size() == 1; }
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

  // ---- What lies beneath
  // Whether its replicas fold their gradients (MirroredStrategyOptions::fold_replica_gradients,
  // and the replicas run as fibers on the in-process all-reduce).
  bool folds_replica_gradients() const { return folding_ != nullptr; }
  const std::vector<Device*>& devices() const { return devices_; }
  Context& context() const { return *context_; }
  World& world() const { return *world_; }
  int64_t bucket_bytes() const { return bucket_bytes_; }
  std::chrono::milliseconds collective_timeout() const { return timeout_; }
  CrossDeviceOps& cross_device_ops() const { return *cross_device_ops_; }
  const CrossDeviceOpsChoice& cross_device_ops_choice() const { return choice_; }
  // The replica name used in errors: "replica 1 (/job:localhost/replica:0/task:0/device:CPU:1)".
  const std::string& replica_name(int replica) const { return names_[replica]; }

  // ---- For factories of strategies (MirroredStrategy::Create; strategy/collectives/mpi).
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
    int intra_op_threads = 1;      // threads each replica's CPU kernels may use
    bool share_variables = false;  // several host replicas, sharing asked for
    int fold_groups = 0;           // > 0: gradients folded into this many groups, if `ops` can
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
  // The strategy `kind`'s replicas over `world` (which outlives them), with `setup.ops`
  // carrying every collective; logs "Using <kind> with devices (...)" and the cross-device
  // ops. Fails when deterministic mode has fewer virtual shards than replicas in sync.
  static StatusOr<std::unique_ptr<MirroredExtended>> Assemble(std::string kind, World* world,
                                                              LocalSetup setup);

 private:
  class Replica;
  MirroredExtended(std::string kind, World* world, LocalSetup setup);
  void LogSetup() const;
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

}  // namespace tower

#endif  // TOWER_STRATEGY_MIRRORED_EXTENDED_H_
