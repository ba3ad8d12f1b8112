// StepRunner: the one owner of a data-parallel step. For a global batch it decides how the
// step runs (each replica its shard, or batched replicas; one pass, micro-batches or virtual
// shards; the update inside the all-reduce or after it; the early loss read), runs every
// replica's passes through the model's ForwardBackward, hands the gradients to the replica's
// reducer, checks numerics across replicas, applies loss scaling and the update, and reads
// the loss. The model (StepModel) only computes and updates.
#ifndef TOWER_STRATEGY_STEP_STEP_RUNNER_H_
#define TOWER_STRATEGY_STEP_STEP_RUNNER_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "data/batch.h"
#include "strategy/step/distribution.h"
#include "strategy/step/loss_scale.h"
#include "strategy/step/step_model.h"
#include "util/cache_line.h"
#include "util/statusor.h"

namespace tower {

// How steps run, as the user set it (Sequential's setters; see model/sequential.h for each).
struct StepSettings {
  // Gradient accumulation: forward/backward passes per replica shard (1: off).
  int micro_batches = 1;
  // The first NaN or Inf in a loss or gradient fails the step, naming it (and, across
  // replicas, the first replica whose own value it was).
  bool check_numerics = false;
  // A one-GPU step waits for its backward and update before it returns.
  bool step_waits_for_device = false;
  // Replicas sharing their variables pack each weight once per step for all of them.
  bool share_weight_packing = true;
  // Measure the summed gradients' global norm (StepResult::gradient_norm).
  bool record_gradient_norm = false;
  // Time replica 0's reducer calls (StepResult::all_reduce_seconds).
  bool record_step_times = false;
  // Dynamic loss scaling; nullopt: off.
  std::optional<DynamicLossScale> loss_scale;
};

// One global batch to run.
struct StepRequest {
  const data::Batch* batch = nullptr;
  // Backward and update (else forward and loss only: evaluation).
  bool training = false;
  // When non-null: every row's outputs [batch rows, out_dim], host (across workers too).
  std::vector<float>* predictions = nullptr;
  int64_t in_dim = 0, out_dim = 0;
  // The optimizer's step counter before the step: the update is number iteration + 1.
  int64_t iteration = 0;
};

// What the step found.
struct StepResult {
  double loss = 0;  // the batch's mean loss (every replica holds the same)
  // Training: the update was applied (false: loss scaling found a non-finite summed
  // gradient and skipped the step; the caller does not advance the step counter).
  bool applied = true;
  float loss_scale = 0;  // the scale the gradients were computed with; 0: off
  // Seconds replica 0 spent in its reducer's calls (when record_step_times).
  double all_reduce_seconds = 0;
  // ‖summed gradients‖₂, unscaled, before clipping (when record_gradient_norm and applied).
  double gradient_norm = std::numeric_limits<double>::quiet_NaN();
};

class StepRunner {
 public:
  explicit StepRunner(StepModel& model);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  StepSettings& settings() { return settings_; }
  const StepSettings& settings() const { return settings_; }

  // The settings against the distribution, before a step: InvalidArgument when gradient
  // accumulation asks for more micro-batches than deterministic mode's virtual shards give
  // each replica.
  Status CheckSettings(const Distribution& distribution) const;
  // Whether steps share weight packings: the setting, and several local replicas sharing
  // their variables.
  bool SharesWeightPacking(const Distribution& distribution) const;

  // Runs `request` on every replica of `distribution` (RunOnReplicas, or once per batch of
  // replicas where they are batched). Updates the loss scale after a training step.
  StatusOr<StepResult> Run(Distribution& distribution, const StepRequest& request);

  // Outputs [rows, out_dim] (host) for host features [rows, in_dim]: every replica of every
  // worker computes its shard (ShardRows), and across workers one all-reduce gives every
  // worker every row.
  StatusOr<std::vector<float>> Predict(Distribution& distribution,
                                       const std::vector<float>& features, int64_t rows,
                                       int64_t in_dim, int64_t out_dim);

  // A custom loop's optimizer.apply_gradients in a replica context: sums `gradients` (trainable
  // order, shapes already checked) in place over every replica of every worker through the
  // replica's reducer, then applies update number `iteration` + 1 to this replica's copies.
  // Every replica calls it once per step; where they share their variables none returns
  // before all have updated their slices.
  Status SumAndUpdate(const Distribution& distribution, ReplicaContext& ctx, int64_t iteration,
                      std::vector<Tensor>& gradients);
  // Applies gradients summed elsewhere (towers) to every local replica's copies, outside a
  // replica context, as update number `iteration` + 1.
  Status UpdateEveryReplica(const Distribution& distribution, int64_t iteration,
                            const std::vector<Tensor>& gradients);

 private:
  struct ReplicaStep;
  // The step on one replica (its passes, the numerics checks, the update, the loss's read),
  // and its update once the gradients are summed.
  Status RunReplica(ReplicaContext& ctx);
  Status ApplyUpdate(ReplicaContext& ctx, ReplicaPass& pass, bool updated_in_reduce);

  StepModel& model_;
  StepSettings settings_;
  std::unique_ptr<ReplicaStep> replica_step_;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_STEP_STEP_RUNNER_H_
