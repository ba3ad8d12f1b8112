// Bitwise equality of two float vectors, for tests that promise the same bits (a NaN equals a
// NaN of the same payload; -0 differs from +0). Empty vectors compare without memcmp, whose
// pointers must not be null even for 0 bytes.
#ifndef TOWER_TESTS_TESTING_SAME_BITS_H_
#define TOWER_TESTS_TESTING_SAME_BITS_H_

#include <cstring>
#include <vector>

namespace tower::testing {

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_SAME_BITS_H_
