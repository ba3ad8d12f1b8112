// One reduced round of a long end-to-end test. CI's sanitizer stages set TOWER_REDUCED_ROUND=1
// (.ci/stages.py): such a test keeps every case and every code path, but repeats a path on
// fewer topologies, layouts or rounds, and its own comment says which it keeps. Every other
// run — `./bazelw test //...`, CI's plain, emulated and shaken stages — runs them all. The
// table of where each test runs (docs/CI_TESTS.md) names the tests that read it.
#ifndef TOWER_TESTS_TESTING_REDUCED_ROUND_H_
#define TOWER_TESTS_TESTING_REDUCED_ROUND_H_

#include <cstdlib>
#include <cstring>

namespace tower::testing {

inline bool ReducedRound() {
  const char* reduced = std::getenv("TOWER_REDUCED_ROUND");
  return reduced != nullptr && std::strcmp(reduced, "1") == 0;
}

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_REDUCED_ROUND_H_
