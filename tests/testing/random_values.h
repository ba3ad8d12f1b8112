// Reproducible operands for the kernel tests: `n` floats drawn uniformly from [-1, 1) by a
// Mersenne twister seeded with `seed`.
#ifndef TOWER_TESTS_TESTING_RANDOM_VALUES_H_
#define TOWER_TESTS_TESTING_RANDOM_VALUES_H_

#include <cstdint>
#include <random>
#include <vector>

namespace tower::testing {

inline std::vector<float> UniformValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& x : values) x = uniform(rng);
  return values;
}

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_RANDOM_VALUES_H_
