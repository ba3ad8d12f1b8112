#include "strategy/step/loss_scale.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "util/statusor.h"

namespace tower {
namespace {

bool PowerOfTwo(float value) {
  int exponent = 0;
  return std::isfinite(value) && value >= FLT_MIN && std::frexp(value, &exponent) == 0.5f;
}

}  // namespace

StatusOr<DynamicLossScale> DynamicLossScale::Create(const LossScaleOptions& options) {
  if (!PowerOfTwo(options.initial_scale)) {
    return InvalidArgumentError("loss scaling: the initial scale must be a power of two "
                                "(scaling is then exact), got " +
                                std::to_string(options.initial_scale));
  }
  if (options.growth_interval < 1) {
    return InvalidArgumentError("loss scaling: the growth interval must be at least 1 step, "
                                "got " + std::to_string(options.growth_interval));
  }
  return DynamicLossScale(options.initial_scale, options.growth_interval);
}

void DynamicLossScale::Update(bool finite) {
  if (!finite) {
    scale_ = std::max(scale_ / 2, FLT_MIN);
    good_steps_ = 0;
    return;
  }
  if (++good_steps_ >= growth_interval_) {
    if (std::isfinite(scale_ * 2)) scale_ *= 2;
    good_steps_ = 0;
  }
}

Status DynamicLossScale::Restore(float scale, int64_t good_steps) {
  if (!PowerOfTwo(scale) || good_steps < 0) {
    return InvalidArgumentError("loss scaling: a saved scale of " + std::to_string(scale) +
                                " after " + std::to_string(good_steps) +
                                " good steps is not a positive power of two and a count");
  }
  scale_ = scale;
  good_steps_ = good_steps;
  return OkStatus();
}

}  // namespace tower
