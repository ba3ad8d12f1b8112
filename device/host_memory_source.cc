#include "device/host_memory_source.h"

#include <cstdlib>

#include "util/strings.h"

namespace tower {

StatusOr<void*> HostMemorySource::Allocate(size_t bytes) {
  // aligned_alloc wants a multiple of the alignment; allocators only ask for such sizes,
  // but round anyway so a direct caller cannot trigger undefined behaviour.
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* region = std::aligned_alloc(kAlignment, rounded);
  if (region == nullptr) {
    return ResourceExhaustedError("the system could not provide " + BytesWithExact(rounded) +
                                  " of host memory");
  }
  return region;
}

void HostMemorySource::Free(void* region, size_t /*bytes*/) { std::free(region); }

}  // namespace tower
