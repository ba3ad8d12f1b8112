// Random tensors from an explicit seed. Element i is a function of (seed, i) alone
// (Philox, util/philox.h): the same seed gives bitwise the same numbers on every device type,
// whatever the device and however the work is split.
#ifndef TOWER_OPS_RANDOM_OPS_H_
#define TOWER_OPS_RANDOM_OPS_H_

#include <cstdint>

#include "ops/tensor.h"

namespace tower::ops {

// Uniform in [minval, maxval).
StatusOr<Tensor> RandomUniform(const Shape& shape, float minval, float maxval, uint64_t seed,
                               Device* device = nullptr);
StatusOr<Tensor> RandomNormal(const Shape& shape, float mean, float stddev, uint64_t seed,
                              Device* device = nullptr);
// Keras's glorot_uniform for a kernel [fan_in, fan_out]: U(−l, l), l = √(6 / (fan_in + fan_out)).
StatusOr<Tensor> GlorotUniform(const Shape& shape, uint64_t seed, Device* device = nullptr);

}  // namespace tower::ops

#endif  // TOWER_OPS_RANDOM_OPS_H_
