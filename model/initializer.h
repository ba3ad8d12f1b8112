// Weight initializers (Keras's names). Deterministic: a variable's values depend only on
// the initializer, the shape and the seed, so every replica and device gets the same ones.
#ifndef TOWER_MODEL_INITIALIZER_H_
#define TOWER_MODEL_INITIALIZER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "ops/tensor.h"

namespace tower {

struct Initializer {
  enum class Kind {
    kGlorotUniform,  // U(±√(6 / (fan_in + fan_out))), Keras's default for kernels
    kHeUniform,      // U(±√(6 / fan_in)), for relu layers
    kRandomNormal,   // N(0, 0.05²), Keras's default stddev
    kRandomUniform,  // U(−0.05, 0.05)
    kZeros,          // Keras's default for biases
    kOnes,
  };
  Kind kind = Kind::kGlorotUniform;
};

// "glorot_uniform", "he_uniform", "random_normal", "random_uniform", "zeros", "ones".
StatusOr<Initializer> ParseInitializer(std::string_view name);
std::string InitializerName(const Initializer& initializer);

// A tensor of `shape` on `device`. Kernels are [fan_in, fan_out]; a bias [n] has fan_in = n.
StatusOr<Tensor> Initialize(const Initializer& initializer, const Shape& shape, uint64_t seed,
                            Device* device);

}  // namespace tower

#endif  // TOWER_MODEL_INITIALIZER_H_
