// How GPU tests skip on a machine without a GPU, and how a GPU job forbids it: with
// TOWER_REQUIRE_GPU=1 (tools/gpu_check.sh sets it) a test that would skip for want of a GPU
// fails instead, naming why the platform has none, so a GPU job cannot be green with
// nothing tested.
#ifndef TOWER_TESTS_TESTING_GPU_H_
#define TOWER_TESTS_TESTING_GPU_H_

#include <gtest/gtest.h>

#include "tests/testing/env_flag.h"

namespace tower::testing {

inline bool GpuRequired() { return EnvFlag("TOWER_REQUIRE_GPU"); }

}  // namespace tower::testing

// Skips the test (or fails it under TOWER_REQUIRE_GPU=1) with `why`: streamable text such as
// the GPU platform's status().
#define TOWER_SKIP_WITHOUT_GPU(why)                                                    \
  do {                                                                                 \
    if (::tower::testing::GpuRequired()) {                                             \
      GTEST_FAIL() << "TOWER_REQUIRE_GPU=1, but there is no usable GPU: " << why;     \
    } else {                                                                           \
      GTEST_SKIP() << why;                                                             \
    }                                                                                  \
  } while (0)

#endif  // TOWER_TESTS_TESTING_GPU_H_
