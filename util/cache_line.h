// Laying out data that different threads write, so that they do not share cache lines.
//
// A cache line written by one core and read or written by another moves between their
// caches on every such write ("false sharing" when the two touch different fields of it).
// On the host this project is measured on a move costs 0.06-0.3 µs (half the cross-core
// round trips of 124-590 ns that allreduce_bench measures), against a 2.4 µs `linreg`
// step: replicas that run in step on different cores pay it for every line they both touch
// (docs/BENCHMARKS.md, "False sharing in a 2-replica step").
#ifndef TOWER_UTIL_CACHE_LINE_H_
#define TOWER_UTIL_CACHE_LINE_H_

#include <cstddef>
#include <new>

namespace tower {

// x86-64's line (std::hardware_destructive_interference_size where the library has it).
inline constexpr size_t kCacheLineBytes = 64;

// A T alone on its cache lines: aligned to a line and padded to whole lines, as a member,
// a global or an array element (heap objects too: C++17's new honours the alignment).
template <typename T>
struct alignas(kCacheLineBytes) CacheLinePadded {
  T value{};
};

// A standard allocator of whole cache lines: what it allocates shares no line with any
// other memory (for std::allocate_shared records, e.g. a replica's own reference counts).
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT: rebinding, as allocators do
  T* allocate(size_t n) {
    const size_t lines = (n * sizeof(T) + kCacheLineBytes - 1) / kCacheLineBytes;
    const size_t bytes = lines * kCacheLineBytes;
    return static_cast<T*>(::operator new(bytes, std::align_val_t(kCacheLineBytes)));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(kCacheLineBytes)); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};

}  // namespace tower

#endif  // TOWER_UTIL_CACHE_LINE_H_
