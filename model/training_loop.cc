// The training loop: Fit (epochs, callbacks, progress, backups and resume) and Evaluate,
// on top of the step (Sequential::TrainStep, sequential.cc).
#include <cmath>
#include <iostream>
#include <string>

#include "model/progress.h"
#include "model/sequential.h"
#include "util/trace.h"

namespace tower {

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
      // The step about to run (the optimizer's, as OnBatchEnd's).
      const int64_t next_step = optimizer_->iterations() + 1;
      for (const auto& callback : options.callbacks) {
        TOWER_RETURN_IF_ERROR(callback->OnBatchBegin(*this, next_step));
      }
      StatusOr<std::optional<data::Batch>> next = [&] {
        trace::Span reading("next batch", trace::Category::kData);
        return iterator->Next();
      }();
      TOWER_RETURN_IF_ERROR(next.status());
      std::optional<data::Batch>& batch = *next;
      if (!batch.has_value()) break;
      if (batch->rows == 0) continue;
      StatusOr<double> loss = [&] {
        trace::Span stepping("train step", trace::Category::kStep, static_cast<int>(next_step));
        return TrainStep(*batch);
      }();
      if (loss.ok() && options.terminate_on_nan && !std::isfinite(*loss)) {
        // Every replica and worker holds the same all-reduced loss: all stop here together.
        loss = InvalidArgumentError(
            std::string("training diverged: the loss is ") + (std::isnan(*loss) ? "NaN" : "Inf") +
            " at global step " + std::to_string(optimizer_->iterations()) +
            " (lower the learning rate, or normalize the features; check-numerics names the "
            "first non-finite tensor)");
      }
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

}  // namespace tower
