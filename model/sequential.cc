#include "model/sequential.h"

#include <chrono>
#include <cmath>
#include <sstream>

#include "device/context.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "strategy/step/numerics.h"
#include "util/fiber.h"
#include "util/trace.h"

namespace tower {
namespace {

// FNV-1a of a name, mixed with the model seed: each variable gets its own stream of random
// numbers, independent of creation order and of the device.
uint64_t VariableSeed(uint64_t model_seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  uint64_t z = h ^ (model_seed + 0x9E3779B97F4A7C15ull);  // SplitMix64 finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

class Sequential::Factory : public VariableFactory {
 public:
  explicit Factory(Sequential* model) : model_(model) {}
  StatusOr<Variable*> Create(const std::string& name, const Shape& shape,
                             const Initializer& initializer, bool trainable) override {
    const uint64_t seed = VariableSeed(model_->seed_, name);
    TOWER_ASSIGN_OR_RETURN(
        std::vector<Tensor> copies,
        model_->distribution_->MakeCopies(
            [&](Device* device) { return Initialize(initializer, shape, seed, device); },
            Variable::SharedCopies));
    model_->variables_.push_back(std::make_unique<Variable>(name, std::move(copies), trainable));
    Variable* variable = model_->variables_.back().get();
    if (trainable) model_->trainable_.push_back(variable);
    return variable;
  }

 private:
  Sequential* model_;
};

Sequential::Sequential(std::vector<std::shared_ptr<Layer>> layers, uint64_t seed)
    : layers_(std::move(layers)),
      seed_(seed),
      runner_(std::make_unique<StepRunner>(static_cast<StepModel&>(*this))) {}

Sequential::~Sequential() = default;

Status Sequential::SetTargetNormalization(std::vector<float> mean, std::vector<float> std_dev) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  if (loss_->name() != "mean_squared_error") {
    return InvalidArgumentError("target normalization is for regression (mean squared error), "
                                "not " + loss_->name());
  }
  if (mean.size() != std_dev.size() || mean.empty() ||
      (output_dim() >= 0 && static_cast<int64_t>(mean.size()) != output_dim())) {
    return InvalidArgumentError("target normalization: " + std::to_string(mean.size()) +
                                " means and " + std::to_string(std_dev.size()) +
                                " standard deviations for " + std::to_string(output_dim()) +
                                " outputs");
  }
  for (size_t k = 0; k < mean.size(); ++k) {
    if (!std::isfinite(mean[k]) || !(std_dev[k] > 0) || !std::isfinite(std_dev[k])) {
      return InvalidArgumentError("target normalization: target " + std::to_string(k) +
                                  " has mean " + std::to_string(mean[k]) + " and std " +
                                  std::to_string(std_dev[k]));
    }
  }
  target_mean_ = std::move(mean);
  target_std_ = std::move(std_dev);
  return OkStatus();
}

std::vector<float> Sequential::NormalizedTargets(const float* targets, int64_t rows,
                                                 int64_t target_dim) const {
  std::vector<float> out(targets, targets + rows * target_dim);
  if (target_mean_.empty()) return out;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < target_dim; ++k) {
      float& y = out[r * target_dim + k];
      y = (y - target_mean_[k]) / target_std_[k];
    }
  }
  return out;
}

void Sequential::DenormalizeOutputs(float* outputs, int64_t rows) const {
  if (target_mean_.empty()) return;
  const int64_t width = output_dim();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < width; ++k) {
      float& y = outputs[r * width + k];
      y = y * target_std_[k] + target_mean_[k];
    }
  }
}

std::vector<Variable*> Sequential::variables() const {
  std::vector<Variable*> all;
  for (const auto& variable : variables_) all.push_back(variable.get());
  return all;
}

int64_t Sequential::output_dim() const {
  return layers_.empty() ? -1 : layers_.back()->output_dim();
}

Status Sequential::Compile(std::unique_ptr<Loss> loss, std::unique_ptr<Optimizer> optimizer,
                           const std::vector<std::string>& metrics) {
  if (layers_.empty()) return InvalidArgumentError("Compile: the model has no layers");
  if (loss == nullptr || optimizer == nullptr) {
    return InvalidArgumentError("Compile: needs a loss and an optimizer");
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i] == nullptr) {
      return InvalidArgumentError("Compile: layer " + std::to_string(i) + " is null");
    }
  }
  std::vector<std::unique_ptr<Metric>> parsed;
  for (const std::string& name : metrics) {
    TOWER_ASSIGN_OR_RETURN(std::unique_ptr<Metric> metric, MetricFromName(name));
    parsed.push_back(std::move(metric));
  }
  Distribution* distribution = CurrentDistribution();
  std::unique_ptr<Distribution> owned;
  if (distribution == nullptr) {
    TOWER_ASSIGN_OR_RETURN(Device * device, Context::Default().DefaultDevice());
    owned = std::make_unique<SingleDeviceDistribution>(device);
    distribution = owned.get();
  }
  if (built() && distribution_ != nullptr &&
      distribution->Describe() != distribution_->Describe()) {
    return FailedPreconditionError("Compile: the model's variables were created under " +
                                   distribution_->Describe() + "; compile it under the same "
                                   "strategy, not " + distribution->Describe());
  }
  loss_ = std::move(loss);
  optimizer_ = std::move(optimizer);
  metrics_ = std::move(parsed);
  if (!built()) {
    distribution_ = distribution;
    owned_distribution_ = std::move(owned);
  } else {
    TOWER_RETURN_IF_ERROR(optimizer_->Build(trainable_));
  }
  return OkStatus();
}

Status Sequential::CheckCompiled() const {
  if (loss_ == nullptr) {
    return FailedPreconditionError("the model is not compiled: call Compile(loss, optimizer) "
                                   "first");
  }
  return OkStatus();
}

Status Sequential::Build(int64_t input_dim) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  if (built()) {
    if (input_dim == input_dim_) return OkStatus();
    return InvalidArgumentError("the model was built for " + std::to_string(input_dim_) +
                                " input features, not " + std::to_string(input_dim));
  }
  Factory factory(this);
  int64_t dim = input_dim;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Status status = layers_[i]->Build(dim, static_cast<int>(i), factory);
    if (!status.ok()) {
      variables_.clear();
      trainable_.clear();
      return status;
    }
    dim = layers_[i]->output_dim();
  }
  TOWER_RETURN_IF_ERROR(optimizer_->Build(trainable_));
  // Where each layer's gradients go, and their sizes in backward order.
  first_gradient_.clear();
  gradient_bytes_.clear();
  variable_of_gradient_.clear();
  size_t count = 0;
  for (const auto& layer : layers_) {
    first_gradient_.push_back(count);
    count += layer->variables().size();
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    const std::vector<Variable*> variables = layers_[i]->variables();
    for (size_t k = 0; k < variables.size(); ++k) {
      gradient_bytes_.push_back(variables[k]->shape().num_elements() *
                                static_cast<int64_t>(DTypeSize(variables[k]->dtype())));
      variable_of_gradient_.push_back(first_gradient_[i] + k);
    }
  }
  // Every worker must build the same model, and all copies start from replica 0's (rank
  // 0's) values: identical already when seeds agree, made certain by the broadcast.
  std::string signature = "optimizer " + optimizer_->name() + "; input " +
                          std::to_string(input_dim);
  for (const auto& variable : variables_) {
    signature += "; " + variable->name() + " " + variable->shape().ToString();
  }
  Status consistent = distribution_->CheckConsistent(signature);
  if (!consistent.ok()) {
    variables_.clear();
    trainable_.clear();
    return consistent;
  }
  TOWER_RETURN_IF_ERROR(distribution_->BroadcastCopies([&](int replica) {
    std::vector<Tensor*> values;
    for (const auto& variable : variables_) values.push_back(&variable->value(replica));
    return values;
  }));
  input_dim_ = input_dim;
  return OkStatus();
}

Status Sequential::SetPrecisionPolicy(PrecisionPolicy policy) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  const int r = policy != PrecisionPolicy::kFloat32 ? distribution_->FirstReplicaNotOnCpu() : -1;
  if (r >= 0) {
    return UnimplementedError("precision policy " + std::string(PrecisionPolicyName(policy)) +
                              ": replica " + std::to_string(r) + " is on " +
                              distribution_->replica_device(r)->full_name() +
                              "; mixed precision runs on CPU replicas in this version (the "
                              "16-bit CUDA kernels are not built yet)");
  }
  // Every layer but the last in the compute dtype; the last in float32 (Keras's advice:
  // the loss sees float32 outputs).
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->set_compute_dtype(i + 1 < layers_.size() ? ComputeDType(policy)
                                                         : DType::kFloat32);
  }
  policy_ = policy;
  return SetLossScaling(policy == PrecisionPolicy::kMixedFloat16
                            ? std::optional<LossScaleOptions>(LossScaleOptions())
                            : std::nullopt);
}

Status Sequential::SetLossScaling(const std::optional<LossScaleOptions>& options) {
  if (!options.has_value()) {
    runner_->settings().loss_scale.reset();
    return OkStatus();
  }
  TOWER_ASSIGN_OR_RETURN(DynamicLossScale scale, DynamicLossScale::Create(*options));
  runner_->settings().loss_scale = scale;
  return OkStatus();
}

Status Sequential::SetGradientAccumulation(int micro_batches) {
  if (micro_batches < 1) {
    return InvalidArgumentError("gradient accumulation: " + std::to_string(micro_batches) +
                                " micro-batches per step; give 1 (off) or more");
  }
  runner_->settings().micro_batches = micro_batches;
  return OkStatus();
}

Status Sequential::CheckBatch(const data::Batch& batch) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  TOWER_RETURN_IF_ERROR(runner_->CheckSettings(*distribution_));
  if (!built()) TOWER_RETURN_IF_ERROR(Build(batch.feature_dim));
  if (batch.feature_dim != input_dim_) {
    return InvalidArgumentError("the batch has " + std::to_string(batch.feature_dim) +
                                " features per row, the model takes " +
                                std::to_string(input_dim_));
  }
  return loss_->CheckShapes(output_dim(), batch.target_dim);
}

Status Sequential::ForwardBackward(int replica, const Tensor& features,
                                   const PassOptions& options, ReplicaPass* pass) {
  // This thread's (or replica fiber's) scratch, reused call after call: no allocation once
  // sized. Its tensors are released when the call ends (they hold the pass's activations).
  static FiberLocal<std::vector<LayerCache>> cache_scratch;
  static FiberLocal<std::vector<Tensor>> grad_scratch;
  std::vector<LayerCache>& caches = cache_scratch.Get();
  caches.resize(options.backward ? layers_.size() : 0);
  struct Release {
    std::vector<LayerCache>& caches;
    ~Release() {
      for (LayerCache& cache : caches) cache = LayerCache();
    }
  } release{caches};
  Tensor activation = features;
  for (size_t i = 0; i < layers_.size(); ++i) {
    trace::Span span("forward", trace::Category::kForward, static_cast<int>(i));
    TOWER_ASSIGN_OR_RETURN(activation, layers_[i]->Forward(replica, activation,
                                                            options.backward ? &caches[i] : nullptr));
  }
  pass->outputs = activation;
  if (options.targets == nullptr) return OkStatus();
  TOWER_ASSIGN_OR_RETURN(pass->loss, loss_->Value(activation, *options.targets, options.loss_rows));
  if (options.start_loss_read) {
    TOWER_RETURN_IF_ERROR(CheckLossIsOneFloat(pass->loss));
    TOWER_RETURN_IF_ERROR(pass->loss.device()->stream().StartRead(pass->loss.raw_data(),
                                                                  sizeof(float)));
  }
  if (!options.backward) return OkStatus();
  // Backward, last layer first; each gradient goes to the sink as soon as it exists (the
  // step runner may start summing it while earlier layers are still in backward).
  pass->gradients.assign(trainable_.size(), Tensor());
  TOWER_ASSIGN_OR_RETURN(Tensor d, loss_->Gradient(activation, *options.targets, options.loss_rows));
  if (options.loss_scale != 1) {
    TOWER_ASSIGN_OR_RETURN(d, ops::Scale(d, options.loss_scale));
  }
  std::vector<Tensor>& layer_grads = grad_scratch.Get();
  int backward_index = 0;  // gradients produced so far
  for (size_t i = layers_.size(); i-- > 0;) {
    layer_grads.clear();
    {
      trace::Span span("backward", trace::Category::kBackward, static_cast<int>(i));
      // Where the sink has sums to add into, the layer adds its gradients there.
      const size_t end = i + 1 < layers_.size() ? first_gradient_[i + 1] : trainable_.size();
      Span<Tensor* const> sums;
      if (options.sink != nullptr && end > first_gradient_[i]) {
        TOWER_ASSIGN_OR_RETURN(sums, options.sink->AddInto(static_cast<size_t>(backward_index),
                                                           end - first_gradient_[i]));
      }
      if (sums.empty()) {
        TOWER_ASSIGN_OR_RETURN(d, layers_[i]->Backward(replica, d, caches[i], i > 0, &layer_grads));
      } else {
        TOWER_ASSIGN_OR_RETURN(
            d, layers_[i]->BackwardAddingInto(replica, d, caches[i], i > 0, sums, &layer_grads));
      }
    }
    for (size_t k = 0; k < layer_grads.size(); ++k) {
      Tensor& slot = pass->gradients[first_gradient_[i] + k];
      slot = std::move(layer_grads[k]);
      ++backward_index;
      if (options.sink != nullptr) TOWER_RETURN_IF_ERROR(options.sink->Take(&slot));
    }
  }
  return OkStatus();
}

GradientLayout Sequential::Gradients() const {
  return GradientLayout{gradient_bytes_, variable_of_gradient_};
}

StatusOr<Tensor> Sequential::PrepareTargets(Device* device, const float* targets, int64_t rows,
                                            int64_t target_dim,
                                            const int64_t* source_rows) const {
  std::vector<float> normalized;
  if (normalizes_targets()) {
    normalized = NormalizedTargets(targets, rows, target_dim);
    targets = normalized.data();
  }
  return loss_->PrepareTargets(device, targets, rows, target_dim, output_dim(), source_rows);
}

Status Sequential::Update(int replica, int64_t iteration, const std::vector<Tensor>& gradients,
                          int updaters) {
  return optimizer_->Apply(replica, iteration, trainable_, gradients, updaters);
}

StatusOr<bool> Sequential::PrepareSliceUpdates(int64_t iteration) {
  if (!optimizer_->CanUpdateSlicesOfSums()) return false;
  TOWER_ASSIGN_OR_RETURN(slice_update_, optimizer_->AttrsOf(iteration));
  return true;
}

void Sequential::UpdateSlice(int replica, size_t gradient, int64_t begin, int64_t end,
                             const float* sum) const {
  optimizer_->UpdateSummedSlice(replica, slice_update_, variable_of_gradient_[gradient], begin,
                                end, sum);
}

std::string Sequential::DescribeGradient(size_t gradient) const {
  size_t backward_index = 0;
  for (size_t i = layers_.size(); i-- > 0;) {
    const std::vector<Variable*> variables = layers_[i]->variables();
    for (size_t k = 0; k < variables.size(); ++k) {
      if (backward_index++ == gradient) {
        return "the gradient of " + variables[k]->name() + " (layer " + layers_[i]->Describe() +
               ")";
      }
    }
  }
  return "gradient " + std::to_string(gradient);
}

void Sequential::SetWeightsVersion(uint64_t version) {
  for (const auto& layer : layers_) layer->set_weights_version(version);
}

bool Sequential::SharesWeightPacking() const {
  return distribution_ != nullptr && runner_->SharesWeightPacking(*distribution_);
}

StatusOr<double> Sequential::RunBatch(const data::Batch& batch, bool training,
                                      std::vector<float>* predictions) {
  StepRequest request;
  request.batch = &batch;
  request.training = training;
  request.predictions = predictions;
  request.in_dim = input_dim_;
  request.out_dim = output_dim();
  // Every replica reads the step number before the all-reduce, which nobody passes before
  // all have read it.
  request.iteration = optimizer_->iterations();
  TOWER_ASSIGN_OR_RETURN(const StepResult result, runner_->Run(*distribution_, request));
  if (training) {
    StepStats& stats = step_stats_.value;
    stats.iteration = request.iteration;
    stats.learning_rate = optimizer_->learning_rate(request.iteration);
    stats.all_reduce_seconds = result.all_reduce_seconds;
    stats.loss_scale = result.loss_scale;
    stats.skipped = !result.applied;
    stats.gradient_global_norm = result.gradient_norm;
    // A step that loss scaling skipped is not an update: the counter (and the schedule) stay.
    if (result.applied) optimizer_->set_iterations(request.iteration + 1);
  }
  if (predictions != nullptr) DenormalizeOutputs(predictions->data(), batch.rows);
  return result.loss;
}

void Sequential::UpdateMetrics(const data::Batch& batch, const std::vector<float>& predictions) {
  // RunBatch filled every row's prediction (across workers it gathers them), so every
  // worker's metrics cover the whole batch.
  const RowRange rows{0, batch.rows};
  for (const auto& metric : metrics_) {
    metric->Update(predictions.data() + rows.first * output_dim(),
                   batch.targets.data() + rows.first * batch.target_dim, rows.count,
                   output_dim(), batch.target_dim);
  }
}

Status Sequential::WaitForDevices() {
  if (distribution_ == nullptr) return OkStatus();
  return distribution_->SynchronizeDevices();
}

StatusOr<double> Sequential::TrainStep(const data::Batch& batch) {
  // Read only when asked (set_record_step_times): a clock read is a visible share of a
  // small step.
  const auto start = record_step_times() ? std::chrono::steady_clock::now()
                                        : std::chrono::steady_clock::time_point();
  TOWER_RETURN_IF_ERROR(CheckBatch(batch));
  for (const auto& metric : metrics_) {
    TOWER_RETURN_IF_ERROR(metric->CheckShapes(output_dim(), batch.target_dim));
  }
  std::vector<float> predictions;
  TOWER_ASSIGN_OR_RETURN(double loss,
                         RunBatch(batch, /*training=*/true,
                                  metrics_.empty() ? nullptr : &predictions));
  if (!metrics_.empty()) UpdateMetrics(batch, predictions);
  step_stats_.value.step_seconds =
      record_step_times()
          ? std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
          : 0.0;
  return loss;
}

Status Sequential::ApplyGradients(const std::vector<Tensor>& grads) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  if (!built()) return FailedPreconditionError("ApplyGradients: the model is not built");
  if (grads.size() != trainable_.size()) {
    return InvalidArgumentError("ApplyGradients: " + std::to_string(grads.size()) +
                                " gradients for " + std::to_string(trainable_.size()) +
                                " trainable variables");
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].valid() || grads[i].shape() != trainable_[i]->shape()) {
      return ShapeError("ApplyGradients", "gradient " + std::to_string(i) + " of " +
                                              trainable_[i]->name() + " has the wrong shape:",
                        grads[i].valid() ? grads[i].shape() : Shape{}, trainable_[i]->shape());
    }
  }
  TOWER_RETURN_IF_ERROR(
      runner_->UpdateEveryReplica(*distribution_, optimizer_->iterations(), grads));
  optimizer_->set_iterations(optimizer_->iterations() + 1);
  return OkStatus();
}

StatusOr<ReplicaGradients> Sequential::ComputeGradients(ReplicaContext& ctx,
                                                        const Tensor& features,
                                                        const Tensor& targets,
                                                        int64_t global_batch_size) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  if (!built()) TOWER_RETURN_IF_ERROR(Build(features.shape().dim(1)));
  if (features.shape().rank() != 2 || features.shape().dim(1) != input_dim_ ||
      targets.shape().rank() != 2 || targets.shape().dim(0) != features.shape().dim(0)) {
    return InvalidArgumentError("ComputeGradients: features " + features.shape().ToString() +
                                " and targets " + targets.shape().ToString() +
                                " are not [rows, " + std::to_string(input_dim_) +
                                "] and [rows, targets]");
  }
  if (global_batch_size < features.shape().dim(0)) {
    return InvalidArgumentError("ComputeGradients: the global batch (" +
                                std::to_string(global_batch_size) + " rows) is smaller than " +
                                "this replica's shard (" +
                                std::to_string(features.shape().dim(0)) + ")");
  }
  TOWER_RETURN_IF_ERROR(loss_->CheckShapes(output_dim(), targets.shape().dim(1)));
  // The loss checks and converts targets on the host (class ids).
  TOWER_ASSIGN_OR_RETURN(std::vector<float> host_targets, targets.ToHost());
  TOWER_ASSIGN_OR_RETURN(Tensor prepared,
                         PrepareTargets(ctx.device(), host_targets.data(), targets.shape().dim(0),
                                        targets.shape().dim(1), nullptr));
  PassOptions options;
  options.targets = &prepared;
  options.loss_rows = global_batch_size;
  options.backward = true;
  ReplicaPass pass;
  TOWER_RETURN_IF_ERROR(ForwardBackward(ctx.replica_id(), features, options, &pass));
  return ReplicaGradients{std::move(pass.loss), std::move(pass.gradients)};
}

Status Sequential::ApplyGradients(ReplicaContext& ctx, std::vector<Tensor>& gradients) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  if (!built()) return FailedPreconditionError("ApplyGradients: the model is not built");
  if (gradients.size() != trainable_.size()) {
    return InvalidArgumentError("ApplyGradients: " + std::to_string(gradients.size()) +
                                " gradients for " + std::to_string(trainable_.size()) +
                                " trainable variables");
  }
  // Every gradient's shape, in backward order, before any is summed.
  for (const size_t v : variable_of_gradient_) {
    const Tensor& gradient = gradients[v];
    if (!gradient.valid() || gradient.shape() != trainable_[v]->shape()) {
      return ShapeError("ApplyGradients",
                        "gradient of " + trainable_[v]->name() + " has the wrong shape:",
                        gradient.valid() ? gradient.shape() : Shape{}, trainable_[v]->shape());
    }
  }
  // Read before the sums, advanced after them by replica 0: every replica applies the same
  // step (the strategy's run ends only when all have).
  const int64_t iteration = optimizer_->iterations();
  TOWER_RETURN_IF_ERROR(runner_->SumAndUpdate(*distribution_, ctx, iteration, gradients));
  if (ctx.replica_id() == 0) optimizer_->set_iterations(iteration + 1);
  return OkStatus();
}

void Sequential::ResetMetrics() {
  for (const auto& metric : metrics_) metric->Reset();
}

Logs Sequential::MetricResults() const {
  Logs logs;
  for (const auto& metric : metrics_) logs[metric->name()] = metric->Result();
  return logs;
}

StatusOr<std::vector<float>> Sequential::Predict(const std::vector<float>& features,
                                                 int64_t rows) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  if (!built()) {
    return FailedPreconditionError("Predict: the model is not built (train it, load weights "
                                   "or call Build first)");
  }
  if (rows < 0 || static_cast<int64_t>(features.size()) != rows * input_dim_) {
    return InvalidArgumentError("Predict: " + std::to_string(features.size()) +
                                " values are not " + std::to_string(rows) + " rows of " +
                                std::to_string(input_dim_) + " features");
  }
  TOWER_ASSIGN_OR_RETURN(
      std::vector<float> outputs,
      runner_->Predict(*distribution_, features, rows, input_dim_, output_dim()));
  DenormalizeOutputs(outputs.data(), rows);
  return outputs;
}

std::string Sequential::Summary() const {
  std::ostringstream out;
  out << "Model: \"sequential\"\n";
  out << "Layer (type)                  Output Shape             Param #\n";
  int64_t total = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    int64_t params = 0;
    for (const Variable* variable : layers_[i]->variables()) {
      params += variable->shape().num_elements();
    }
    total += params;
    std::string name = "layers." + std::to_string(i) + " (" + layers_[i]->Describe() + ")";
    std::string shape = "(None, " + std::to_string(layers_[i]->output_dim()) + ")";
    name.resize(std::max<size_t>(name.size() + 1, 30), ' ');
    shape.resize(std::max<size_t>(shape.size() + 1, 25), ' ');
    out << name << shape << (built() ? std::to_string(params) : "unbuilt") << "\n";
  }
  out << "Total params: " << total << "\n";
  out << "Replicas: " << (distribution_ != nullptr ? distribution_->Describe() : "not compiled")
      << "\n";
  return out.str();
}

}  // namespace tower
