#include "model/tensorboard/tensorboard_callback.h"

#include <cmath>
#include <utility>
#include <vector>

#include "model/sequential.h"

namespace tower {
namespace {

constexpr char kValidationPrefix[] = "val_";

bool IsValidationKey(const std::string& key) { return key.rfind(kValidationPrefix, 0) == 0; }

}  // namespace

StatusOr<int64_t> TensorBoard::ParseUpdateFreq(const std::string& update_freq) {
  if (update_freq == "epoch") return 0;
  if (update_freq == "batch") return 1;
  bool digits = !update_freq.empty() && update_freq.size() <= 18;
  for (char c : update_freq) digits = digits && c >= '0' && c <= '9';
  if (digits && std::stoll(update_freq) > 0) return std::stoll(update_freq);
  return InvalidArgumentError("TensorBoard update frequency '" + update_freq +
                              "': use epoch, batch, or a number of steps N >= 1 (every N-th "
                              "step)");
}

TensorBoard::TensorBoard(std::string log_dir, int64_t update_every_steps, double flush_seconds)
    : log_dir_(std::move(log_dir)),
      update_every_steps_(update_every_steps),
      flush_seconds_(flush_seconds) {}

TensorBoard::~TensorBoard() = default;

std::string TensorBoard::Subdirectory(const std::string& name) const {
  if (log_dir_.empty() || log_dir_.back() == '/') return log_dir_ + name;
  return log_dir_ + "/" + name;
}

Status TensorBoard::OnTrainBegin(Sequential& model) {
  train_.reset();
  validation_.reset();
  active_ = model.distribution() != nullptr && model.distribution()->is_chief();
  if (!active_) return OkStatus();
  steps_ = model.optimizer() != nullptr ? model.optimizer()->iterations() : 0;
  StatusOr<std::unique_ptr<tensorboard::EventFileWriter>> train =
      tensorboard::EventFileWriter::Create(Subdirectory("train"), flush_seconds_);
  if (!train.ok()) {
    active_ = false;
    return train.status();
  }
  train_ = std::move(*train);
  if (update_every_steps_ > 0) {
    // Cost a pass over the summed gradients and clock reads per step: only while this
    // callback logs them.
    restore_norm_ = model.record_gradient_norm();
    restore_step_times_ = model.record_step_times();
    model.set_record_gradient_norm(true);
    model.set_record_step_times(true);
  }
  return OkStatus();
}

Status TensorBoard::OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) {
  if (!active_) return OkStatus();
  ++steps_;
  if (update_every_steps_ <= 0 || steps_ % update_every_steps_ != 0) return OkStatus();
  const StepStats& stats = model.last_step_stats();
  std::vector<std::pair<std::string, float>> values;
  for (const auto& [key, value] : logs) {
    values.emplace_back("batch_" + key, static_cast<float>(value));
  }
  values.emplace_back("learning_rate", stats.learning_rate);
  if (!stats.skipped && !std::isnan(stats.gradient_global_norm)) {
    values.emplace_back("gradient_global_norm", static_cast<float>(stats.gradient_global_norm));
  }
  if (stats.loss_scale != 0) values.emplace_back("loss_scale", stats.loss_scale);
  values.emplace_back("step_time_ms", static_cast<float>(stats.step_seconds * 1e3));
  values.emplace_back("all_reduce_time_ms", static_cast<float>(stats.all_reduce_seconds * 1e3));
  return train_->WriteScalars(steps_, values, tensorboard::EventFileWriter::WallTime());
}

Status TensorBoard::OnEpochEnd(Sequential& model, int epoch, const Logs& logs) {
  if (!active_) return OkStatus();
  // Keras's layout: the training figures in train/, the val_ ones without their prefix in
  // validation/, under the same tags, so that TensorBoard draws them as two runs of one chart.
  std::vector<std::pair<std::string, float>> train, validation;
  for (const auto& [key, value] : logs) {
    if (IsValidationKey(key)) {
      validation.emplace_back("epoch_" + key.substr(sizeof(kValidationPrefix) - 1),
                              static_cast<float>(value));
    } else {
      train.emplace_back("epoch_" + key, static_cast<float>(value));
    }
  }
  const double now = tensorboard::EventFileWriter::WallTime();
  TOWER_RETURN_IF_ERROR(train_->WriteScalars(epoch, train, now));
  TOWER_RETURN_IF_ERROR(train_->Flush());
  if (validation.empty()) return OkStatus();
  if (validation_ == nullptr) {
    TOWER_ASSIGN_OR_RETURN(validation_, tensorboard::EventFileWriter::Create(
                                             Subdirectory("validation"), flush_seconds_));
  }
  TOWER_RETURN_IF_ERROR(validation_->WriteScalars(epoch, validation, now));
  return validation_->Flush();
}

Status TensorBoard::OnTrainEnd(Sequential& model, const History& history) {
  if (!active_) return OkStatus();
  active_ = false;
  if (update_every_steps_ > 0) {
    model.set_record_gradient_norm(restore_norm_);
    model.set_record_step_times(restore_step_times_);
  }
  Status train = train_->Close();
  Status validation = validation_ != nullptr ? validation_->Close() : OkStatus();
  return train.ok() ? validation : train;
}

}  // namespace tower
