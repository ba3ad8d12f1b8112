// Whether a GPU test runs on cudaemu (--config=cudaemu: its cuda_runtime_api.h defines
// CUDAEMU) or on the real toolkit (--config=cuda), and how a case that needs the emulation
// skips on a real card. Such a case looks through the emulation's testing headers
// (cudaemu/testing.h, nccl_testing.h, cublas_testing.h: counts of contexts, copies through the
// host, host waits, kernel launches, communicators and cuBLAS handles; launches held on the
// device; injected faults), which the toolkit has no counterpart of, so its body is compiled
// only under the emulation:
//
//   TEST(Suite, Case) {
//   #ifdef CUDAEMU
//     ... cudaemu::testing::HostWaits() ...
//   #else
//     TOWER_SKIP_NEEDS_EMULATION("count of host waits (cudaemu::testing::HostWaits)");
//   #endif
//   }
//
// On a card it skips, naming what it needs, also under TOWER_REQUIRE_GPU=1 (the GPU is not
// what is missing); tools/gpu_bundle_run.sh lists such skips by name in its table.
#ifndef TOWER_TESTS_TESTING_EMULATION_H_
#define TOWER_TESTS_TESTING_EMULATION_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

namespace tower::testing {

#ifdef CUDAEMU
inline constexpr bool kEmulatedGpus = true;
#else
inline constexpr bool kEmulatedGpus = false;
#endif

}  // namespace tower::testing

// `what`: streamable text naming the emulation's facility the case needs.
#define TOWER_SKIP_NEEDS_EMULATION(what) \
  GTEST_SKIP() << "needs cudaemu's " << what << "; runs under --config=cudaemu"

#endif  // TOWER_TESTS_TESTING_EMULATION_H_
