// The callbacks Tower provides (Keras's): metric logs to CSV or JSON lines, periodic
// checkpoints, early stopping. The interface is model/callback.h.
#ifndef TOWER_MODEL_CALLBACKS_H_
#define TOWER_MODEL_CALLBACKS_H_

#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "model/callback.h"
#include "model/logs.h"
#include "util/status.h"

namespace tower {

// One CSV row per epoch ("epoch,loss,mae,val_loss,..."), flushed as it is written. The
// columns are fixed by the first epoch's logs.
class CsvLogger : public Callback {
 public:
  explicit CsvLogger(std::string path) : path_(std::move(path)) {}
  Status OnTrainBegin(Sequential& model) override;
  Status OnEpochEnd(Sequential& model, int epoch, const Logs& logs) override;

 private:
  std::string path_;
  std::ofstream file_;
  std::vector<std::string> columns_;
};

// One JSON object per line: per epoch ({"epoch": 0, "loss": ...}), and also per step
// ({"step": 12, "loss": ...}) when `every_step`.
class JsonLinesLogger : public Callback {
 public:
  explicit JsonLinesLogger(std::string path, bool every_step = false)
      : path_(std::move(path)), every_step_(every_step) {}
  Status OnTrainBegin(Sequential& model) override;
  Status OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) override;
  Status OnEpochEnd(Sequential& model, int epoch, const Logs& logs) override;

 private:
  Status Write(const std::string& key, int64_t index, const Logs& logs);
  std::string path_;
  bool every_step_;
  std::ofstream file_;
};

// Saves the weights (and optimizer state) every `every_steps` steps and/or every
// `every_epochs` epochs (0 = never), atomically. "{epoch}" and "{step}" in the path are
// replaced (1-based) so that each save can keep its own file.
class ModelCheckpoint : public Callback {
 public:
  ModelCheckpoint(std::string path, int64_t every_steps, int every_epochs = 1)
      : path_(std::move(path)), every_steps_(every_steps), every_epochs_(every_epochs) {}
  Status OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) override;
  Status OnEpochEnd(Sequential& model, int epoch, const Logs& logs) override;
  std::string PathFor(int epoch, int64_t step) const;

 private:
  std::string path_;
  int64_t every_steps_;
  int every_epochs_;
  int epoch_ = 0;
};

// Stops training when `monitor` ("loss", "val_loss", ...) has not improved by more than
// `min_delta` for `patience` epochs. `mode`: "min" (losses) or "max" (accuracy).
class EarlyStopping : public Callback {
 public:
  EarlyStopping(std::string monitor = "val_loss", int patience = 0, double min_delta = 0,
                std::string mode = "min")
      : monitor_(std::move(monitor)), patience_(patience), min_delta_(min_delta),
        maximize_(mode == "max") {}
  Status OnTrainBegin(Sequential& model) override;
  Status OnEpochEnd(Sequential& model, int epoch, const Logs& logs) override;
  // The epoch (0-based) at which training was stopped, or -1.
  int stopped_epoch() const { return stopped_epoch_; }

 private:
  std::string monitor_;
  int patience_;
  double min_delta_;
  bool maximize_;
  double best_ = std::numeric_limits<double>::infinity();
  int wait_ = 0;
  int stopped_epoch_ = -1;
};

// Saves the weights (and optimizer state) at the end of every epoch whose `monitor` is the
// best so far (Keras's ModelCheckpoint with save_best_only), atomically: `path` always holds
// the best epoch's model. `mode`: "min" (losses) or "max" (accuracy).
class BestCheckpoint : public Callback {
 public:
  BestCheckpoint(std::string path, std::string monitor = "val_loss", std::string mode = "min")
      : path_(std::move(path)), monitor_(std::move(monitor)), maximize_(mode == "max") {}
  Status OnTrainBegin(Sequential& model) override;
  Status OnEpochEnd(Sequential& model, int epoch, const Logs& logs) override;
  // The epoch (0-based) whose weights `path` holds, or -1.
  int best_epoch() const { return best_epoch_; }

 private:
  std::string path_;
  std::string monitor_;
  bool maximize_;
  double best_ = std::numeric_limits<double>::infinity();
  int best_epoch_ = -1;
};

}  // namespace tower

#endif  // TOWER_MODEL_CALLBACKS_H_
