// The training loop: Fit (epochs, callbacks, progress, backups and resume) and Evaluate,
// on top of the step (Sequential::TrainStep, sequential.cc).
#include <chrono>
#include <cmath>
#include <iostream>
#include <string>

#include "model/progress.h"
#include "model/sequential.h"
#include "util/trace.h"

namespace tower {

namespace {

using Clock = std::chrono::steady_clock;

// Fit's checks of its options (`metrics`: how many the model computes, which a resume
// position's totals must match).
Status CheckFitOptions(const data::Dataset& dataset, const FitOptions& options, size_t metrics) {
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
  if (options.resume.has_value() && options.resume->metrics.size() != metrics) {
    return InvalidArgumentError("Fit: the resume position has " +
                                std::to_string(options.resume->metrics.size()) +
                                " metric totals for " + std::to_string(metrics) + " metrics");
  }
  return OkStatus();
}

// What one Fit carries from epoch to epoch.
struct FitRun {
  Sequential& model;
  const std::vector<std::unique_ptr<Metric>>& metrics;  // the model's: their totals
  const FitOptions& options;
  ProgressBar& progress;
  int64_t total_steps = 0;                   // steps in all, those of the run resumed included
  std::optional<FitPosition> last_position;  // after the last step, when backups are on
};

// Where Fit stands within an epoch.
struct EpochRun {
  int epoch = 0;        // 0-based
  int64_t step = 0;     // batches with rows trained on this epoch (or skipped, resuming)
  double loss_sum = 0;  // Σ loss · rows over them
  int64_t rows = 0;
  Logs logs;  // the figures so far: the metrics and the mean loss
  // StepTimes's figures so far, in the clock's integer ticks: each step's wait lies within
  // the step, so the sums keep wait <= whole exactly.
  Clock::duration input_wait{0};
  Clock::duration step_time{0};
  int64_t trained = 0;  // steps trained this epoch (not those skipped, resuming)
};

// What a pass of Fit's step loop did.
enum class StepOutcome { kTrained, kEmptyBatch, kDataEnded };

// The epoch's figures so far into `at.logs`.
void UpdateLogs(const Sequential& model, EpochRun& at) {
  at.logs = model.MetricResults();
  at.logs["loss"] = at.loss_sum / at.rows;
}

// Resuming: reads past the batches the killed run had trained on in this epoch (the
// pipeline is deterministic, so the next batch is the one it would have trained on next),
// and takes up its loss, rows and metric totals.
Status ResumeEpoch(const FitRun& run, data::Iterator& iterator, EpochRun& at) {
  const FitPosition& resume = *run.options.resume;
  // The batches before the position, passed (found without being built where the iterator
  // can: streamed CSV finds its rows' lines and parses none).
  if (at.step < resume.step_in_epoch) {
    TOWER_ASSIGN_OR_RETURN(const int64_t passed, iterator.Skip(resume.step_in_epoch - at.step));
    at.step += passed;
  }
  if (at.step < resume.step_in_epoch) {
    return FailedPreconditionError(
        "Fit: the data ended after " + std::to_string(at.step) + " batches of epoch " +
        std::to_string(at.epoch + 1) + ", before the resume position (step " +
        std::to_string(resume.step_in_epoch) + "): was the data changed?");
  }
  at.loss_sum = resume.loss_sum;
  at.rows = resume.rows;
  for (size_t m = 0; m < run.metrics.size(); ++m) {
    run.metrics[m]->set_totals(resume.metrics[m]);
  }
  return OkStatus();
}

// The epoch's steps (-1: until the data ends): steps_per_epoch, else the dataset's
// batches, no more than max_steps leaves.
int64_t StepsInEpoch(const FitRun& run, const data::Dataset& dataset, const EpochRun& at) {
  const FitOptions& options = run.options;
  int64_t steps_in_epoch =
      options.steps_per_epoch > 0 ? options.steps_per_epoch : dataset.num_batches();
  if (options.max_steps > 0) {
    const int64_t left = at.step + options.max_steps - run.total_steps;
    steps_in_epoch = steps_in_epoch < 0 ? left : std::min(steps_in_epoch, left);
  }
  return steps_in_epoch;
}

// The model's step on `batch` (global step `next_step`, for the trace): its loss, or with
// terminate_on_nan an error when the loss is not finite.
StatusOr<double> TrainOn(Sequential& model, const data::Batch& batch, int64_t next_step,
                         bool terminate_on_nan) {
  StatusOr<double> loss = [&] {
    trace::Span stepping("train step", trace::Category::kStep, static_cast<int>(next_step));
    return model.TrainStep(batch);
  }();
  if (loss.ok() && terminate_on_nan && !std::isfinite(*loss)) {
    // Every replica and worker holds the same all-reduced loss: all stop here together.
    loss = InvalidArgumentError(
        std::string("training diverged: the loss is ") + (std::isnan(*loss) ? "NaN" : "Inf") +
        " at global step " + std::to_string(model.optimizer()->iterations()) +
        " (lower the learning rate, or normalize the features; check-numerics names the "
        "first non-finite tensor)");
  }
  return loss;
}

// Where the loop stands after a step, for backups.
FitPosition PositionOf(const FitRun& run, const EpochRun& at) {
  FitPosition position;
  position.epoch = at.epoch;
  position.step_in_epoch = at.step;
  position.total_steps = run.total_steps;
  position.loss_sum = at.loss_sum;
  position.rows = at.rows;
  for (const auto& metric : run.metrics) position.metrics.push_back(metric->totals());
  position.signature = run.options.signature;
  return position;
}

// After a step of `batch` with mean loss `loss`: the epoch's figures, the progress bar,
// OnBatchEnd, and the backup when one is due.
Status RecordStep(FitRun& run, const data::Batch& batch, double loss, EpochRun& at) {
  ++at.step;
  ++run.total_steps;
  at.loss_sum += loss * batch.rows;
  at.rows += batch.rows;
  UpdateLogs(run.model, at);
  run.progress.Update(at.step, at.logs);
  for (const auto& callback : run.options.callbacks) {
    TOWER_RETURN_IF_ERROR(
        callback->OnBatchEnd(run.model, run.model.optimizer()->iterations(), at.logs));
  }
  if (run.options.backup_path.empty()) return OkStatus();
  run.last_position = PositionOf(run, at);
  if (run.options.backup_every_steps > 0 && run.total_steps % run.options.backup_every_steps == 0) {
    TOWER_RETURN_IF_ERROR(run.model.SaveBackup(run.options.backup_path, *run.last_position)
                              .WithContext("backup at step " + std::to_string(run.total_steps)));
  }
  return OkStatus();
}

// One pass of the step loop: OnBatchBegin, the next batch, and the step on it unless the
// data ended or the batch is empty.
StatusOr<StepOutcome> RunFitStep(FitRun& run, data::Iterator& iterator, EpochRun& at) {
  // The step about to run (the optimizer's, as OnBatchEnd's).
  const int64_t next_step = run.model.optimizer()->iterations() + 1;
  for (const auto& callback : run.options.callbacks) {
    TOWER_RETURN_IF_ERROR(callback->OnBatchBegin(run.model, next_step));
  }
  const Clock::time_point asked = Clock::now();
  StatusOr<std::optional<data::Batch>> next = [&] {
    trace::Span reading("next batch", trace::Category::kData);
    return iterator.Next();
  }();
  at.input_wait += Clock::now() - asked;
  TOWER_RETURN_IF_ERROR(next.status());
  std::optional<data::Batch>& batch = *next;
  if (!batch.has_value()) return StepOutcome::kDataEnded;
  if (batch->rows == 0) return StepOutcome::kEmptyBatch;
  StatusOr<double> loss = TrainOn(run.model, *batch, next_step, run.options.terminate_on_nan);
  if (!loss.ok()) {
    return loss.status().WithContext("epoch " + std::to_string(at.epoch + 1) + ", step " +
                                     std::to_string(at.step + 1));
  }
  TOWER_RETURN_IF_ERROR(RecordStep(run, *batch, *loss, at));
  return StepOutcome::kTrained;
}

// The end of an epoch: the validation figures, the progress bar's line, the history's
// entry and OnEpochEnd. An epoch without a step is an error.
Status EndEpoch(FitRun& run, History& history, EpochRun& at) {
  if (at.step == 0) {
    return InvalidArgumentError("Fit: epoch " + std::to_string(at.epoch + 1) +
                                " got no data (is the dataset empty?)");
  }
  if (run.options.validation != nullptr) {
    TOWER_ASSIGN_OR_RETURN(Logs validation, run.model.Evaluate(*run.options.validation));
    for (const auto& [key, value] : validation) at.logs["val_" + key] = value;
  }
  run.progress.EndEpoch(at.step, at.logs);
  history.epochs.push_back(at.logs);
  StepTimes times;
  times.input_wait_seconds = std::chrono::duration<double>(at.input_wait).count();
  times.step_seconds = std::chrono::duration<double>(at.step_time).count();
  times.steps = at.trained;
  history.epoch_step_times.push_back(times);
  history.step_times.input_wait_seconds += times.input_wait_seconds;
  history.step_times.step_seconds += times.step_seconds;
  history.step_times.steps += times.steps;
  for (const auto& callback : run.options.callbacks) {
    TOWER_RETURN_IF_ERROR(callback->OnEpochEnd(run.model, at.epoch, at.logs));
  }
  return OkStatus();
}

}  // namespace

StatusOr<History> Sequential::Fit(const data::Dataset& dataset, const FitOptions& options) {
  TOWER_RETURN_IF_ERROR(CheckCompiled());
  TOWER_RETURN_IF_ERROR(dataset.status());
  TOWER_RETURN_IF_ERROR(CheckFitOptions(dataset, options, metrics_.size()));
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
  FitRun run{*this, metrics_, options, progress};
  run.total_steps = options.resume ? options.resume->total_steps : 0;
  for (int epoch = first_epoch; epoch < options.epochs && !stop_training_; ++epoch) {
    for (const auto& callback : options.callbacks) {
      TOWER_RETURN_IF_ERROR(callback->OnEpochBegin(*this, epoch));
    }
    ResetMetrics();
    TOWER_ASSIGN_OR_RETURN(std::unique_ptr<data::Iterator> iterator,
                           dataset.MakeIterator(epoch));
    EpochRun at;
    at.epoch = epoch;
    if (options.resume && epoch == first_epoch) {
      TOWER_RETURN_IF_ERROR(ResumeEpoch(run, *iterator, at));
    }
    const int64_t steps_in_epoch = StepsInEpoch(run, dataset, at);
    progress.BeginEpoch(epoch, options.epochs, steps_in_epoch);
    if (at.rows > 0) UpdateLogs(*this, at);
    while (steps_in_epoch < 0 || at.step < steps_in_epoch) {
      const Clock::time_point begin = Clock::now();
      TOWER_ASSIGN_OR_RETURN(const StepOutcome outcome, RunFitStep(run, *iterator, at));
      at.step_time += Clock::now() - begin;
      if (outcome == StepOutcome::kTrained) ++at.trained;
      if (outcome == StepOutcome::kDataEnded) break;
      // A callback may stop training after a step (an empty batch is none).
      if (outcome == StepOutcome::kTrained && stop_training_) break;
    }
    TOWER_RETURN_IF_ERROR(EndEpoch(run, history, at));
    if (options.max_steps > 0 && run.total_steps >= options.max_steps) break;
  }
  // The final position too: resuming a finished run trains no more.
  if (run.last_position.has_value()) {
    TOWER_RETURN_IF_ERROR(
        SaveBackup(options.backup_path, *run.last_position).WithContext("final backup"));
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
