// Sequential::SaveWeights / LoadWeights: the model's variables, the optimizer's slots and its
// step counter in one safetensors file (model/checkpoint/safetensors.h).
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "model/checkpoint/safetensors.h"
#include "model/sequential.h"
#include "util/strings.h"

namespace tower {
namespace {

constexpr char kIterations[] = "optimizer.iterations";
// Dynamic loss scaling's state, when it is on.
constexpr char kLossScale[] = "optimizer.loss_scale";
constexpr char kLossScaleGoodSteps[] = "optimizer.loss_scale_good_steps";

checkpoint::TensorData Int64Scalar(const std::string& name, int64_t value) {
  checkpoint::TensorData data;
  data.name = name;
  data.dtype = checkpoint::DType::kI64;
  data.shape = {};
  data.bytes.resize(sizeof(value));
  std::memcpy(data.bytes.data(), &value, sizeof(value));  // little-endian host
  return data;
}

// An I64 scalar of `file` named `name`, or `fallback` when it has none.
StatusOr<int64_t> ReadInt64Scalar(const checkpoint::File& file, const std::string& path,
                                  const char* name, int64_t fallback) {
  const checkpoint::TensorData* tensor = file.Find(name);
  if (tensor == nullptr) return fallback;
  if (tensor->dtype != checkpoint::DType::kI64 || !tensor->shape.empty() ||
      tensor->bytes.size() != sizeof(int64_t)) {
    return InvalidArgumentError(path + ": tensor '" + name + "' must be an I64 scalar");
  }
  int64_t value = 0;
  std::memcpy(&value, tensor->bytes.data(), sizeof(value));
  return value;
}

checkpoint::TensorData ToData(const std::string& name, const Shape& shape,
                              const std::vector<float>& values) {
  return checkpoint::FromFloats(name, shape.dims(), values);
}

std::vector<Variable*> AllVariables(const Sequential& model) {
  std::vector<Variable*> all = model.variables();
  if (model.optimizer() != nullptr) {
    for (Variable* slot : model.optimizer()->slots()) all.push_back(slot);
  }
  return all;
}

Status Mismatch(const std::string& path, const std::string& what) {
  return InvalidArgumentError(path + ": " + what);
}

}  // namespace

Status Sequential::SaveWeights(const std::string& path) const {
  std::map<std::string, std::string> metadata;
  if (description_.has_value()) metadata = ToMetadata(*description_);
  return WriteCheckpoint(path, metadata);
}

Status Sequential::SaveBackup(const std::string& path, const FitPosition& position) const {
  std::map<std::string, std::string> metadata;
  if (description_.has_value()) metadata = ToMetadata(*description_);
  AddToMetadata(position, &metadata);
  return WriteCheckpoint(path, metadata);
}

StatusOr<FitPosition> Sequential::RestoreBackup(const std::string& path,
                                                const std::string& signature) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  TOWER_ASSIGN_OR_RETURN(checkpoint::File file, checkpoint::Load(path));
  TOWER_ASSIGN_OR_RETURN(FitPosition position, FitPositionFromMetadata(file.metadata, path));
  if (position.signature != signature) {
    return FailedPreconditionError(
        path + " is the backup of another run; it trained [" + position.signature +
        "], this one trains [" + signature + "]. Resume with the same flags, or remove it");
  }
  if (position.metrics.size() != metrics_.size()) {
    return InvalidArgumentError(path + ": the backup has " +
                                std::to_string(position.metrics.size()) +
                                " metric totals, the model " + std::to_string(metrics_.size()));
  }
  TOWER_RETURN_IF_ERROR(ApplyCheckpoint(file, path));
  return position;
}

Status Sequential::WriteCheckpoint(const std::string& path,
                                   const std::map<std::string, std::string>& metadata) const {
  if (!built()) {
    return FailedPreconditionError("SaveWeights: the model is not built yet (nothing to save)");
  }
  if (!distribution_->is_chief()) return OkStatus();  // rank 0 writes for everyone
  checkpoint::File file;
  // The 8-byte counter first: every tensor then starts at a multiple of its element size.
  if (optimizer_ != nullptr) {
    file.tensors.push_back(Int64Scalar(kIterations, optimizer_->iterations()));
    file.metadata["optimizer"] = optimizer_->name();
  }
  if (runner_->settings().loss_scale.has_value()) {
    file.tensors.push_back(Int64Scalar(kLossScaleGoodSteps, runner_->settings().loss_scale->good_steps()));
  }
  for (Variable* variable : AllVariables(*this)) {
    TOWER_ASSIGN_OR_RETURN(std::vector<float> values, variable->Read());
    file.tensors.push_back(ToData(variable->name(), variable->shape(), values));
  }
  if (runner_->settings().loss_scale.has_value()) {
    file.tensors.push_back(ToData(kLossScale, Shape{}, {runner_->settings().loss_scale->scale()}));
  }
  std::vector<std::string> layers;
  for (const auto& layer : layers_) layers.push_back(layer->Describe());
  file.metadata["format"] = "tower";
  file.metadata["layers"] = Join(layers, ", ");
  file.metadata["input_dim"] = std::to_string(input_dim_);
  for (const auto& [key, value] : metadata) file.metadata[key] = value;
  return checkpoint::Save(path, file);
}

Status Sequential::LoadWeights(const std::string& path, bool with_optimizer_state) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  TOWER_ASSIGN_OR_RETURN(checkpoint::File file, checkpoint::Load(path));
  return ApplyCheckpoint(file, path, with_optimizer_state);
}

Status Sequential::ApplyCheckpoint(const checkpoint::File& file, const std::string& path,
                                   bool with_optimizer_state) {
  if (!built()) {
    const checkpoint::TensorData* first = file.Find("layers.0.kernel");
    if (first == nullptr || first->shape.size() != 2) {
      return Mismatch(path, "has no 2-D tensor 'layers.0.kernel' to build the model from");
    }
    TOWER_RETURN_IF_ERROR(Build(first->shape[0]).WithContext(path));
  }
  // Every tensor of the file must belong to the model (or its optimizer), and every
  // variable of the model must be in the file; optimizer state is optional as a whole.
  std::set<std::string> known;
  for (Variable* variable : AllVariables(*this)) known.insert(variable->name());
  known.insert(kIterations);
  if (runner_->settings().loss_scale.has_value()) {
    known.insert(kLossScale);
    known.insert(kLossScaleGoodSteps);
  }
  bool has_optimizer_state = false;
  for (const checkpoint::TensorData& tensor : file.tensors) {
    if (!with_optimizer_state && StartsWith(tensor.name, "optimizer.")) continue;
    if (known.count(tensor.name) == 0) {
      std::vector<std::string> names;
      for (Variable* variable : trainable_) names.push_back(variable->name());
      return Mismatch(path, "tensor '" + tensor.name + "' is not part of this model (" +
                                optimizer_->name() + " optimizer; variables: " +
                                Join(names, ", ") + ")");
    }
    if (StartsWith(tensor.name, "optimizer.")) has_optimizer_state = true;
  }
  // Check everything before changing anything: a bad file leaves the model as it was.
  std::vector<std::pair<Variable*, std::vector<float>>> updates;
  for (Variable* variable : AllVariables(*this)) {
    const bool slot = StartsWith(variable->name(), "optimizer.");
    if (slot && !with_optimizer_state) continue;
    const checkpoint::TensorData* tensor = file.Find(variable->name());
    if (tensor == nullptr) {
      if (slot && !has_optimizer_state) continue;
      return Mismatch(path, "has no tensor '" + variable->name() + "' (shape " +
                                variable->shape().ToString() + ")");
    }
    if (tensor->dtype != checkpoint::DType::kF32) {
      return Mismatch(path, "tensor '" + variable->name() + "' must be F32");
    }
    if (tensor->shape != variable->shape().dims()) {
      return Mismatch(path, "tensor '" + variable->name() + "' has shape " +
                                "[" + Join(tensor->shape, ", ") + "] but the model's is " +
                                variable->shape().ToString());
    }
    TOWER_ASSIGN_OR_RETURN(std::vector<float> values, checkpoint::ToFloats(*tensor));
    updates.emplace_back(variable, std::move(values));
  }
  int64_t iterations = optimizer_->iterations();
  const checkpoint::TensorData* iterations_tensor =
      with_optimizer_state ? file.Find(kIterations) : nullptr;
  if (const checkpoint::TensorData* tensor = iterations_tensor) {
    if (tensor->dtype != checkpoint::DType::kI64 || !tensor->shape.empty() ||
        tensor->bytes.size() != sizeof(int64_t)) {
      return Mismatch(path, std::string("tensor '") + kIterations + "' must be an I64 scalar");
    }
    std::memcpy(&iterations, tensor->bytes.data(), sizeof(iterations));
    if (iterations < 0) return Mismatch(path, "negative optimizer iterations");
  }
  // Loss scaling's state (a file without it, e.g. float32 weights: the scale stays).
  std::optional<std::pair<float, int64_t>> scale;
  if (runner_->settings().loss_scale.has_value() && with_optimizer_state && file.Find(kLossScale) != nullptr) {
    const checkpoint::TensorData& tensor = *file.Find(kLossScale);
    if (tensor.dtype != checkpoint::DType::kF32 || !tensor.shape.empty()) {
      return Mismatch(path, std::string("tensor '") + kLossScale + "' must be an F32 scalar");
    }
    TOWER_ASSIGN_OR_RETURN(std::vector<float> value, checkpoint::ToFloats(tensor));
    TOWER_ASSIGN_OR_RETURN(int64_t good, ReadInt64Scalar(file, path, kLossScaleGoodSteps, 0));
    DynamicLossScale check = *runner_->settings().loss_scale;
    TOWER_RETURN_IF_ERROR(check.Restore(value.at(0), good).WithContext(path));
    scale.emplace(value.at(0), good);
  }
  for (auto& [variable, values] : updates) TOWER_RETURN_IF_ERROR(variable->Assign(values));
  optimizer_->set_iterations(iterations);
  if (scale.has_value()) TOWER_RETURN_IF_ERROR(runner_->settings().loss_scale->Restore(scale->first, scale->second));
  return OkStatus();
}

}  // namespace tower
