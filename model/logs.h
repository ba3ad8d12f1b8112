// Logs: the named figures of a step or an epoch ("loss", "mae", "val_loss", ...).
#ifndef TOWER_MODEL_LOGS_H_
#define TOWER_MODEL_LOGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tower {

// Ordered by name (std::map): printed and logged in a stable order.
using Logs = std::map<std::string, double>;

// Where the wall time of Fit's steps went, by a monotonic clock (std::chrono::steady_clock), in
// seconds: whether the input pipeline keeps the steps waiting.
struct StepTimes {
  // Waiting for the batch: the dataset iterator's Next() of each step. With Prefetch it is the
  // wait on the read-ahead queue; without, the reading, shuffling and batching of the rows
  // themselves.
  double input_wait_seconds = 0;
  // The steps whole: OnBatchBegin, Next(), the training step (forward, backward, all-reduce,
  // update), OnBatchEnd and any backup. Neither the epoch's validation nor the batches a
  // resumed run reads past. Both figures include the pass that finds the data ended.
  double step_seconds = 0;
  int64_t steps = 0;  // the steps trained
};

// What Fit returns: one Logs per epoch (Keras's History).
struct History {
  std::vector<Logs> epochs;
  // Per epoch, as `epochs`, and summed over them; each worker measures its own.
  std::vector<StepTimes> epoch_step_times;
  StepTimes step_times;
  // The value of `key` at every epoch (NaN where an epoch lacks it).
  std::vector<double> values(const std::string& key) const;
};

}  // namespace tower

#endif  // TOWER_MODEL_LOGS_H_
