#include "model/initializer.h"

#include <cmath>

#include "ops/array_ops.h"
#include "ops/random_ops.h"

namespace tower {
namespace {

struct Named {
  const char* name;
  Initializer::Kind kind;
};
constexpr Named kNames[] = {
    {"glorot_uniform", Initializer::Kind::kGlorotUniform},
    {"he_uniform", Initializer::Kind::kHeUniform},
    {"random_normal", Initializer::Kind::kRandomNormal},
    {"random_uniform", Initializer::Kind::kRandomUniform},
    {"zeros", Initializer::Kind::kZeros},
    {"ones", Initializer::Kind::kOnes},
};

}  // namespace

StatusOr<Initializer> ParseInitializer(std::string_view name) {
  for (const Named& named : kNames) {
    if (name == named.name) return Initializer{named.kind};
  }
  return InvalidArgumentError("unknown initializer '" + std::string(name) +
                              "'; use glorot_uniform, he_uniform, random_normal, "
                              "random_uniform, zeros or ones");
}

std::string InitializerName(const Initializer& initializer) {
  for (const Named& named : kNames) {
    if (named.kind == initializer.kind) return named.name;
  }
  return "?";
}

StatusOr<Tensor> Initialize(const Initializer& initializer, const Shape& shape, uint64_t seed,
                            Device* device) {
  const int64_t fan_in = shape.rank() >= 1 ? shape.dim(0) : 1;
  const int64_t fan_out = shape.rank() >= 2 ? shape.dim(1) : fan_in;
  switch (initializer.kind) {
    case Initializer::Kind::kGlorotUniform: {
      const double limit = fan_in + fan_out > 0 ? std::sqrt(6.0 / (fan_in + fan_out)) : 0.0;
      return ops::RandomUniform(shape, static_cast<float>(-limit), static_cast<float>(limit),
                                seed, device);
    }
    case Initializer::Kind::kHeUniform: {
      const double limit = fan_in > 0 ? std::sqrt(6.0 / fan_in) : 0.0;
      return ops::RandomUniform(shape, static_cast<float>(-limit), static_cast<float>(limit),
                                seed, device);
    }
    case Initializer::Kind::kRandomNormal:
      return ops::RandomNormal(shape, 0.0f, 0.05f, seed, device);
    case Initializer::Kind::kRandomUniform:
      return ops::RandomUniform(shape, -0.05f, 0.05f, seed, device);
    case Initializer::Kind::kZeros:
      return ops::Fill(shape, 0.0f, device);
    case Initializer::Kind::kOnes:
      return ops::Fill(shape, 1.0f, device);
  }
  return InternalError("unhandled initializer");
}

}  // namespace tower
