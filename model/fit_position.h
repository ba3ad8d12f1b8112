// Where a Fit stands, so a run killed at any step can be resumed to the same bits
// (TensorFlow's BackupAndRestore). With the weights and the optimizer state it is all the
// state training has: the data pipeline is deterministic given its seed and the epoch
// (shuffles are keyed by both, data/dataset.h), so "epoch e, step s" names the next batch
// exactly, and no other random numbers are drawn after the initial weights.
#ifndef TOWER_MODEL_FIT_POSITION_H_
#define TOWER_MODEL_FIT_POSITION_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/metrics.h"
#include "util/statusor.h"

namespace tower {

struct FitPosition {
  int epoch = 0;               // 0-based epoch the next step belongs to
  int64_t step_in_epoch = 0;   // steps of that epoch already done
  int64_t total_steps = 0;     // steps of this Fit already done, all epochs
  // The epoch's running loss (sum of batch loss × rows, and rows) and metric totals, so
  // the resumed epoch reports the same figures as an uninterrupted one.
  double loss_sum = 0;
  int64_t rows = 0;
  std::vector<Metric::Totals> metrics;
  // What the run trains (model, data, optimizer flags); a resume with another is refused.
  std::string signature;

  bool operator==(const FitPosition& other) const;
};

// As string entries of a checkpoint's metadata ("fit.epoch", ...; doubles in hex so they
// round-trip exactly).
void AddToMetadata(const FitPosition& position, std::map<std::string, std::string>* metadata);
// NotFound when the metadata has no position (a plain weights file); InvalidArgument naming
// the bad entry when it is malformed.
StatusOr<FitPosition> FitPositionFromMetadata(const std::map<std::string, std::string>& metadata,
                                              const std::string& source);

}  // namespace tower

#endif  // TOWER_MODEL_FIT_POSITION_H_
