// One reduced round of a long end-to-end test. CI's sanitizer stages set TOWER_REDUCED_ROUND=1
// (.ci/stages.py): such a test keeps every case and every code path, but repeats a path on
// fewer topologies, layouts or rounds, and its own comment says which it keeps. Every other
// run — `./bazelw test //...`, CI's plain, emulated and shaken stages — runs them all. The
// table of where each test runs (docs/CI_TESTS.md) names the tests that read it.
#ifndef TOWER_TESTS_TESTING_REDUCED_ROUND_H_
#define TOWER_TESTS_TESTING_REDUCED_ROUND_H_

#include "tests/testing/env_flag.h"

namespace tower::testing {

inline bool ReducedRound() { return EnvFlag("TOWER_REDUCED_ROUND"); }

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_REDUCED_ROUND_H_
