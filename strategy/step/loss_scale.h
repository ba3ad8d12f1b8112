// Dynamic loss scaling (Keras's LossScaleOptimizer), for float16 compute: the loss's
// gradient is multiplied by `scale` before backward, so that small gradients do not flush
// to zero in float16, and the summed gradients are divided by it before the update.
//
// After the all-reduce every replica of every worker holds the same sums, bit for bit, so
// each decides alone and all decide alike: if any summed gradient holds an Inf or NaN (one
// replica's overflow makes the sum non-finite), the step is skipped everywhere (no update,
// the optimizer's step counter does not advance), the scale halves and the count of good
// steps restarts; after `growth_interval` good steps in a row the scale doubles. The scale
// may go below 1 (a model whose gradients overflow even unscaled still trains), down to
// float32's smallest normal number. Checkpoints and backups carry the scale and the count.
#ifndef TOWER_STRATEGY_STEP_LOSS_SCALE_H_
#define TOWER_STRATEGY_STEP_LOSS_SCALE_H_

#include <cstdint>

#include <optional>
#include <vector>

#include "ops/tensor.h"
#include "util/statusor.h"

namespace tower {

struct LossScaleOptions {
  float initial_scale = 32768;     // 2^15, Keras's
  int64_t growth_interval = 2000;  // good steps before the scale doubles, Keras's
};

class DynamicLossScale {
 public:
  // Checks the options: a finite power of two > 0 (so that scaling and unscaling are exact),
  // growth_interval ≥ 1.
  static StatusOr<DynamicLossScale> Create(const LossScaleOptions& options);

  float scale() const { return scale_; }
  int64_t good_steps() const { return good_steps_; }
  // After a step: `finite` says whether every summed gradient was finite.
  void Update(bool finite);
  // From a checkpoint.
  Status Restore(float scale, int64_t good_steps);

 private:
  DynamicLossScale(float scale, int64_t growth_interval)
      : scale_(scale), growth_interval_(growth_interval) {}
  float scale_;
  int64_t growth_interval_;
  int64_t good_steps_ = 0;
};


}  // namespace tower

#endif  // TOWER_STRATEGY_STEP_LOSS_SCALE_H_
