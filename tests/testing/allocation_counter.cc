#include "tests/testing/allocation_counter.h"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define TOWER_ALLOCATION_COUNTER_OFF 1
#endif
#endif

namespace {
std::atomic<int> counters{0};  // live CountAllocations
std::atomic<int64_t> allocations{0};

inline void Count() {
  if (counters.load(std::memory_order_relaxed) > 0) {
    allocations.fetch_add(1, std::memory_order_relaxed);
  }
}
}  // namespace

#ifndef TOWER_ALLOCATION_COUNTER_OFF
// glibc's own entry points, under the names it exports for exactly this use.
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);

void* malloc(size_t size) {
  Count();
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) {
  Count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) {
  Count();
  return __libc_realloc(p, size);
}
void* memalign(size_t alignment, size_t size) {
  Count();
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  Count();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  Count();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr && size != 0) return ENOMEM;
  *out = p;
  return 0;
}
}  // extern "C"
// operator new (every form) goes through malloc / aligned allocation in libstdc++, so it is
// counted there.
#endif

namespace tower::testing {

CountAllocations::CountAllocations() {
  allocations.store(0, std::memory_order_relaxed);
  counters.fetch_add(1, std::memory_order_seq_cst);
}

CountAllocations::~CountAllocations() { counters.fetch_sub(1, std::memory_order_seq_cst); }

int64_t CountAllocations::count() const { return allocations.load(std::memory_order_relaxed); }

bool CountAllocations::available() {
#ifdef TOWER_ALLOCATION_COUNTER_OFF
  return false;
#else
  return true;
#endif
}

}  // namespace tower::testing
