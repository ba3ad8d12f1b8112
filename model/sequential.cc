#include "model/sequential.h"

#include <cmath>
#include <iostream>
#include <numeric>
#include <sstream>

#include "device/context.h"
#include "model/progress.h"
#include "ops/array_ops.h"

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
    std::vector<Tensor> copies;
    const uint64_t seed = VariableSeed(model_->seed_, name);
    for (int r = 0; r < model_->distribution_->num_local_replicas(); ++r) {
      TOWER_ASSIGN_OR_RETURN(Tensor value, Initialize(initializer, shape, seed,
                                                      model_->distribution_->replica_device(r)));
      copies.push_back(std::move(value));
    }
    model_->variables_.push_back(std::make_unique<Variable>(name, std::move(copies), trainable));
    Variable* variable = model_->variables_.back().get();
    if (trainable) model_->trainable_.push_back(variable);
    return variable;
  }

 private:
  Sequential* model_;
};

Sequential::Sequential(std::vector<std::shared_ptr<Layer>> layers, uint64_t seed)
    : layers_(std::move(layers)), seed_(seed) {}

Sequential::~Sequential() = default;

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
  // Every worker must build the same model, and all copies start from replica 0's (rank
  // 0's) values: identical already when seeds agree, made certain by the broadcast.
  std::string signature = "replicas " + std::to_string(distribution_->num_replicas_in_sync()) +
                          "; gradient buckets of " +
                          std::to_string(distribution_->bucket_bytes()) + " bytes; optimizer " +
                          optimizer_->name() + "; input " + std::to_string(input_dim);
  for (const auto& variable : variables_) {
    signature += "; " + variable->name() + " " + variable->shape().ToString();
  }
  Status consistent = distribution_->CheckConsistent(signature);
  if (!consistent.ok()) {
    variables_.clear();
    trainable_.clear();
    return consistent;
  }
  if (distribution_->num_replicas_in_sync() > 1) {
    TOWER_RETURN_IF_ERROR(distribution_->RunOnReplicas([&](ReplicaContext& ctx) -> Status {
      std::vector<Tensor*> values;
      for (const auto& variable : variables_) values.push_back(&variable->value(ctx.replica_id()));
      return ctx.Broadcast(values);
    }));
  }
  input_dim_ = input_dim;
  return OkStatus();
}

Status Sequential::CheckBatch(const data::Batch& batch) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  if (!built()) TOWER_RETURN_IF_ERROR(Build(batch.feature_dim));
  if (batch.feature_dim != input_dim_) {
    return InvalidArgumentError("the batch has " + std::to_string(batch.feature_dim) +
                                " features per row, the model takes " +
                                std::to_string(input_dim_));
  }
  return loss_->CheckShapes(output_dim(), batch.target_dim);
}

namespace {

// check_numerics: OK, or InvalidArgument naming the first NaN or Inf of `tensor`.
Status CheckFinite(const Tensor& tensor, const std::string& what, const std::string& step) {
  TOWER_ASSIGN_OR_RETURN(std::vector<float> values, tensor.ToHost());
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return InvalidArgumentError("check-numerics: " + step + ": " + what + " has " +
                                  (std::isnan(values[i]) ? "NaN" : "Inf") + " at element " +
                                  std::to_string(i) + " of " + tensor.shape().ToString() +
                                  " (lower the learning rate, or check the data)");
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<double> Sequential::RunBatch(const data::Batch& batch, bool training,
                                      std::vector<float>* predictions) {
  Distribution& dist = *distribution_;
  const int world = dist.num_replicas_in_sync();
  const int64_t global_rows = batch.rows;
  const std::vector<int64_t> sizes = ops::EvenSplitSizes(global_rows, world);
  std::vector<int64_t> offsets(sizes.size() + 1, 0);
  std::partial_sum(sizes.begin(), sizes.end(), offsets.begin() + 1);
  const int64_t in_dim = input_dim_;
  const int64_t out_dim = output_dim();
  if (predictions != nullptr) predictions->assign(static_cast<size_t>(global_rows * out_dim), 0.0f);
  std::vector<double> losses(static_cast<size_t>(dist.num_local_replicas()), 0.0);

  Status status = dist.RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    const int r = ctx.replica_id();
    const int g = ctx.global_replica_id();
    Device* device = ctx.device();
    const int64_t rows = sizes[g];
    const int64_t first = offsets[g];
    TOWER_ASSIGN_OR_RETURN(
        Tensor x, Tensor::FromHostBytes(device, Shape{rows, in_dim}, DType::kFloat32,
                                        batch.features.data() + first * in_dim));
    TOWER_ASSIGN_OR_RETURN(
        Tensor targets,
        loss_->PrepareTargets(device, batch.targets.data() + first * batch.target_dim, rows,
                              batch.target_dim, out_dim,
                              batch.source_rows.empty() ? nullptr
                                                        : batch.source_rows.data() + first));
    std::vector<LayerCache> caches(layers_.size());
    Tensor activation = x;
    for (size_t i = 0; i < layers_.size(); ++i) {
      TOWER_ASSIGN_OR_RETURN(activation, layers_[i]->Forward(r, activation, &caches[i]));
    }
    TOWER_ASSIGN_OR_RETURN(Tensor loss, loss_->Value(activation, targets, global_rows));
    // Backward, last layer first; gradients go to the all-reduce in buckets of about
    // bucket_bytes() as they appear, so a bucket can be summed while earlier layers are
    // still in backward (on paths that reduce asynchronously). The loss rides in the last
    // bucket: one all-reduce also gives every replica the global loss.
    std::vector<std::vector<Tensor>> per_layer(layers_.size());
    std::vector<Tensor*> bucket;
    int64_t bucket_bytes = 0;
    const int64_t cap = dist.bucket_bytes();
    if (training) {
      TOWER_ASSIGN_OR_RETURN(Tensor d, loss_->Gradient(activation, targets, global_rows));
      for (size_t i = layers_.size(); i-- > 0;) {
        TOWER_ASSIGN_OR_RETURN(d, layers_[i]->Backward(r, d, caches[i], i > 0, &per_layer[i]));
        for (Tensor& grad : per_layer[i]) {
          bucket.push_back(&grad);
          bucket_bytes += static_cast<int64_t>(grad.bytes());
        }
        if (bucket_bytes >= cap && i > 0) {
          TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(bucket));
          bucket.clear();
          bucket_bytes = 0;
        }
      }
    }
    bucket.push_back(&loss);
    TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(bucket));
    TOWER_RETURN_IF_ERROR(ctx.FinishReductions());
    if (check_numerics_) {
      // After the all-reduce every replica holds the same sums, so all of them stop at the
      // same step with the same message (none is left waiting in a collective). Checked in
      // the order they were computed: the loss, then the gradients from the last layer back.
      const std::string step = "global step " + std::to_string(optimizer_->iterations() + 1);
      TOWER_RETURN_IF_ERROR(CheckFinite(loss, "the loss", step));
      for (size_t i = layers_.size(); training && i-- > 0;) {
        const std::vector<Variable*> variables = layers_[i]->variables();
        for (size_t k = 0; k < per_layer[i].size(); ++k) {
          const std::string name = k < variables.size() ? variables[k]->name()
                                                        : "layers." + std::to_string(i);
          TOWER_RETURN_IF_ERROR(CheckFinite(per_layer[i][k], "the gradient of " + name +
                                            " (layer " + layers_[i]->Describe() + ")", step));
        }
      }
    }
    if (training) {
      std::vector<Tensor> grads;  // in variable order
      for (auto& layer_grads : per_layer) {
        for (Tensor& grad : layer_grads) grads.push_back(std::move(grad));
      }
      TOWER_RETURN_IF_ERROR(optimizer_->Apply(r, trainable_, grads));
    }
    TOWER_ASSIGN_OR_RETURN(std::vector<float> loss_value, loss.ToHost());
    losses[r] = loss_value[0];
    if (predictions != nullptr && rows > 0) {
      TOWER_RETURN_IF_ERROR(activation.ToHostBytes(predictions->data() + first * out_dim));
    }
    return OkStatus();
  });
  TOWER_RETURN_IF_ERROR(status);
  if (training) optimizer_->set_iterations(optimizer_->iterations() + 1);
  return losses[0];
}

void Sequential::UpdateMetrics(const data::Batch& batch, const std::vector<float>& predictions) {
  // Only this process's rows have predictions (the others are other workers').
  const int world = distribution_->num_replicas_in_sync();
  const std::vector<int64_t> sizes = ops::EvenSplitSizes(batch.rows, world);
  int64_t first = 0;
  for (int g = 0; g < distribution_->first_global_replica(); ++g) first += sizes[g];
  int64_t rows = 0;
  for (int r = 0; r < distribution_->num_local_replicas(); ++r) {
    rows += sizes[distribution_->first_global_replica() + r];
  }
  for (const auto& metric : metrics_) {
    metric->Update(predictions.data() + first * output_dim(),
                   batch.targets.data() + first * batch.target_dim, rows, output_dim(),
                   batch.target_dim);
  }
}

StatusOr<double> Sequential::TrainStep(const data::Batch& batch) {
  TOWER_RETURN_IF_ERROR(CheckBatch(batch));
  for (const auto& metric : metrics_) {
    TOWER_RETURN_IF_ERROR(metric->CheckShapes(output_dim(), batch.target_dim));
  }
  std::vector<float> predictions;
  TOWER_ASSIGN_OR_RETURN(double loss,
                         RunBatch(batch, /*training=*/true,
                                  metrics_.empty() ? nullptr : &predictions));
  if (!metrics_.empty()) UpdateMetrics(batch, predictions);
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
  for (int r = 0; r < distribution_->num_local_replicas(); ++r) {
    TOWER_RETURN_IF_ERROR(optimizer_->Apply(r, trainable_, grads));
  }
  optimizer_->set_iterations(optimizer_->iterations() + 1);
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

StatusOr<History> Sequential::Fit(const data::Dataset& dataset, const FitOptions& options) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  TOWER_RETURN_IF_ERROR(dataset.status());
  if (options.epochs < 1) {
    return InvalidArgumentError("Fit: epochs must be at least 1, got " +
                                std::to_string(options.epochs));
  }
  if (options.steps_per_epoch == 0 || options.max_steps == 0) {
    return InvalidArgumentError("Fit: steps_per_epoch and max_steps must be positive (or -1)");
  }
  if (dataset.num_batches() < 0 && options.steps_per_epoch < 0 && options.max_steps < 0) {
    return InvalidArgumentError("Fit: the dataset is infinite; set steps_per_epoch or "
                                "max_steps");
  }
  if (options.backup_every_steps < 0 ||
      (options.backup_every_steps > 0 && options.backup_path.empty())) {
    return InvalidArgumentError("Fit: backup_every_steps needs a backup_path and must not be "
                                "negative");
  }
  if (options.resume.has_value() && options.resume->metrics.size() != metrics_.size()) {
    return InvalidArgumentError("Fit: the resume position has " +
                                std::to_string(options.resume->metrics.size()) +
                                " metric totals for " + std::to_string(metrics_.size()) +
                                " metrics");
  }
  const bool chief = distribution_->is_chief();
  std::ostream* out = options.out != nullptr ? options.out : &std::cout;
  ProgressBar progress(out, options.out == nullptr && ProgressBar::StdoutIsTerminal(),
                       chief ? options.verbose : 0);
  stop_training_ = false;
  History history;
  for (const auto& callback : options.callbacks) {
    TOWER_RETURN_IF_ERROR(callback->OnTrainBegin(*this));
  }
  const int first_epoch = options.resume ? options.resume->epoch : 0;
  int64_t total_steps = options.resume ? options.resume->total_steps : 0;
  // Where the loop stands after each step, for backups.
  auto position = [&](int epoch, int64_t step, double loss_sum, int64_t rows) {
    FitPosition at;
    at.epoch = epoch;
    at.step_in_epoch = step;
    at.total_steps = total_steps;
    at.loss_sum = loss_sum;
    at.rows = rows;
    for (const auto& metric : metrics_) at.metrics.push_back(metric->totals());
    at.signature = options.signature;
    return at;
  };
  std::optional<FitPosition> last_position;
  for (int epoch = first_epoch; epoch < options.epochs && !stop_training_; ++epoch) {
    for (const auto& callback : options.callbacks) {
      TOWER_RETURN_IF_ERROR(callback->OnEpochBegin(*this, epoch));
    }
    ResetMetrics();
    TOWER_ASSIGN_OR_RETURN(std::unique_ptr<data::Iterator> iterator,
                           dataset.MakeIterator(epoch));
    double loss_sum = 0;
    int64_t rows = 0;
    int64_t step = 0;
    if (options.resume && epoch == first_epoch) {
      // Read past the batches the killed run had trained on: the pipeline is deterministic,
      // so the next batch is the one it would have trained on next.
      while (step < options.resume->step_in_epoch) {
        TOWER_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, iterator->Next());
        if (!batch.has_value()) {
          return FailedPreconditionError(
              "Fit: the data ended after " + std::to_string(step) + " batches of epoch " +
              std::to_string(epoch + 1) + ", before the resume position (step " +
              std::to_string(options.resume->step_in_epoch) + "): was the data changed?");
        }
        if (batch->rows > 0) ++step;
      }
      loss_sum = options.resume->loss_sum;
      rows = options.resume->rows;
      for (size_t m = 0; m < metrics_.size(); ++m) {
        metrics_[m]->set_totals(options.resume->metrics[m]);
      }
    }
    int64_t steps_in_epoch = options.steps_per_epoch > 0 ? options.steps_per_epoch
                                                         : dataset.num_batches();
    if (options.max_steps > 0) {
      const int64_t left = step + options.max_steps - total_steps;
      steps_in_epoch = steps_in_epoch < 0 ? left : std::min(steps_in_epoch, left);
    }
    progress.BeginEpoch(epoch, options.epochs, steps_in_epoch);
    Logs logs;
    if (rows > 0) {
      logs = MetricResults();
      logs["loss"] = loss_sum / rows;
    }
    while (steps_in_epoch < 0 || step < steps_in_epoch) {
      TOWER_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, iterator->Next());
      if (!batch.has_value()) break;
      if (batch->rows == 0) continue;
      StatusOr<double> loss = TrainStep(*batch);
      if (!loss.ok()) {
        return loss.status().WithContext("epoch " + std::to_string(epoch + 1) + ", step " +
                                         std::to_string(step + 1));
      }
      ++step;
      ++total_steps;
      loss_sum += *loss * batch->rows;
      rows += batch->rows;
      logs = MetricResults();
      logs["loss"] = loss_sum / rows;
      progress.Update(step, logs);
      for (const auto& callback : options.callbacks) {
        TOWER_RETURN_IF_ERROR(callback->OnBatchEnd(*this, optimizer_->iterations(), logs));
      }
      if (!options.backup_path.empty()) {
        last_position = position(epoch, step, loss_sum, rows);
        if (options.backup_every_steps > 0 && total_steps % options.backup_every_steps == 0) {
          TOWER_RETURN_IF_ERROR(
              SaveBackup(options.backup_path, *last_position)
                  .WithContext("backup at step " + std::to_string(total_steps)));
        }
      }
      if (stop_training_) break;
    }
    if (step == 0) {
      return InvalidArgumentError("Fit: epoch " + std::to_string(epoch + 1) +
                                  " got no data (is the dataset empty?)");
    }
    if (options.validation != nullptr) {
      TOWER_ASSIGN_OR_RETURN(Logs validation, Evaluate(*options.validation));
      for (const auto& [key, value] : validation) logs["val_" + key] = value;
    }
    progress.EndEpoch(step, logs);
    history.epochs.push_back(logs);
    for (const auto& callback : options.callbacks) {
      TOWER_RETURN_IF_ERROR(callback->OnEpochEnd(*this, epoch, logs));
    }
    if (options.max_steps > 0 && total_steps >= options.max_steps) break;
  }
  // The final position too: resuming a finished run trains no more.
  if (last_position.has_value()) {
    TOWER_RETURN_IF_ERROR(SaveBackup(options.backup_path, *last_position)
                              .WithContext("final backup"));
  }
  for (const auto& callback : options.callbacks) {
    TOWER_RETURN_IF_ERROR(callback->OnTrainEnd(*this, history));
  }
  return history;
}

StatusOr<Logs> Sequential::Evaluate(const data::Dataset& dataset) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  TOWER_RETURN_IF_ERROR(dataset.status());
  if (dataset.num_batches() < 0) {
    return InvalidArgumentError("Evaluate: the dataset is infinite (take a finite part)");
  }
  // Evaluation has its own metric state (Fit has read the training figures already).
  ResetMetrics();
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<data::Iterator> iterator, dataset.MakeIterator(0));
  double loss_sum = 0;
  int64_t rows = 0;
  std::vector<float> predictions;
  while (true) {
    TOWER_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, iterator->Next());
    if (!batch.has_value()) break;
    if (batch->rows == 0) continue;
    TOWER_RETURN_IF_ERROR(CheckBatch(*batch));
    TOWER_ASSIGN_OR_RETURN(double loss, RunBatch(*batch, /*training=*/false,
                                                 metrics_.empty() ? nullptr : &predictions));
    if (!metrics_.empty()) UpdateMetrics(*batch, predictions);
    loss_sum += loss * batch->rows;
    rows += batch->rows;
  }
  if (rows == 0) return InvalidArgumentError("Evaluate: the dataset is empty");
  Logs logs = MetricResults();
  logs["loss"] = loss_sum / rows;
  ResetMetrics();
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
  const int world = distribution_->num_replicas_in_sync();
  const std::vector<int64_t> sizes = ops::EvenSplitSizes(rows, world);
  std::vector<int64_t> offsets(sizes.size() + 1, 0);
  std::partial_sum(sizes.begin(), sizes.end(), offsets.begin() + 1);
  const int64_t out_dim = output_dim();
  std::vector<float> outputs(static_cast<size_t>(rows * out_dim));
  TOWER_RETURN_IF_ERROR(distribution_->RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    const int g = ctx.global_replica_id();
    TOWER_ASSIGN_OR_RETURN(Tensor activation,
                           Tensor::FromHostBytes(ctx.device(), Shape{sizes[g], input_dim_},
                                                 DType::kFloat32,
                                                 features.data() + offsets[g] * input_dim_));
    for (const auto& layer : layers_) {
      TOWER_ASSIGN_OR_RETURN(activation, layer->Forward(ctx.replica_id(), activation, nullptr));
    }
    if (sizes[g] == 0) return OkStatus();
    return activation.ToHostBytes(outputs.data() + offsets[g] * out_dim);
  }));
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
