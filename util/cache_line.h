// Laying out data that different threads write, so that they do not share cache lines.
//
// A cache line written by one core and read or written by another moves between their
// caches on every such write ("false sharing" when the two touch different fields of it).
// On the hosts this project is measured on a move costs 0.1-0.3 µs, against a 2.4 µs
// `linreg` step: replicas that run in step on different cores pay it for every line they
// both touch (docs/BENCHMARKS.md, "False sharing in a 2-replica step").
#ifndef TOWER_UTIL_CACHE_LINE_H_
#define TOWER_UTIL_CACHE_LINE_H_

#include <cstddef>

namespace tower {

// x86-64's line (std::hardware_destructive_interference_size where the library has it).
inline constexpr size_t kCacheLineBytes = 64;

// A T alone on its cache lines: aligned to a line and padded to whole lines, as a member,
// a global or an array element (heap objects too: C++17's new honours the alignment).
template <typename T>
struct alignas(kCacheLineBytes) CacheLinePadded {
  T value{};
};

}  // namespace tower

#endif  // TOWER_UTIL_CACHE_LINE_H_
