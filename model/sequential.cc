#include "model/sequential.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <sstream>

#include "device/context.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "strategy/step/numerics.h"
#include "util/fiber.h"
#include "util/flight_recorder.h"
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
    std::vector<Tensor> copies;
    const uint64_t seed = VariableSeed(model_->seed_, name);
    const Distribution& dist = *model_->distribution_;
    // Shared: one copy, on replica 0's device.
    const bool shared = dist.ReplicasShareVariables();
    for (int r = 0; r < (shared ? 1 : dist.num_local_replicas()); ++r) {
      TOWER_ASSIGN_OR_RETURN(Tensor value,
                             Initialize(initializer, shape, seed, dist.replica_device(r)));
      copies.push_back(std::move(value));
    }
    if (shared) copies = Variable::SharedCopies(copies.front(), dist.num_local_replicas());
    model_->variables_.push_back(std::make_unique<Variable>(name, std::move(copies), trainable));
    Variable* variable = model_->variables_.back().get();
    if (trainable) model_->trainable_.push_back(variable);
    return variable;
  }

 private:
  Sequential* model_;
};

// What every replica of a step reads, and what replica 0 finds, kept with the model from
// step to step. The replicas' std::function is built once: made on the caller's stack
// for every step, it was written there every step, and a replica on another core fetched
// that line before it could fetch the step's state (two dependent transfers between cores
// before a replica could start; now one).
struct Sequential::ReplicaStep {
  // The function holds both pointers inline (no allocation), and reads nothing of the
  // model's own lines to find the step.
  explicit ReplicaStep(Sequential* model)
      : fn([model, this](ReplicaContext& ctx) { return model->RunReplicaStep(ctx, *this); }) {}

  alignas(kCacheLineBytes) const std::function<Status(ReplicaContext&)> fn;
  // Written by the caller before each run; read-only while the replicas run.
  struct alignas(kCacheLineBytes) State {
    Distribution* dist = nullptr;
    const data::Batch* batch = nullptr;
    std::vector<float>* predictions = nullptr;
    int64_t in_dim = 0, out_dim = 0, iteration = 0;
    bool training = false;
    bool gather = false;
    bool update_in_reduce = false;
    bool record_norm = false;
    bool batched = false;          // run once per batch of replicas (RunOnReplicaBatches)
    float loss_scale = 0;          // 0: off
    Optimizer::StepAttrs update;  // when update_in_reduce
  } state;
  // What replica 0 finds during the step, on lines of their own: the other replicas read
  // `state` while replica 0 writes these.
  struct alignas(kCacheLineBytes) Results {
    double loss = 0;     // after the all-reduce every replica holds the same
    bool finite = true;  // under loss scaling: every summed gradient was finite
    // StepStats: seconds in its reducer, ‖sums‖₂ (when record_norm).
    double all_reduce_seconds = 0;
    double gradient_norm = std::numeric_limits<double>::quiet_NaN();
  } results;
};

Sequential::Sequential(std::vector<std::shared_ptr<Layer>> layers, uint64_t seed)
    : layers_(std::move(layers)),
      seed_(seed),
      replica_step_(std::make_unique<ReplicaStep>(this)) {}

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
  if (distribution_->num_replicas_in_sync() > 1 && !distribution_->ReplicasShareVariables()) {
    TOWER_RETURN_IF_ERROR(distribution_->RunOnReplicas([&](ReplicaContext& ctx) -> Status {
      std::vector<Tensor*> values;
      for (const auto& variable : variables_) values.push_back(&variable->value(ctx.replica_id()));
      return ctx.Broadcast(values);
    }));
  }
  input_dim_ = input_dim;
  return OkStatus();
}

Status Sequential::SetPrecisionPolicy(PrecisionPolicy policy) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  if (policy != PrecisionPolicy::kFloat32) {
    for (int r = 0; r < distribution_->num_local_replicas(); ++r) {
      Device* device = distribution_->replica_device(r);
      if (!device->is_cpu()) {
        return UnimplementedError(
            "precision policy " + std::string(PrecisionPolicyName(policy)) + ": replica " +
            std::to_string(r) + " is on " + device->full_name() +
            "; mixed precision runs on CPU replicas in this version (the 16-bit CUDA "
            "kernels are not built yet)");
      }
    }
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
    loss_scale_.reset();
    return OkStatus();
  }
  TOWER_ASSIGN_OR_RETURN(DynamicLossScale scale, DynamicLossScale::Create(*options));
  loss_scale_ = scale;
  return OkStatus();
}

Status Sequential::SetGradientAccumulation(int micro_batches) {
  if (micro_batches < 1) {
    return InvalidArgumentError("gradient accumulation: " + std::to_string(micro_batches) +
                                " micro-batches per step; give 1 (off) or more");
  }
  micro_batches_ = micro_batches;
  return OkStatus();
}

Status Sequential::CheckBatch(const data::Batch& batch) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  const int shards = distribution_->virtual_shards();
  const int replicas = distribution_->num_replicas_in_sync();
  if (micro_batches_ > 1 && shards > 0 && shards / replicas < micro_batches_) {
    return InvalidArgumentError(
        "gradient accumulation of " + std::to_string(micro_batches_) + " micro-batches in "
        "deterministic mode: the virtual shards are the micro-batches, and " +
        std::to_string(shards) + " virtual shards over " + std::to_string(replicas) +
        " replicas give some replica only " + std::to_string(shards / replicas) +
        "; use at least " + std::to_string(micro_batches_ * replicas) + " virtual shards");
  }
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
  TOWER_ASSIGN_OR_RETURN(std::optional<NonFinite> found, FirstNonFinite(tensor));
  if (!found.has_value()) return OkStatus();
  return InvalidArgumentError("check-numerics: " + step + ": " + what + " has " +
                              (found->nan ? "NaN" : "Inf") + " at element " +
                              std::to_string(found->index) + " of " +
                              tensor.shape().ToString() +
                              " (lower the learning rate, or check the data)");
}

// A non-finite tensor's code for check-numerics across replicas: 2 · (which + 1), + 1 for
// NaN (0: every value finite). Small integers: exact in the float32 all-reduce.
StatusOr<int> NonFiniteCode(const Tensor& tensor, int which) {
  TOWER_ASSIGN_OR_RETURN(std::optional<NonFinite> found, FirstNonFinite(tensor));
  if (!found.has_value()) return 0;
  return 2 * (which + 1) + (found->nan ? 1 : 0);
}

Status CheckLossIsOneFloat(const Tensor& loss) {
  if (loss.num_elements() != 1 || loss.dtype() != DType::kFloat32) {
    return InternalError("the loss is not one float32 value: " + loss.shape().ToString());
  }
  return OkStatus();
}

}  // namespace

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
  int* const first_nonfinite = options.first_nonfinite;
  if (first_nonfinite != nullptr && *first_nonfinite == 0) {
    TOWER_ASSIGN_OR_RETURN(*first_nonfinite, NonFiniteCode(pass->loss, 0));
  }
  if (!options.backward) return OkStatus();
  // Backward, last layer first; each gradient goes to the reducer as soon as it exists, so
  // a full bucket can be summed while earlier layers are still in backward.
  pass->gradients.assign(trainable_.size(), Tensor());
  if (options.reducer != nullptr) {
    TOWER_RETURN_IF_ERROR(options.reducer->Begin(gradient_bytes_, options.pass, options.passes));
  }
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
      // A replica that folds its gradients into its group's adds them where the sums are.
      const size_t end = i + 1 < layers_.size() ? first_gradient_[i + 1] : trainable_.size();
      Span<Tensor* const> sums;
      if (options.reducer != nullptr && end > first_gradient_[i]) {
        TOWER_ASSIGN_OR_RETURN(sums, options.reducer->RunningSums(static_cast<size_t>(backward_index),
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
      // This replica's own value, before the reducer sums it in place.
      ++backward_index;
      if (first_nonfinite != nullptr && *first_nonfinite == 0) {
        TOWER_ASSIGN_OR_RETURN(*first_nonfinite, NonFiniteCode(slot, backward_index));
      }
      if (options.reducer != nullptr) TOWER_RETURN_IF_ERROR(options.reducer->Add(&slot));
    }
  }
  return OkStatus();
}

std::string Sequential::DescribeNonFinite(int which) const {
  if (which == 0) return "the loss";
  int backward_index = 0;
  for (size_t i = layers_.size(); i-- > 0;) {
    const std::vector<Variable*> variables = layers_[i]->variables();
    for (size_t k = 0; k < variables.size(); ++k) {
      if (++backward_index == which) {
        return "the gradient of " + variables[k]->name() + " (layer " + layers_[i]->Describe() +
               ")";
      }
    }
  }
  return "tensor " + std::to_string(which);
}

Status Sequential::CheckReplicasNumerics(ReplicaContext& ctx, int code) const {
  const int replicas = ctx.num_replicas_in_sync();
  std::vector<float> codes(static_cast<size_t>(replicas), 0.0f);
  codes[ctx.global_replica_id()] = static_cast<float>(code);
  TOWER_ASSIGN_OR_RETURN(Tensor all, Tensor::FromHost(ctx.device(), Shape{replicas}, codes));
  Tensor* exchanged[] = {&all};
  TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(exchanged));
  TOWER_RETURN_IF_ERROR(ctx.FinishReductions());
  TOWER_ASSIGN_OR_RETURN(codes, all.ToHost());
  for (int g = 0; g < replicas; ++g) {
    const int found = static_cast<int>(codes[g]);
    if (found == 0) continue;
    return InvalidArgumentError(
        "check-numerics: global step " + std::to_string(optimizer_->iterations() + 1) +
        ": replica " + std::to_string(g) + " of " + std::to_string(replicas) + " was first: " +
        DescribeNonFinite(found / 2 - 1) + " has " + (found % 2 == 1 ? "NaN" : "Inf") +
        " in its own values, before the all-reduce (lower the learning rate, or check the "
        "data of that replica's rows)");
  }
  return OkStatus();
}

Status Sequential::CheckNumerics(const ReplicaPass& pass, bool training) const {
  // After the all-reduce every replica holds the same sums, so all of them stop at the
  // same step with the same message (none is left waiting in a collective). Checked in
  // the order they were computed: the loss, then the gradients from the last layer back.
  const std::string step = "global step " + std::to_string(optimizer_->iterations() + 1);
  TOWER_RETURN_IF_ERROR(CheckFinite(pass.loss, "the loss", step));
  for (size_t i = layers_.size(); training && i-- > 0;) {
    const std::vector<Variable*> variables = layers_[i]->variables();
    for (size_t k = 0; k < variables.size(); ++k) {
      TOWER_RETURN_IF_ERROR(CheckFinite(pass.gradients[first_gradient_[i] + k],
                                        "the gradient of " + variables[k]->name() + " (layer " +
                                            layers_[i]->Describe() + ")",
                                        step));
    }
  }
  return OkStatus();
}

namespace {

// The whole batch's outputs [global_rows, out_dim] on every replica of every worker, once
// summed over replicas: each replica's own rows, zeros elsewhere (x + 0 is exact).
StatusOr<Tensor> OwnRowsOfAll(Device* device, const Tensor& outputs, RowRange mine,
                              int64_t global_rows, int64_t out_dim) {
  std::vector<float> all(static_cast<size_t>(global_rows * out_dim), 0.0f);
  if (mine.count > 0) TOWER_RETURN_IF_ERROR(outputs.ToHostBytes(all.data() + mine.first * out_dim));
  return Tensor::FromHost(device, Shape{global_rows, out_dim}, all);
}

// A number no step of any model in this process had before (Layer::set_weights_version).
uint64_t NextWeightsVersion() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

// Forwards every call to a replica's reducer and, when `seconds` is set, adds the wall time
// spent inside Add and Finish to it (StepStats::all_reduce_seconds). Lives on the stack.
class TimedReducer final : public GradientReducer {
 public:
  TimedReducer(GradientReducer& reducer, double* seconds) : reducer_(reducer), seconds_(seconds) {}
  Status Begin(Span<const int64_t> gradient_bytes, int pass, int passes) override {
    return reducer_.Begin(gradient_bytes, pass, passes);
  }
  Status Add(Tensor* gradient) override {
    if (seconds_ == nullptr) return reducer_.Add(gradient);
    const auto start = std::chrono::steady_clock::now();
    Status status = reducer_.Add(gradient);
    *seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return status;
  }
  Status Finish(Span<Tensor* const> extra) override {
    if (seconds_ == nullptr) return reducer_.Finish(extra);
    const auto start = std::chrono::steady_clock::now();
    Status status = reducer_.Finish(extra);
    *seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return status;
  }
  bool HandOverSums(SummedGradientSink* sink) override { return reducer_.HandOverSums(sink); }
  StatusOr<Span<Tensor* const>> RunningSums(size_t first, size_t count) override {
    return reducer_.RunningSums(first, count);
  }

 private:
  GradientReducer& reducer_;
  double* seconds_;
};

// Host scratch of a replica's thread (its fiber) for a pass over several shards: no
// allocation once sized.
struct RowsScratch {
  std::vector<float> features, targets, outputs;
  std::vector<int64_t> source_rows;
};

int64_t TotalRows(Span<const RowRange> ranges) {
  int64_t rows = 0;
  for (const RowRange& range : ranges) rows += range.count;
  return rows;
}

// Rows `ranges` of a row-major [rows, width] host matrix `data`, one after the other: a
// pointer into `data` for one range, else their copy in `*scratch`.
template <typename T>
const T* Rows(const T* data, int64_t width, Span<const RowRange> ranges,
              std::vector<T>* scratch) {
  if (ranges.size() == 1) return data + ranges[0].first * width;
  scratch->resize(static_cast<size_t>(TotalRows(ranges) * width));
  T* to = scratch->data();
  for (const RowRange& range : ranges) {
    std::copy(data + range.first * width, data + range.end() * width, to);
    to += range.count * width;
  }
  return scratch->data();
}

// The inverse for a pass's outputs [rows of `ranges` in order, width]: each range's rows
// to its place in `to` ([global rows, width], host).
Status ScatterRows(const Tensor& outputs, int64_t width, Span<const RowRange> ranges, float* to,
                   std::vector<float>* scratch) {
  if (ranges.size() == 1) return outputs.ToHostBytes(to + ranges[0].first * width);
  scratch->resize(static_cast<size_t>(TotalRows(ranges) * width));
  TOWER_RETURN_IF_ERROR(outputs.ToHostBytes(scratch->data()));
  const float* from = scratch->data();
  for (const RowRange& range : ranges) {
    std::copy(from, from + range.count * width, to + range.first * width);
    from += range.count * width;
  }
  return OkStatus();
}

}  // namespace

Status Sequential::RunReplicaStep(ReplicaContext& ctx, ReplicaStep& replica_step) {
  const ReplicaStep::State& step = replica_step.state;
  ReplicaStep::Results& results = replica_step.results;
  Distribution& dist = *step.dist;
  const data::Batch& batch = *step.batch;
  const bool training = step.training;
  std::vector<float>* const predictions = step.predictions;
  const bool gather = step.gather;
  const int64_t in_dim = step.in_dim;
  const int64_t out_dim = step.out_dim;
  const int64_t iteration = step.iteration;
  const int r = ctx.replica_id();
  // Who updates the shared variables, each a slice (Optimizer::Apply): every replica, or in
  // a batched step every batch.
  const int updaters = step.batched ? dist.batched_groups() : 0;
  Device* device = ctx.device();
  trace::Span step_span(training ? "step" : "evaluation step", trace::Category::kStep,
                        static_cast<int>(iteration + 1));
  // One pass over the replica's shard, or one per virtual shard (deterministic mode); the
  // reducer keeps each pass's gradients and loss and sums them all after the last.
  // Scratch of this replica's thread (its fiber, where replicas share a thread), reused
  // step after step: no allocation once sized. Emptied below before the next step.
  static FiberLocal<std::vector<RowRange>> pass_rows;
  static FiberLocal<ReplicaPass> replica_pass;
  std::vector<RowRange>& passes = pass_rows.Get();
  dist.PassRows(batch.rows, ctx.global_replica_id(), micro_batches_, &passes);
  // Replica 0 of a training step times its reducer calls when asked
  // (StepStats::all_reduce_seconds).
  TimedReducer reducer(ctx.gradient_reducer(), training && r == 0 && record_step_times_
                                                    ? &results.all_reduce_seconds
                                                    : nullptr);
  ReplicaPass& pass = replica_pass.Get();
  // Nothing of this step outlives it (the next step's peak memory must not hold these).
  struct Release {
    ReplicaPass& pass;
    ~Release() {
      pass.outputs = Tensor();
      pass.loss = Tensor();
      for (Tensor& gradient : pass.gradients) gradient = Tensor();
    }
  } release{pass};
  // The optimizer takes the summed gradients from the reducer, if it hands them over.
  // (The reducer calls the sink of the replica that sums: this one.)
  struct UpdateFromSums : SummedGradientSink {
    int replica;
    const Optimizer& optimizer;
    const Optimizer::StepAttrs& update;
    const std::vector<size_t>& variable_of_gradient;
    UpdateFromSums(int replica, const Optimizer& optimizer, const Optimizer::StepAttrs& update,
                   const std::vector<size_t>& variable_of_gradient)
        : replica(replica),
          optimizer(optimizer),
          update(update),
          variable_of_gradient(variable_of_gradient) {}
    void Consume(size_t gradient, int64_t begin, int64_t end, const float* sum) override {
      optimizer.UpdateSummedSlice(replica, update, variable_of_gradient[gradient], begin, end,
                                  sum);
    }
  } update_from_sums(r, *optimizer_, step.update, variable_of_gradient_);
  struct HandOver {
    GradientReducer& reducer;
    bool on;
    ~HandOver() {
      if (on) reducer.HandOverSums(nullptr);
    }
  } hand_over{reducer, step.update_in_reduce && reducer.HandOverSums(&update_from_sums)};
  Tensor all_outputs;
  Tensor* extras[] = {&pass.loss, &all_outputs};  // no allocation per step
  // check-numerics with several replicas: each notes its own first non-finite tensor.
  const bool check_across_replicas = check_numerics_ && dist.num_replicas_in_sync() > 1;
  int first_nonfinite = 0;
  const Span<Tensor* const> extra(extras, gather ? 2 : 1);
  // One replica on a GPU: its loss is final once forward has computed it (no other
  // replica's to add), so it is read then, and the step need not wait for backward and the
  // update (set_step_waits_for_device). A trace keeps the wait: its step spans then cover
  // the step's device work.
  const bool read_loss_early = training && !step_waits_for_device_ && passes.size() == 1 &&
                               dist.num_replicas_in_sync() == 1 &&
                               !device->stream().host_addressable() && !trace::Recording();
  // A batched step (Distribution::RunOnReplicaBatches) runs one pass over the shards of
  // every replica of the batch.
  static FiberLocal<std::vector<RowRange>> computed_shards;
  std::vector<RowRange>& shards = computed_shards.Get();
  if (step.batched) dist.BatchShards(batch.rows, r, &shards);
  static FiberLocal<RowsScratch> rows_scratch;
  RowsScratch& scratch = rows_scratch.Get();
  for (size_t p = 0; p < passes.size(); ++p) {
    const Span<const RowRange> ranges =
        step.batched ? Span<const RowRange>(shards) : Span<const RowRange>(&passes[p], 1);
    const RowRange rows = ranges.size() == 1 ? ranges[0] : RowRange{0, TotalRows(ranges)};
    TOWER_ASSIGN_OR_RETURN(
        Tensor x, Tensor::FromHostBytes(device, Shape{rows.count, in_dim}, DType::kFloat32,
                                        Rows(batch.features.data(), in_dim, ranges,
                                             &scratch.features)));
    const float* host_targets =
        Rows(batch.targets.data(), batch.target_dim, ranges, &scratch.targets);
    std::vector<float> normalized;
    if (normalizes_targets()) {
      normalized = NormalizedTargets(host_targets, rows.count, batch.target_dim);
      host_targets = normalized.data();
    }
    TOWER_ASSIGN_OR_RETURN(
        Tensor targets,
        loss_->PrepareTargets(device, host_targets, rows.count, batch.target_dim, out_dim,
                              batch.source_rows.empty()
                                  ? nullptr
                                  : Rows(batch.source_rows.data(), 1, ranges,
                                         &scratch.source_rows)));
    PassOptions options;
    options.targets = &targets;
    options.loss_rows = batch.rows;
    if (step.loss_scale != 0) options.loss_scale = step.loss_scale;
    if (check_across_replicas) options.first_nonfinite = &first_nonfinite;
    options.backward = training;
    options.reducer = &reducer;
    options.pass = static_cast<int>(p);
    options.passes = static_cast<int>(passes.size());
    options.start_loss_read = read_loss_early;
    if (!training) {
      TOWER_RETURN_IF_ERROR(reducer.Begin({}, options.pass, options.passes));
    }
    TOWER_RETURN_IF_ERROR(ForwardBackward(r, x, options, &pass));
    // The loss rides in the last bucket: one all-reduce also gives every replica the
    // global loss (and, across workers, every row's prediction).
    if (gather) {
      TOWER_ASSIGN_OR_RETURN(all_outputs,
                             OwnRowsOfAll(device, pass.outputs, rows, batch.rows, out_dim));
    } else if (predictions != nullptr && rows.count > 0) {
      TOWER_RETURN_IF_ERROR(ScatterRows(pass.outputs, out_dim, ranges, predictions->data(),
                                        &scratch.outputs));
    }
    TOWER_RETURN_IF_ERROR(reducer.Finish(extra));
  }
  if (check_across_replicas) {
    TOWER_RETURN_IF_ERROR(CheckReplicasNumerics(ctx, first_nonfinite));
  }
  if (check_numerics_) TOWER_RETURN_IF_ERROR(CheckNumerics(pass, training));
  if (step.record_norm && r == 0) {
    // Every replica holds the same sums: replica 0 measures them, unscaled (the scale is a
    // power of two: dividing the norm is exact). Non-finite when the step will be skipped.
    TOWER_ASSIGN_OR_RETURN(const double norm, GlobalNorm(pass.gradients));
    results.gradient_norm = step.loss_scale != 0 ? norm / step.loss_scale : norm;
  }
  if (training && step.loss_scale != 0) {
    // Every replica holds the same sums: each decides alone, all alike.
    TOWER_ASSIGN_OR_RETURN(const bool finite, AllFinite(pass.gradients));
    if (r == 0) results.finite = finite;
    if (finite) {
      // Unscaled (the scale is a power of two: exact), then the update.
      for (Tensor& gradient : pass.gradients) {
        TOWER_ASSIGN_OR_RETURN(gradient, ops::Scale(gradient, 1.0f / step.loss_scale));
      }
      trace::Span updating("update", trace::Category::kOptimizer);
      TOWER_RETURN_IF_ERROR(optimizer_->Apply(r, iteration, trainable_, pass.gradients, updaters));
    }
  } else if (training && !hand_over.on) {
    trace::Span updating("update", trace::Category::kOptimizer);
    TOWER_RETURN_IF_ERROR(optimizer_->Apply(r, iteration, trainable_, pass.gradients, updaters));
  }
  // Every replica reads its loss: on a GPU this waits for the step's work, or, read early,
  // for its forward pass only.
  float loss_value = 0;
  if (read_loss_early) {
    TOWER_RETURN_IF_ERROR(pass.loss.device()->stream().FinishRead(&loss_value));
  } else {
    TOWER_RETURN_IF_ERROR(CheckLossIsOneFloat(pass.loss));
    TOWER_RETURN_IF_ERROR(pass.loss.ToHostBytes(&loss_value));
  }
  if (r == 0) results.loss = loss_value;
  if (gather && r == 0) TOWER_RETURN_IF_ERROR(all_outputs.ToHostBytes(predictions->data()));
  return OkStatus();
}

bool Sequential::SharesWeightPacking() const {
  return share_weight_packing_ && distribution_ != nullptr &&
         distribution_->ReplicasShareVariables() && distribution_->num_local_replicas() > 1;
}

StatusOr<double> Sequential::RunBatch(const data::Batch& batch, bool training,
                                      std::vector<float>* predictions) {
  Distribution& dist = *distribution_;
  const int64_t in_dim = input_dim_;
  const int64_t out_dim = output_dim();
  if (predictions != nullptr) predictions->assign(static_cast<size_t>(batch.rows * out_dim), 0.0f);
  // Other workers hold the other rows' predictions: they come with the loss's all-reduce.
  const bool gather = predictions != nullptr && dist.num_replicas_in_sync() > dist.num_local_replicas();
  // Every replica reads the step number before the all-reduce, which nobody passes before
  // all have read it.
  const int64_t iteration = optimizer_->iterations();
  // The step every collective of it carries (flight records, fingerprints across workers).
  if (training) SetCurrentStep(iteration + 1);

  // Replicas that share their variables update them as the gradients' sums form, each its
  // slices of the all-reduce, while they are in cache (where the reducer can hand the sums
  // over; checking the numerics needs the summed gradients kept, and global-norm clipping
  // needs every sum before any update, so then they are not).
  // Loss scaling decides after every sum whether the step happens at all: no update inside
  // the all-reduce either. Nor when the step records the sums' global norm (StepStats):
  // like global-norm clipping, it needs every sum kept.
  const bool scaling = training && loss_scale_.has_value();
  const bool record_norm = training && record_gradient_norm_;
  const bool update_in_reduce = training && dist.ReplicasShareVariables() && !check_numerics_ &&
                                optimizer_->CanUpdateSlicesOfSums() && !scaling && !record_norm;
  // Replicas batched per thread run the step once per batch, over the shards of all its
  // replicas (Distribution::RunOnReplicaBatches), when each replica would run one pass
  // (not under gradient accumulation) and no check names the replica of a value (with
  // several replicas, check-numerics names the first one whose own values are not finite).
  const bool batched = dist.batched_groups() > 0 && micro_batches_ == 1 && !check_numerics_;

  ReplicaStep& replica_step = *replica_step_;
  ReplicaStep::Results& results = replica_step.results;
  results = ReplicaStep::Results();
  ReplicaStep::State& step = replica_step.state;
  // In State's order; `update` is set below when the reducer applies it.
  step = ReplicaStep::State{&dist,       &batch,   predictions, in_dim,
                            out_dim,     iteration, training,   gather,
                            update_in_reduce,       record_norm, batched,
                            scaling ? loss_scale_->scale() : 0.0f,
                            Optimizer::StepAttrs()};
  if (update_in_reduce) {
    TOWER_ASSIGN_OR_RETURN(step.update, optimizer_->AttrsOf(iteration));
  }
  // Replicas that share their variables multiply by the same weights: the step's own version
  // lets them pack a weight once for all of them (the threads that multiply at once share the
  // work; the replicas a thread runs later reuse it). No replica uses a weight after its
  // update: an update follows the all-reduce of its gradient, which waits for every
  // replica's backward through that layer, its input gradient's product included.
  struct WeightsVersion {
    const std::vector<std::shared_ptr<Layer>>& layers;
    WeightsVersion(const std::vector<std::shared_ptr<Layer>>& layers, uint64_t version)
        : layers(layers) {
      for (const auto& layer : layers) layer->set_weights_version(version);
    }
    ~WeightsVersion() {
      for (const auto& layer : layers) layer->set_weights_version(0);
    }
  } weights_version(layers_, SharesWeightPacking() ? NextWeightsVersion() : 0);
  TOWER_RETURN_IF_ERROR(batched ? dist.RunOnReplicaBatches(replica_step.fn)
                                : dist.RunOnReplicas(replica_step.fn));
  if (training) {
    step_stats_.value.iteration = iteration;
    step_stats_.value.learning_rate = optimizer_->learning_rate(iteration);
    step_stats_.value.all_reduce_seconds = results.all_reduce_seconds;
    step_stats_.value.loss_scale = step.loss_scale;
    step_stats_.value.skipped = !results.finite;
    step_stats_.value.gradient_global_norm =
        results.finite ? results.gradient_norm : std::numeric_limits<double>::quiet_NaN();
  }
  if (scaling) loss_scale_->Update(results.finite);
  // A step that loss scaling skipped is not an update: the counter (and the schedule) stay.
  if (training && results.finite) optimizer_->set_iterations(iteration + 1);
  if (predictions != nullptr) DenormalizeOutputs(predictions->data(), batch.rows);
  return results.loss;
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
  for (int r = 0; r < distribution_->num_local_replicas(); ++r) {
    TOWER_RETURN_IF_ERROR(distribution_->replica_device(r)->stream().Synchronize());
  }
  return OkStatus();
}

StatusOr<double> Sequential::TrainStep(const data::Batch& batch) {
  // Read only when asked (set_record_step_times): a clock read is a visible share of a
  // small step.
  const auto start = record_step_times_ ? std::chrono::steady_clock::now()
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
      record_step_times_
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
  for (int r = 0; r < distribution_->num_local_replicas(); ++r) {
    TOWER_RETURN_IF_ERROR(optimizer_->Apply(r, optimizer_->iterations(), trainable_, grads));
  }
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
  if (normalizes_targets()) {
    host_targets = NormalizedTargets(host_targets.data(), targets.shape().dim(0),
                                     targets.shape().dim(1));
  }
  TOWER_ASSIGN_OR_RETURN(Tensor prepared,
                         loss_->PrepareTargets(ctx.device(), host_targets.data(),
                                               targets.shape().dim(0), targets.shape().dim(1),
                                               output_dim(), nullptr));
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
  // Read before the all-reduce, advanced after it by replica 0: every replica applies the
  // same step (RunOnReplicas ends only when all have).
  const int64_t iteration = optimizer_->iterations();
  GradientReducer& reducer = ctx.gradient_reducer();
  TOWER_RETURN_IF_ERROR(reducer.Begin(gradient_bytes_, /*pass=*/0, /*passes=*/1));
  for (size_t i = layers_.size(); i-- > 0;) {
    for (size_t k = 0; k < layers_[i]->variables().size(); ++k) {
      Tensor& gradient = gradients[first_gradient_[i] + k];
      if (!gradient.valid() || gradient.shape() != trainable_[first_gradient_[i] + k]->shape()) {
        return ShapeError("ApplyGradients", "gradient of " +
                                                trainable_[first_gradient_[i] + k]->name() +
                                                " has the wrong shape:",
                          gradient.valid() ? gradient.shape() : Shape{},
                          trainable_[first_gradient_[i] + k]->shape());
      }
      TOWER_RETURN_IF_ERROR(reducer.Add(&gradient));
    }
  }
  TOWER_RETURN_IF_ERROR(reducer.Finish({}));
  TOWER_RETURN_IF_ERROR(optimizer_->Apply(ctx.replica_id(), iteration, trainable_, gradients));
  // Shared variables: each replica updated a slice; none may read them before all have
  // (an all-reduce of nothing is the replicas' barrier).
  if (distribution_->ReplicasShareVariables()) TOWER_RETURN_IF_ERROR(ctx.AllReduceSum({}));
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
  const int64_t out_dim = output_dim();
  std::vector<float> outputs(static_cast<size_t>(rows * out_dim));
  Distribution& dist = *distribution_;
  const bool other_workers = dist.num_replicas_in_sync() > dist.num_local_replicas();
  TOWER_RETURN_IF_ERROR(dist.RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    std::vector<RowRange> passes;
    dist.PassRows(rows, ctx.global_replica_id(), /*micro_batches=*/1, &passes);
    // Across workers, this replica's rows (zeros elsewhere) for one all-reduce.
    std::vector<float> mine(other_workers ? static_cast<size_t>(rows * out_dim) : 0, 0.0f);
    float* const destination = other_workers ? mine.data() : outputs.data();
    for (const RowRange& pass_rows : passes) {
      TOWER_ASSIGN_OR_RETURN(
          Tensor x, Tensor::FromHostBytes(ctx.device(), Shape{pass_rows.count, input_dim_},
                                          DType::kFloat32,
                                          features.data() + pass_rows.first * input_dim_));
      ReplicaPass pass;
      TOWER_RETURN_IF_ERROR(ForwardBackward(ctx.replica_id(), x, PassOptions(), &pass));
      if (pass_rows.count > 0) {
        TOWER_RETURN_IF_ERROR(pass.outputs.ToHostBytes(destination + pass_rows.first * out_dim));
      }
    }
    if (!other_workers) return OkStatus();
    // Other workers hold the other rows: one all-reduce gives everyone all of them.
    TOWER_ASSIGN_OR_RETURN(Tensor gathered,
                           Tensor::FromHost(ctx.device(), Shape{rows, out_dim}, mine));
    TOWER_RETURN_IF_ERROR(ctx.AllReduceSum({&gathered}));
    TOWER_RETURN_IF_ERROR(ctx.FinishReductions());
    if (ctx.replica_id() != 0) return OkStatus();
    return gathered.ToHostBytes(outputs.data());
  }));
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
