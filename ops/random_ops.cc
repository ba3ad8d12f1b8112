#include "ops/random_ops.h"

#include <cmath>

#include "ops/eager.h"
#include "ops/op_attrs.h"
#include "ops/op_names.h"

namespace tower::ops {
namespace {

StatusOr<Tensor> Random(const OpKernels& op, const Shape& shape, const attrs::Random& random,
                        Device* device) {
  RunOptions options;
  options.pinned = device;
  return RunSingle(op, {}, OutputSpec{shape}, &random, options);
}

}  // namespace

StatusOr<Tensor> RandomUniform(const Shape& shape, float minval, float maxval, uint64_t seed,
                               Device* device) {
  static const OpKernels& kOp = KernelsOf(op_names::kRandomUniform);
  if (!(std::isfinite(minval) && std::isfinite(maxval) && minval <= maxval)) {
    return InvalidArgumentError("RandomUniform: need finite minval <= maxval, got [" +
                                std::to_string(minval) + ", " + std::to_string(maxval) + ")");
  }
  return Random(kOp, shape, attrs::Random{seed, minval, maxval}, device);
}

StatusOr<Tensor> RandomNormal(const Shape& shape, float mean, float stddev, uint64_t seed,
                              Device* device) {
  static const OpKernels& kOp = KernelsOf(op_names::kRandomNormal);
  if (!(std::isfinite(mean) && std::isfinite(stddev) && stddev >= 0)) {
    return InvalidArgumentError("RandomNormal: need a finite mean and stddev >= 0, got mean " +
                                std::to_string(mean) + ", stddev " + std::to_string(stddev));
  }
  return Random(kOp, shape, attrs::Random{seed, mean, stddev}, device);
}

StatusOr<Tensor> GlorotUniform(const Shape& shape, uint64_t seed, Device* device) {
  if (shape.rank() != 2) {
    return InvalidArgumentError("GlorotUniform: needs a kernel shape [fan_in, fan_out], got " +
                                shape.ToString());
  }
  const int64_t fans = shape.dim(0) + shape.dim(1);
  const float limit = fans == 0 ? 0.0f : static_cast<float>(std::sqrt(6.0 / fans));
  return RandomUniform(shape, -limit, limit, seed, device);
}

}  // namespace tower::ops
