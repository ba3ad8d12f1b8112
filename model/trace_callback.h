// StepTrace: a trace of training steps A..B in Chrome's Trace Event Format (the JSON that
// chrome://tracing and Perfetto open), as a Keras-style callback.
//
//   model.Fit(data, {.callbacks = {std::make_shared<StepTrace>("trace.json", 5, 8)}});
//
// One process per worker (pid = its rank) and one lane per replica (tid = the replica's
// local index), with each layer's forward and backward, each gradient bucket's all-reduce,
// the waits for other replicas, the update, and on the training loop's lane the reading of
// each batch; GPU replicas add a lane for their stream's work (timed with CUDA events).
// Every worker records its own; after step B (or when training ends first) the workers'
// events are gathered, placed on one clock (the Unix clock of each host, so hosts' clocks
// should agree to well under a step), and the chief writes the file atomically.
#ifndef TOWER_MODEL_TRACE_CALLBACK_H_
#define TOWER_MODEL_TRACE_CALLBACK_H_

#include <cstdint>
#include <string>

#include "model/callback.h"
#include "util/statusor.h"

namespace tower {

class StepTrace : public Callback {
 public:
  // Steps `first_step` to `last_step` (1-based, inclusive; the optimizer's step numbers).
  StepTrace(std::string path, int64_t first_step, int64_t last_step)
      : path_(std::move(path)), first_step_(first_step), last_step_(last_step) {}

  Status OnTrainBegin(Sequential& model) override;
  Status OnBatchBegin(Sequential& model, int64_t step) override;
  Status OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) override;
  Status OnTrainEnd(Sequential& model, const History& history) override;

  // Whether the file was written (by this process: the chief).
  bool written() const { return written_; }

 private:
  // Stops recording, gathers every worker's events and (chief) writes the file.
  Status Finish(Sequential& model);

  std::string path_;
  int64_t first_step_;
  int64_t last_step_;
  bool recording_ = false;
  bool done_ = false;
  bool written_ = false;
};

// Parses "A:B" (1 <= A <= B) as --trace-steps does.
StatusOr<std::pair<int64_t, int64_t>> ParseTraceSteps(const std::string& spec);

}  // namespace tower

#endif  // TOWER_MODEL_TRACE_CALLBACK_H_
