// Sequential: a stack of layers trained the Keras way.
//
//   tower::Sequential model({tower::Dense(1)});
//   TOWER_CHECK_OK(model.Compile(tower::MeanSquaredErrorLoss(), tower::SGD(0.2f)));
//   auto history = model.Fit(dataset.Batch(32), {.epochs = 10});
//
// Under a distribution (a strategy's scope when Compile is called; see strategy/step/distribution.h)
// every variable has one copy per replica, each global batch is split into per-replica
// shards, every replica computes its loss and gradients normalised by the global batch size,
// the gradients are summed over the replicas as backward produces them, and every replica
// applies the same update: N replicas train exactly as one device would on the whole batch
// (to float rounding). The step itself is the strategy's (strategy/step/step_runner.h); the
// model is its StepModel (strategy/step/step_model.h): it computes and updates.
//
// One forward/backward (ForwardBackward) serves the training step, Evaluate, Predict,
// custom loops (ComputeGradients, model/towers.h) alike. The training loop (Fit,
// Evaluate, backups) is in training_loop.cc; weights and backups on disk in weights_io.cc.
#ifndef TOWER_MODEL_SEQUENTIAL_H_
#define TOWER_MODEL_SEQUENTIAL_H_

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/callback.h"
#include "strategy/step/distribution.h"
#include "strategy/step/step_model.h"
#include "strategy/step/step_runner.h"
#include "model/fit_position.h"
#include "model/layer.h"
#include "model/logs.h"
#include "model/loss.h"
#include "model/metrics.h"
#include "model/model_file.h"
#include "model/optimizer.h"
#include "model/precision.h"
#include "util/cache_line.h"

namespace tower {

namespace checkpoint {
struct File;
}  // namespace checkpoint

struct FitOptions {
  int epochs = 1;
  // Steps per epoch; -1: one full pass of the dataset each epoch (an infinite dataset then
  // needs a value).
  int64_t steps_per_epoch = -1;
  // Stop after this many steps in all (-1: no limit).
  int64_t max_steps = -1;
  // Evaluated after each epoch; its figures are logged with a "val_" prefix.
  const data::Dataset* validation = nullptr;
  // A step whose loss is NaN or Inf stops training with an error (Keras's TerminateOnNaN,
  // on by default): such a run has diverged, and training on would only write NaN weights.
  bool terminate_on_nan = true;
  std::vector<std::shared_ptr<Callback>> callbacks;
  int verbose = 1;               // 0 silent, 1 progress bar, 2 one line per epoch
  std::ostream* out = nullptr;   // where progress goes; nullptr: std::cout

  // Backup and restore (TensorFlow's BackupAndRestore): every `backup_every_steps` steps
  // (0: never) and when training ends, the weights, the optimizer state and the position
  // (FitPosition, carrying `signature`) are written atomically to `backup_path` by the
  // chief. `resume` (from RestoreBackup, which has loaded the weights) continues a killed
  // run from its last backup: the data before the position is read and skipped, so the
  // resumed run ends with the same bits as an uninterrupted one.
  std::string backup_path;
  int64_t backup_every_steps = 0;
  std::string signature;
  std::optional<FitPosition> resume;
};

// What the last training step (TrainStep, each of Fit's steps) measured, for callbacks that
// log it (TensorBoard). Plain values, overwritten in place by every step: no allocation.
struct StepStats {
  // The optimizer's iterations when the step began: it was update number iteration + 1
  // (unless `skipped`).
  int64_t iteration = 0;
  // The learning rate the step used (the schedule's at `iteration`; a skipped step's is
  // the rate it would have used, which the next step uses).
  float learning_rate = 0;
  // Wall time of the whole step (TrainStep: forward, backward, all-reduce, update), seconds;
  // measured only while set_record_step_times is on, else 0. A one-GPU step returns once its
  // loss is known (set_step_waits_for_device): its time is the host's, which in a loop of
  // steps is the device's per step, the previous step's backward included.
  double step_seconds = 0;
  // Wall time replica 0 spent summing gradients (its reducer's calls: strategy/step) during the
  // step, seconds: the sums themselves, and the time it waited there for the other replicas
  // (and workers) to bring theirs, so a slow replica shows up here too. Under gradient
  // accumulation it includes the local sums of the earlier micro-batches. Measured only
  // while set_record_step_times is on (two clock reads per reducer call), else 0.
  double all_reduce_seconds = 0;
  // The loss scale the step's gradients were computed with; 0 when loss scaling is off.
  float loss_scale = 0;
  // Loss scaling found a non-finite summed gradient: no update, the scale halved.
  bool skipped = false;
  // ‖summed gradients‖₂ (GlobalNorm over every trainable variable's gradient, after the
  // all-reduce, unscaled, before clipping) when set_record_gradient_norm is on and the step
  // was not skipped; NaN otherwise.
  double gradient_global_norm = std::numeric_limits<double>::quiet_NaN();
};

// One replica's loss and gradients, not yet summed over replicas (ComputeGradients).
struct ReplicaGradients {
  Tensor loss;                    // [1], this replica's rows / the global batch size
  std::vector<Tensor> gradients;  // in trainable_variables() order
};

class Sequential : private StepModel {
 public:
  // `seed` makes initial weights reproducible: the same seed gives the same weights on every
  // device and replica count.
  explicit Sequential(std::vector<std::shared_ptr<Layer>> layers, uint64_t seed = 0);
  ~Sequential();
  Sequential(const Sequential&) = delete;
  Sequential& operator=(const Sequential&) = delete;

  // Sets the loss, optimizer and metrics ("mae", "mse", "accuracy") and captures the
  // current distribution (a strategy's scope), else one replica on the default device.
  Status Compile(std::unique_ptr<Loss> loss, std::unique_ptr<Optimizer> optimizer,
                 const std::vector<std::string>& metrics = {});
  // Creates the variables for inputs of `input_dim` features (Fit does it on first use).
  Status Build(int64_t input_dim);
  bool built() const { return input_dim_ >= 0; }

  StatusOr<History> Fit(const data::Dataset& dataset, const FitOptions& options = FitOptions());
  // Loss and metrics over one pass of `dataset` (no update).
  StatusOr<Logs> Evaluate(const data::Dataset& dataset);
  // Outputs for host features[rows, input_dim]: [rows, output_dim], row-major.
  StatusOr<std::vector<float>> Predict(const std::vector<float>& features, int64_t rows);

  // One training step on a global batch: what Fit does for each batch. Returns the batch's
  // loss (the mean over its rows); metrics accumulate until ResetMetrics.
  StatusOr<double> TrainStep(const data::Batch& batch);
  // Waits until every replica's device has done the work queued so far, and reports an
  // error any of it met: what timing a loop of one-GPU TrainSteps needs at its end (each
  // returns before its backward ends; set_step_waits_for_device).
  Status WaitForDevices();
  // Applies gradients computed elsewhere (towers, model/towers.h) to every replica's
  // copies, in trainable_variables() order, and advances the optimizer's step: TensorFlow's
  // optimizer.apply_gradients outside a replica context.
  Status ApplyGradients(const std::vector<Tensor>& grads);

  // ---- Custom training loops, inside strategy.Run (TensorFlow's custom training loop).
  // Replica `ctx`'s loss on its shard and the gradients of it, both divided by
  // `global_batch_size` (tf.nn.compute_average_loss): summed over replicas they are the
  // whole batch's mean loss and its gradients. `targets` as the data holds them [rows,
  // target_dim]. Nothing is summed or updated yet.
  StatusOr<ReplicaGradients> ComputeGradients(ReplicaContext& ctx, const Tensor& features,
                                              const Tensor& targets, int64_t global_batch_size);
  // optimizer.apply_gradients in a replica context: sums `gradients` (in place) over every
  // replica of every worker, then updates this replica's copies. Every replica calls it once
  // per step; the step counter advances once.
  Status ApplyGradients(ReplicaContext& ctx, std::vector<Tensor>& gradients);

  // The one forward (and backward) pass on replica `replica`'s copies: features[rows,
  // input_dim] -> outputs, and with `options.targets` the loss, with `options.backward` the
  // gradients. Every other entry point calls it.
  Status ForwardBackward(int replica, const Tensor& features, const PassOptions& options,
                         ReplicaPass* pass) override;
  void ResetMetrics();
  Logs MetricResults() const;

  // Weights and optimizer state in the safetensors format: "layers.{i}.kernel" [in, out],
  // "layers.{i}.bias" [out], "optimizer.<variable>.<slot>", "optimizer.iterations" (I64).
  // Written atomically, by the chief process only.
  Status SaveWeights(const std::string& path) const;
  // Checks every name, shape and dtype and says which is wrong; builds the model from the
  // file's first kernel if it is not built yet. Optimizer state is loaded when present,
  // unless `with_optimizer_state` is false (evaluation and prediction: the file may hold
  // another optimizer's state, which is then ignored).
  Status LoadWeights(const std::string& path, bool with_optimizer_state = true);
  // A backup written during Fit: the weights, optimizer state and the position to pass as
  // FitOptions::resume. Refused, leaving the model as it was, when the backup was written
  // by a run with another `signature`.
  Status SaveBackup(const std::string& path, const FitPosition& position) const;
  StatusOr<FitPosition> RestoreBackup(const std::string& path, const std::string& signature);

  // Regression on normalized targets: the loss compares outputs with (y − mean) / std per
  // target column, and Predict and the metrics undo it (outputs · std + mean, the original
  // units). The loss figures stay in normalized units. Not for classifiers.
  Status SetTargetNormalization(std::vector<float> mean, std::vector<float> std_dev);
  bool normalizes_targets() const { return !target_mean_.empty(); }

  // What SaveWeights and SaveBackup also write, so that the file rebuilds the model
  // (model/model_file.h). Without it a file holds weights only.
  void set_description(ModelDescription description) { description_ = std::move(description); }
  const std::optional<ModelDescription>& description() const { return description_; }

  // Keras's mixed-precision policies (model/precision.h): every Dense layer but the last
  // computes in the policy's 16-bit type; variables, gradients and the all-reduce stay
  // float32. CPU replicas only for now (the 16-bit CUDA kernels are not built): other
  // devices are refused here. Call after Compile; kFloat32 restores the default.
  // mixed_float16 also turns on dynamic loss scaling with Keras's defaults (as Keras's
  // compile wraps the optimizer), the others turn it off.
  Status SetPrecisionPolicy(PrecisionPolicy policy);
  PrecisionPolicy precision_policy() const { return policy_; }

  // Dynamic loss scaling (strategy/step/loss_scale.h) of Fit and TrainStep, with these options;
  // nullopt turns it off. Custom loops (ComputeGradients) scale nothing.
  Status SetLossScaling(const std::optional<LossScaleOptions>& options);
  // The scale and its count of good steps; nullptr when off.
  const DynamicLossScale* loss_scale() const {
    const std::optional<DynamicLossScale>& scale = runner_->settings().loss_scale;
    return scale.has_value() ? &*scale : nullptr;
  }

  // Gradient accumulation: each replica runs its shard of every global batch as
  // `micro_batches` forward/backward passes of about shard / micro_batches rows (sizes
  // differing by at most one, some empty on a small final batch), sums their gradients
  // locally and all-reduces once: one update of the whole batch, with the activations of a
  // micro-batch at a time. The same step as without it, to float rounding (the sum's order
  // differs). In deterministic mode the virtual shards are the micro-batches already: each
  // replica must get at least `micro_batches` of them, and the bits do not change. 1: off.
  Status SetGradientAccumulation(int micro_batches);
  int gradient_accumulation() const { return runner_->settings().micro_batches; }

  // With it on, the first NaN or Inf in a loss or gradient fails the step with the layer,
  // tensor and step named (TensorFlow's check_numerics). Costs a pass over every gradient.
  // With several replicas in sync it first names the replica whose own loss or gradient
  // (before any sum) was the first non-finite one, and which tensor it was. With it on, an
  // overflow stops training even under loss scaling (it is there to find the overflow).
  void set_check_numerics(bool on) { runner_->settings().check_numerics = on; }

  // A training step of one replica on a GPU (one replica in sync, one pass) reads its loss
  // as soon as forward has computed it and returns while its backward and update still run
  // on the device: the host splits, uploads and queues the next step meanwhile, and the card
  // does not wait for it between steps. Everything read back later (variables, predictions,
  // checkpoints) waits for the device as before; an error that a kernel of the step meets
  // on the device is reported by a later call (the next step's loss, or any read), as with
  // any asynchronous GPU work. With this on, every step waits for all its work before it
  // returns, so such an error is reported by the step that queued it (for debugging).
  // Several replicas sum their losses in the last gradient bucket, after backward: they
  // always wait for it; CPU replicas compute synchronously.
  void set_step_waits_for_device(bool on) { runner_->settings().step_waits_for_device = on; }
  bool step_waits_for_device() const { return runner_->settings().step_waits_for_device; }

  // Where several host replicas share their variables, each weight is packed once per step
  // for the products of all of them, the replica threads that multiply at once packing it
  // together, with the bits of packing it for each (ops/cpu/shared_packing.h). On by
  // default; off for comparisons.
  void set_share_weight_packing(bool on) { runner_->settings().share_weight_packing = on; }
  // Whether its steps share packings now: the setting above, and a distribution of several
  // local replicas that share their variables.
  bool SharesWeightPacking() const;

  // The last training step's figures (StepStats). The gradient norm is computed only while
  // set_record_gradient_norm is on (the TensorBoard callback turns it on): it costs a pass
  // over every summed gradient, and where replicas share variables the optimizer then
  // updates them after the all-reduce instead of slice by slice inside it (as under
  // global-norm clipping, whose norm needs every sum first too).
  const StepStats& last_step_stats() const { return step_stats_.value; }
  void set_record_gradient_norm(bool on) { runner_->settings().record_gradient_norm = on; }
  bool record_gradient_norm() const { return runner_->settings().record_gradient_norm; }
  // Whether StepStats::step_seconds and all_reduce_seconds are measured (the TensorBoard
  // callback turns it on): clock reads around the step and each of replica 0's reducer
  // calls, a cost a small step notices (linreg's takes a few microseconds).
  void set_record_step_times(bool on) { runner_->settings().record_step_times = on; }
  bool record_step_times() const { return runner_->settings().record_step_times; }

  // Keras's model.summary(): layers, output shapes, parameter counts.
  std::string Summary() const;

  const std::vector<std::shared_ptr<Layer>>& layers() const { return layers_; }
  const std::vector<Variable*>& trainable_variables() const { return trainable_; }
  // Every variable of the layers, trainable or not (a Normalization's statistics), in
  // creation order; not the optimizer's slots.
  std::vector<Variable*> variables() const;
  Optimizer* optimizer() const { return optimizer_.get(); }
  const Loss* loss() const { return loss_.get(); }
  Distribution* distribution() const { return distribution_; }
  int64_t input_dim() const { return input_dim_; }
  int64_t output_dim() const;
  // Asks Fit to stop after the current step (callbacks use it).
  void StopTraining() { stop_training_ = true; }

 private:
  class Factory;
  Status CheckCompiled() const;
  Status CheckBatch(const data::Batch& batch);
  // Forward (and, when training, backward + all-reduce + update) of a global batch on every
  // replica, by the step runner. Returns the global loss; fills `predictions` ([rows,
  // output_dim], host) for every row when non-null.
  StatusOr<double> RunBatch(const data::Batch& batch, bool training,
                            std::vector<float>* predictions);

  // StepModel (strategy/step/step_model.h): what the step runner calls.
  GradientLayout Gradients() const override;
  StatusOr<Tensor> PrepareTargets(Device* device, const float* targets, int64_t rows,
                                  int64_t target_dim, const int64_t* source_rows) const override;
  Status Update(int replica, int64_t iteration, const std::vector<Tensor>& gradients,
                int updaters) override;
  StatusOr<bool> PrepareSliceUpdates(int64_t iteration) override;
  void UpdateSlice(int replica, size_t gradient, int64_t begin, int64_t end,
                   const float* sum) const override;
  std::string DescribeGradient(size_t gradient) const override;
  void SetWeightsVersion(uint64_t version) override;

  void UpdateMetrics(const data::Batch& batch, const std::vector<float>& predictions);
  Status WriteCheckpoint(const std::string& path,
                         const std::map<std::string, std::string>& metadata) const;
  Status ApplyCheckpoint(const checkpoint::File& file, const std::string& path,
                         bool with_optimizer_state = true);

  std::vector<std::shared_ptr<Layer>> layers_;
  const uint64_t seed_;
  Distribution* distribution_ = nullptr;
  std::unique_ptr<Distribution> owned_distribution_;
  std::unique_ptr<Loss> loss_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::unique_ptr<Metric>> metrics_;
  std::vector<std::unique_ptr<Variable>> variables_;
  std::vector<Variable*> trainable_;
  // Per layer, the index of its first gradient in trainable_ order.
  std::vector<size_t> first_gradient_;
  // Gradient sizes in bytes, in the order backward produces them (Gradients()), and
  // the trainable_ index of each.
  std::vector<int64_t> gradient_bytes_;
  std::vector<size_t> variable_of_gradient_;
  int64_t input_dim_ = -1;
  bool stop_training_ = false;
  // Written by the caller after every step; the replica threads read the fields around it
  // during the next one (layers_, ...): on lines of its own.
  CacheLinePadded<StepStats> step_stats_;
  // The update of the step in progress, for UpdateSlice (PrepareSliceUpdates).
  Optimizer::StepAttrs slice_update_;
  // Runs every step; holds the step settings (accumulation, loss scaling, checks, ...).
  std::unique_ptr<StepRunner> runner_;
  PrecisionPolicy policy_ = PrecisionPolicy::kFloat32;
  std::optional<ModelDescription> description_;
  // SetTargetNormalization's statistics, per target column (empty: off).
  std::vector<float> target_mean_;
  std::vector<float> target_std_;
  // Host targets [rows, target_dim] as the loss sees them (normalized when on).
  std::vector<float> NormalizedTargets(const float* targets, int64_t rows, int64_t target_dim) const;
  // Outputs [rows, output_dim] back to the targets' units, in place (when on).
  void DenormalizeOutputs(float* outputs, int64_t rows) const;
};

}  // namespace tower

#endif  // TOWER_MODEL_SEQUENTIAL_H_
