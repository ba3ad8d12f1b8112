// Callback: what Fit calls at the start and end of training, of each epoch and of each step
// (Keras's Callback). A callback's error stops training and is returned by Fit. Tower's own
// callbacks are in model/callbacks.h.
#ifndef TOWER_MODEL_CALLBACK_H_
#define TOWER_MODEL_CALLBACK_H_

#include <cstdint>

#include "model/logs.h"
#include "util/status.h"

namespace tower {

class Sequential;

class Callback {
 public:
  virtual ~Callback() = default;
  virtual Status OnTrainBegin(Sequential& model) { return OkStatus(); }
  virtual Status OnEpochBegin(Sequential& model, int epoch) { return OkStatus(); }
  // Before step `step` (the optimizer's iterations + 1) reads its batch.
  virtual Status OnBatchBegin(Sequential& model, int64_t step) { return OkStatus(); }
  // `step`: 1-based count of steps since training began (the optimizer's iterations).
  virtual Status OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) {
    return OkStatus();
  }
  virtual Status OnEpochEnd(Sequential& model, int epoch, const Logs& logs) {
    return OkStatus();
  }
  virtual Status OnTrainEnd(Sequential& model, const History& history) { return OkStatus(); }
};

}  // namespace tower

#endif  // TOWER_MODEL_CALLBACK_H_
