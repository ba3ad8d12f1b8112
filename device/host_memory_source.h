// Aligned host memory for logical CPU devices.
#ifndef TOWER_DEVICE_HOST_MEMORY_SOURCE_H_
#define TOWER_DEVICE_HOST_MEMORY_SOURCE_H_

#include "device/memory_source.h"

namespace tower {

class HostMemorySource : public MemorySource {
 public:
  StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* region, size_t bytes) override;
  std::string Describe() const override { return "host memory"; }
};

}  // namespace tower

#endif  // TOWER_DEVICE_HOST_MEMORY_SOURCE_H_
