// A switch a test reads from its environment (TOWER_REQUIRE_GPU, TOWER_REQUIRE_ROOT,
// TOWER_REDUCED_ROUND): on when the variable is exactly "1", off when unset or anything else.
#ifndef TOWER_TESTS_TESTING_ENV_FLAG_H_
#define TOWER_TESTS_TESTING_ENV_FLAG_H_

#include <cstdlib>
#include <cstring>

namespace tower::testing {

inline bool EnvFlag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_ENV_FLAG_H_
