#include "model/callbacks.h"

#include <cmath>
#include <cstdio>

#include "model/sequential.h"

namespace tower {
namespace {

Status OpenForWrite(const std::string& path, std::ofstream* file) {
  file->open(path, std::ios::out | std::ios::trunc);
  if (!file->is_open()) {
    return PermissionDeniedError("cannot write metrics log '" + path + "'");
  }
  return OkStatus();
}

std::string Number(double value) {
  if (std::isnan(value)) return "NaN";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", value);
  return buffer;
}

std::string JsonNumber(double value) {
  // JSON has no NaN/Infinity: write null, as Python's json with allow_nan=False would refuse.
  return std::isfinite(value) ? Number(value) : "null";
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

}  // namespace

Status CsvLogger::OnTrainBegin(Sequential& model) {
  columns_.clear();
  return OpenForWrite(path_, &file_);
}

Status CsvLogger::OnEpochEnd(Sequential& model, int epoch, const Logs& logs) {
  if (columns_.empty()) {
    file_ << "epoch";
    for (const auto& [key, value] : logs) {
      columns_.push_back(key);
      file_ << "," << key;
    }
    file_ << "\n";
  }
  file_ << epoch;
  for (const std::string& column : columns_) {
    auto it = logs.find(column);
    file_ << "," << (it == logs.end() ? std::string() : Number(it->second));
  }
  file_ << "\n" << std::flush;
  if (!file_) return DataLossError("writing metrics log '" + path_ + "' failed");
  return OkStatus();
}

Status JsonLinesLogger::OnTrainBegin(Sequential& model) { return OpenForWrite(path_, &file_); }

Status JsonLinesLogger::Write(const std::string& key, int64_t index, const Logs& logs) {
  file_ << "{\"" << key << "\": " << index;
  for (const auto& [name, value] : logs) file_ << ", \"" << name << "\": " << JsonNumber(value);
  file_ << "}\n" << std::flush;
  if (!file_) return DataLossError("writing metrics log '" + path_ + "' failed");
  return OkStatus();
}

Status JsonLinesLogger::OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) {
  return every_step_ ? Write("step", step, logs) : OkStatus();
}

Status JsonLinesLogger::OnEpochEnd(Sequential& model, int epoch, const Logs& logs) {
  return Write("epoch", epoch, logs);
}

std::string ModelCheckpoint::PathFor(int epoch, int64_t step) const {
  return Replace(Replace(path_, "{epoch}", std::to_string(epoch)), "{step}",
                 std::to_string(step));
}

Status ModelCheckpoint::OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) {
  if (every_steps_ <= 0 || step % every_steps_ != 0) return OkStatus();
  return model.SaveWeights(PathFor(epoch_ + 1, step));
}

Status ModelCheckpoint::OnEpochEnd(Sequential& model, int epoch, const Logs& logs) {
  epoch_ = epoch + 1;
  if (every_epochs_ <= 0 || (epoch + 1) % every_epochs_ != 0) return OkStatus();
  return model.SaveWeights(PathFor(epoch + 1, model.optimizer()->iterations()));
}

Status EarlyStopping::OnTrainBegin(Sequential& model) {
  best_ = maximize_ ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  wait_ = 0;
  stopped_epoch_ = -1;
  return OkStatus();
}

namespace {

// The value `who` monitors, or an error naming what the logs have instead.
StatusOr<double> Monitored(const Logs& logs, const std::string& monitor, const std::string& who) {
  auto it = logs.find(monitor);
  if (it == logs.end()) {
    std::string available;
    for (const auto& [key, value] : logs) available += (available.empty() ? "" : ", ") + key;
    return InvalidArgumentError(who + " monitors '" + monitor +
                                "', which the logs do not have (they have: " + available + ")");
  }
  return it->second;
}

}  // namespace

Status EarlyStopping::OnEpochEnd(Sequential& model, int epoch, const Logs& logs) {
  TOWER_ASSIGN_OR_RETURN(const double value, Monitored(logs, monitor_, "EarlyStopping"));
  const bool improved = maximize_ ? value > best_ + min_delta_ : value < best_ - min_delta_;
  if (improved) {
    best_ = value;
    wait_ = 0;
    return OkStatus();
  }
  if (++wait_ > patience_) {
    stopped_epoch_ = epoch;
    model.StopTraining();
  }
  return OkStatus();
}

}  // namespace tower

namespace tower {

Status BestCheckpoint::OnTrainBegin(Sequential& model) {
  best_ = maximize_ ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  best_epoch_ = -1;
  return OkStatus();
}

Status BestCheckpoint::OnEpochEnd(Sequential& model, int epoch, const Logs& logs) {
  TOWER_ASSIGN_OR_RETURN(const double value, Monitored(logs, monitor_, "BestCheckpoint"));
  // A NaN never counts as better.
  if (!(maximize_ ? value > best_ : value < best_)) return OkStatus();
  best_ = value;
  best_epoch_ = epoch;
  return model.SaveWeights(path_);
}

}  // namespace tower
