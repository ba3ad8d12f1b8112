// Counts heap allocations (every operator new, and malloc / calloc / realloc /
// posix_memalign / aligned_alloc / memalign) made by any thread of the process while a
// CountAllocations is alive. Linking this library replaces the process's allocation entry
// points, so link it only into tests that count. Not under AddressSanitizer or
// ThreadSanitizer, which own malloc themselves: there `available()` is false and nothing is
// counted (tests skip).
#ifndef TOWER_TESTS_TESTING_ALLOCATION_COUNTER_H_
#define TOWER_TESTS_TESTING_ALLOCATION_COUNTER_H_

#include <cstdint>

namespace tower::testing {

class CountAllocations {
 public:
  CountAllocations();
  ~CountAllocations();
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;

  // Allocations since construction.
  int64_t count() const;
  // Whether this build can count (false under sanitizers).
  static bool available();
};

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_ALLOCATION_COUNTER_H_
