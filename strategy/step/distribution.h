// Distribution: what a model needs from a distribution strategy, defined here so that
// model/ does not depend on strategy/ (which implements it: MirroredStrategy, ...).
//
// A model captures the current distribution when it is compiled — the innermost
// DistributionScope on this thread (TensorFlow's `with strategy.scope():`), else the default
// one: a single replica on the default device, run on the calling thread. Its variables then
// have one copy per replica, and Fit runs every step on every replica, each on its shard of
// the global batch, summing gradients with an all-reduce.
#ifndef TOWER_STRATEGY_STEP_DISTRIBUTION_H_
#define TOWER_STRATEGY_STEP_DISTRIBUTION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "device/device.h"
#include "ops/tensor.h"
#include "util/span.h"
#include "util/statusor.h"

namespace tower {

// Rows [first, first + count) of a global batch.
struct RowRange {
  int64_t first = 0;
  int64_t count = 0;
  int64_t end() const { return first + count; }
};

// The shard layout of data parallelism, computed here and nowhere else: global replica
// `replica` of `num_replicas` takes a contiguous block of the `global_rows` rows, in replica
// order, the sizes differing by at most one (the first `global_rows % num_replicas`
// replicas take one row more). A replica may get zero rows (an uneven final batch).
RowRange ReplicaRows(int64_t global_rows, int num_replicas, int replica);

// Takes summed gradients instead of their being written back into every replica's gradient
// tensor: replicas that share their variables apply the update to each slice of the sum as
// it is formed, while it is in cache. Called concurrently by every replica's thread, each
// with other elements; each element of each gradient is handed over exactly once per step.
class SummedGradientSink {
 public:
  virtual ~SummedGradientSink() = default;
  // Elements [begin, end) of the sum of gradient `gradient` (its index in the order the
  // step's Begin announced): `sum` holds end − begin floats, valid during the call.
  virtual void Consume(size_t gradient, int64_t begin, int64_t end, const float* sum) = 0;
};

// Sums one step's gradients over every replica, in buckets, as backward produces them
// (PyTorch's Reducer). Strategies implement it (strategy/reducers/gradient_reducer.h); a model
// feeds
// it and knows nothing of buckets. Each replica has its own, used by one thread.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // Starts pass `pass` of the `passes` forward/backward passes this replica runs in a step
  // (Distribution::PassRows: one, one per micro-batch under gradient accumulation, or in
  // deterministic mode one per virtual shard), whose
  // backward will produce gradients of these sizes (bytes), in this order. Every pass of
  // every replica must announce the same sizes (none: only Finish's extras are summed).
  virtual Status Begin(Span<const int64_t> gradient_bytes, int pass, int passes) = 0;
  // The next gradient, in the announced order. The tensor stays the caller's and must live
  // until Finish. On the step's last pass it holds the sum once Finish returns (a full
  // bucket may start summing now); earlier passes' gradients are kept by the reducer as
  // partial sums.
  virtual Status Add(Tensor* gradient) = 0;
  // Where this replica may add its next `count` gradients (from the `first`-th of the pass,
  // 0-based) instead of making new ones: the running sums of the replicas before it in its
  // group, when its reducer folds gradients (strategy/reducers/gradient_folding.h), once they hold
  // them (it may wait for them). Empty otherwise, and for a group's first replica. Either
  // way Add still receives every gradient (a running sum the layer added into, or a new
  // tensor the reducer adds).
  virtual StatusOr<Span<Tensor* const>> RunningSums(size_t first, size_t count) {
    return Span<Tensor* const>();
  }
  // Ends the pass. On the last: sums what is left, together with `extra` (the loss rides in
  // the last bucket; every pass gives the same number of extras, the sum over all passes
  // lands in the last pass's), and orders the replica's later device work after every sum
  // of the step.
  virtual Status Finish(Span<Tensor* const> extra) = 0;
  // Asks that the next step's summed gradients go to `sink` (the extras still come back in
  // place), or, with nullptr, back to the default. True when this reducer does so; then the
  // gradient tensors hold only this replica's own gradients after Finish (its group's, when
  // it folds them). Paths that cannot
  // hand sums over (all but the in-process all-reduce) return false and sum in place.
  virtual bool HandOverSums(SummedGradientSink* sink) { return false; }
};

// What one replica sees while a step runs on it.
class ReplicaContext {
 public:
  virtual ~ReplicaContext() = default;

  // Index among this process's replicas, 0-based.
  virtual int replica_id() const = 0;
  // Replicas in sync across all processes (the global batch is split this many ways).
  virtual int num_replicas_in_sync() const = 0;
  // Index among all replicas of all processes.
  virtual int global_replica_id() const = 0;
  virtual Device* device() const = 0;

  // Sums each tensor over all replicas, in place: afterwards every replica holds the same
  // sum, bitwise. Every replica must call it with tensors of the same shapes, in the same
  // order (a collective); tensors are on this replica's device.
  virtual Status AllReduceSum(Span<Tensor* const> tensors) = 0;
  // Overwrites each tensor with the first replica's (rank 0's) values.
  virtual Status Broadcast(Span<Tensor* const> tensors) = 0;
  // Paths that reduce asynchronously (NCCL on its own stream) may return from AllReduceSum
  // before the sums are complete on the device; this orders the replica's later work after
  // every reduction started so far. Synchronous paths: nothing to do.
  virtual Status FinishReductions() { return OkStatus(); }
  // This replica's gradient reducer (see GradientReducer).
  virtual GradientReducer& gradient_reducer() = 0;
};

class Distribution {
 public:
  virtual ~Distribution() = default;

  // "OneDevice(/job:localhost/replica:0/task:0/device:CPU:0)", "MirroredStrategy(...)".
  virtual std::string Describe() const = 0;
  virtual int num_local_replicas() const = 0;
  virtual int num_replicas_in_sync() const = 0;
  // Global index of this process's first replica (0 in one process).
  virtual int first_global_replica() const = 0;
  virtual Device* replica_device(int local_replica) const = 0;
  // Whether this process writes checkpoints and logs (rank 0 of several processes).
  virtual bool is_chief() const = 0;

  // Deterministic (topology-invariant) training when positive: every global batch is cut
  // into this many fixed virtual shards (ReplicaRows over them), each computed by its own
  // forward/backward pass whichever replica runs it, global replica g running virtual
  // shards ReplicaRows(virtual_shards(), num_replicas_in_sync(), g); every sum over the
  // batch follows one fixed tree over the shards (strategy/collectives/summation_tree.h). The
  // weights
  // then have the same bits on any replica and process count. 0: off (one pass per replica).
  virtual int virtual_shards() const { return 0; }

  // Whether the local replicas share one copy of each variable (Variable::shared): replicas
  // of one process in host memory whose all-reduce reads every replica's memory. The
  // optimizer then updates each variable once per step, every replica its own slice.
  virtual bool ReplicasShareVariables() const { return false; }

  // Batched replicas (MirroredStrategyOptions::batch_replica_rows): when positive,
  // the local replicas, which share their variables, form this many batches (one by
  // default) — replica r in batch r % batched_groups() (util/round_robin.h), and a
  // model's step of one pass per replica may run once per batch (RunOnReplicaBatches): the
  // batch's first replica (r < batched_groups()) computes the shards of every member
  // (BatchShards) as one pass. 0: no batches.
  virtual int batched_groups() const { return 0; }

  // The shards a batched step (RunOnReplicaBatches) computes on batch `batch`'s first
  // replica (local replica `batch`) for a global batch of `global_rows` rows: those of every
  // replica of the batch, in replica order, written into `*shards` (cleared first).
  void BatchShards(int64_t global_rows, int batch, std::vector<RowRange>* shards) const;
  // What batch `batch` of `local_replicas` replicas in `batches` batches computes, as errors
  // and traces name it: "computing the batch of replicas 1, 3, 5, 7".
  static std::string DescribeBatch(int local_replicas, int batches, int batch);

  // The rows of each forward/backward pass global replica `replica` runs on a global batch
  // of `global_rows` rows, in order: its shard (ReplicaRows over num_replicas_in_sync()) cut
  // into `micro_batches` contiguous micro-batches (ReplicaRows over them: sizes differ by at
  // most one), or in deterministic mode its virtual shards, which are its micro-batches
  // (`micro_batches` is then not used). Some passes may be empty on a small final batch.
  // Written into `*passes` (cleared first), so that a caller reusing the vector allocates
  // nothing per step.
  void PassRows(int64_t global_rows, int replica, int micro_batches,
                std::vector<RowRange>* passes) const;
  // The rows replica `replica` trains on: all of its passes' rows (contiguous).
  RowRange ShardRows(int64_t global_rows, int replica) const;

  // ---- Values with a copy per replica (a model's variables), built on the calls above.
  // The copies of a new value: one per local replica, each made by `make` on its replica's
  // device, or where the replicas share their variables one made on replica 0's device and
  // turned into every replica's handle by `share(value, num_local_replicas())`.
  StatusOr<std::vector<Tensor>> MakeCopies(
      const std::function<StatusOr<Tensor>(Device*)>& make,
      const std::function<std::vector<Tensor>(const Tensor&, int)>& share) const;
  // Makes every replica's copies (`copies(r)`: local replica r's, the same number and shapes
  // on every replica) equal to the first replica's of rank 0, where the replicas hold copies
  // of their own (several in sync, not sharing): a collective of every worker.
  Status BroadcastCopies(const std::function<std::vector<Tensor*>(int)>& copies);
  // Waits until every local replica's device has done the work queued so far, and reports
  // an error any of it met.
  Status SynchronizeDevices() const;
  // The first local replica whose device is not a CPU, or -1.
  int FirstReplicaNotOnCpu() const;

  // Checks, before the first step, that every worker of a multi-process job describes the
  // same training (`model_signature`, plus the distribution's own settings: replica counts,
  // gradient buckets): every worker then gets the same error naming the odd one out. One
  // process: always OK.
  virtual Status CheckConsistent(const std::string& model_signature) { return OkStatus(); }

  // This process's index among the workers of the job (0 in one process), how many there
  // are, and how logs name one ("rank 2 (host b)").
  virtual int worker_rank() const { return 0; }
  virtual int num_workers() const { return 1; }
  virtual std::string DescribeWorker(int rank) const { return "this process"; }
  // Every worker's string, in rank order: a collective of every worker (one process: its
  // own). Traces and reports gathered by the chief use it.
  virtual StatusOr<std::vector<std::string>> GatherFromWorkers(const std::string& mine) {
    return std::vector<std::string>{mine};
  }
  // After an error this worker cannot recover from: ends every worker of the job at once
  // (MPI_Abort), so that none waits for this one in a collective until its deadline. In one
  // process there is nobody else to end: returns.
  virtual void Abort(int exit_code) {}

  // Runs `fn` once per local replica, concurrently, each on its own thread and device.
  // Returns OK, or the first error prefixed with the replica that raised it; a failing
  // replica never leaves the others blocked in a collective.
  virtual Status RunOnReplicas(const std::function<Status(ReplicaContext&)>& fn) = 0;
  // Where replicas are batched (batched_groups() > 0): runs `fn` once per batch, on the
  // batch's first replica and its thread, as RunOnReplicas would run it there, but every
  // collective of its context (AllReduceSum, Broadcast, its gradient reducer) is among the
  // batches' first replicas only: a batch takes part for all its members, which run
  // nothing. `fn` computes its members' shards (BatchShards) and updates the shared
  // variables in batched_groups() slices. Not batched: FailedPrecondition.
  virtual Status RunOnReplicaBatches(const std::function<Status(ReplicaContext&)>& fn) {
    return FailedPreconditionError("this distribution does not batch its replicas");
  }
};

// A single replica on one device, run on the calling thread; collectives are no-ops.
class SingleDeviceDistribution : public Distribution {
 public:
  explicit SingleDeviceDistribution(Device* device) : device_(device) {}
  std::string Describe() const override;
  int num_local_replicas() const override { return 1; }
  int num_replicas_in_sync() const override { return 1; }
  int first_global_replica() const override { return 0; }
  Device* replica_device(int) const override { return device_; }
  bool is_chief() const override { return true; }
  Status RunOnReplicas(const std::function<Status(ReplicaContext&)>& fn) override;

 private:
  Device* device_;
};

// Makes `distribution` the current one on this thread while alive. Nests.
class DistributionScope {
 public:
  explicit DistributionScope(Distribution& distribution);
  ~DistributionScope();
  DistributionScope(const DistributionScope&) = delete;
  DistributionScope& operator=(const DistributionScope&) = delete;

 private:
  Distribution* previous_;
};

// The innermost scope's distribution, or nullptr outside every scope (a model then makes
// its own SingleDeviceDistribution on the default device: the first GPU, else CPU:0).
Distribution* CurrentDistribution();

}  // namespace tower

#endif  // TOWER_STRATEGY_STEP_DISTRIBUTION_H_
