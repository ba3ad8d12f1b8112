// MemorySource: where an allocator's regions come from (aligned host memory, cudaMalloc).
//
// The allocator algorithm (device/bfc_allocator.h) is kept apart from the memory it
// manages, as TensorFlow keeps BFCAllocator apart from its SubAllocator: the same best-fit
// code serves logical CPUs and logical GPUs, and tests can use a source that fails on cue.
#ifndef TOWER_DEVICE_MEMORY_SOURCE_H_
#define TOWER_DEVICE_MEMORY_SOURCE_H_

#include <cstddef>
#include <string>

#include "util/statusor.h"

namespace tower {

class MemorySource {
 public:
  // Every region a source returns is aligned to at least this many bytes.
  static constexpr size_t kAlignment = 256;

  virtual ~MemorySource() = default;

  // A region of exactly `bytes` bytes (> 0), or ResourceExhausted with the reason
  // (e.g. cudaMalloc's own message).
  virtual StatusOr<void*> Allocate(size_t bytes) = 0;
  // Returns a region obtained from Allocate, with the size it was allocated with.
  virtual void Free(void* region, size_t bytes) = 0;
  // For messages: "host memory", "cudaMalloc on GPU 0 (NVIDIA H100)".
  virtual std::string Describe() const = 0;
};

}  // namespace tower

#endif  // TOWER_DEVICE_MEMORY_SOURCE_H_
