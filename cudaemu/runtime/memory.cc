// Device memory as tracked host memory. Every allocation is its own heap block of exactly
// the requested size, so AddressSanitizer catches a kernel that reads or writes past it,
// and a freed one is really freed (use after cudaFree is caught too). Copies check their
// pointers: a device range must lie inside one live allocation (an overrun or a freed or
// unknown pointer is cudaErrorInvalidValue), and an explicit copy kind must match what the
// pointers are (cudaErrorInvalidMemcpyDirection otherwise).
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "cudaemu/runtime/core.h"
#include "cudaemu/testing.h"

namespace cudaemu::internal {
namespace {

constexpr uint64_t kFillLimit = uint64_t{16} << 20;

struct Allocation {
  size_t bytes = 0;
  int device = -1;  // -1: pinned host memory (cudaMallocHost)
};

struct Heap {
  std::mutex mu;
  std::map<uintptr_t, Allocation> allocations;  // by base address
  std::atomic<int64_t> malloc_calls{0};
  std::atomic<int64_t> fail_at{0};  // the malloc_calls value that fails; 0: none
  std::atomic<int64_t> staged_peer{0};
  std::atomic<int64_t> pageable_async{0};
};

Heap& GetHeap() {
  static Heap* const heap = [] {
    auto* h = new Heap();
    const int64_t nth = EnvInt("CUDAEMU_OOM_AT", 0);
    if (nth > 0) h->fail_at = nth;
    return h;
  }();
  return *heap;
}

enum class Kind { kDevice, kOverrun, kPinned, kPageable };

struct Where {
  Kind kind = Kind::kPageable;
  int device = -1;
};

// What [ptr, ptr + bytes) is.
Where Classify(const void* ptr, size_t bytes) {
  Heap& heap = GetHeap();
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(heap.mu);
  auto it = heap.allocations.upper_bound(address);
  if (it == heap.allocations.begin()) return {};
  --it;
  const uintptr_t base = it->first;
  const Allocation& allocation = it->second;
  if (address >= base + allocation.bytes && !(allocation.bytes == 0 && address == base)) {
    return {};
  }
  const bool inside = address + bytes <= base + allocation.bytes;
  if (allocation.device < 0) return {inside ? Kind::kPinned : Kind::kOverrun, -1};
  return {inside ? Kind::kDevice : Kind::kOverrun, allocation.device};
}

void* HostBlock(size_t bytes) {
  void* ptr = nullptr;
  if (posix_memalign(&ptr, 256, bytes == 0 ? 1 : bytes) != 0) return nullptr;
  // Fresh device memory is garbage on a GPU: NaN bytes make reads of it visible.
  if (bytes <= kFillLimit) std::memset(ptr, 0xff, bytes);
  return ptr;
}

cudaError_t Register(void* ptr, size_t bytes, int device) {
  Heap& heap = GetHeap();
  std::lock_guard<std::mutex> lock(heap.mu);
  heap.allocations[reinterpret_cast<uintptr_t>(ptr)] = Allocation{bytes, device};
  return cudaSuccess;
}

// Removes the allocation at exactly `ptr`; false when there is none of that kind.
bool Unregister(void* ptr, bool device_memory, Allocation* removed) {
  Heap& heap = GetHeap();
  std::lock_guard<std::mutex> lock(heap.mu);
  auto it = heap.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == heap.allocations.end() || (it->second.device >= 0) != device_memory) return false;
  *removed = it->second;
  heap.allocations.erase(it);
  return true;
}

// Checks a copy's pointers against its kind; on success says where each side is.
cudaError_t CheckCopy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, Where* to,
                      Where* from) {
  *to = Classify(dst, bytes);
  *from = Classify(src, bytes);
  if (to->kind == Kind::kOverrun || from->kind == Kind::kOverrun) return cudaErrorInvalidValue;
  const bool dst_device = to->kind == Kind::kDevice;
  const bool src_device = from->kind == Kind::kDevice;
  switch (kind) {
    case cudaMemcpyHostToHost:
      return dst_device || src_device ? cudaErrorInvalidMemcpyDirection : cudaSuccess;
    case cudaMemcpyHostToDevice:
      if (!dst_device) return cudaErrorInvalidValue;
      return src_device ? cudaErrorInvalidMemcpyDirection : cudaSuccess;
    case cudaMemcpyDeviceToHost:
      if (!src_device) return cudaErrorInvalidValue;
      return dst_device ? cudaErrorInvalidMemcpyDirection : cudaSuccess;
    case cudaMemcpyDeviceToDevice:
      return dst_device && src_device ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDefault:
      return cudaSuccess;
  }
  return cudaErrorInvalidMemcpyDirection;
}

// Enqueues the copy on `stream`. Pageable host sources are staged at once (the caller may
// reuse them when the call returns); copies into pageable host memory complete before the
// call returns, as CUDA documents for cudaMemcpyAsync.
cudaError_t EnqueueCopy(void* dst, const void* src, size_t bytes, const Where& to,
                        const Where& from, const std::shared_ptr<Stream>& stream,
                        bool wait) {
  Heap& heap = GetHeap();
  const bool src_host = from.kind != Kind::kDevice;
  const bool dst_host = to.kind != Kind::kDevice;
  if (src_host && !dst_host && from.kind == Kind::kPageable) {
    if (!wait) ++heap.pageable_async;
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
    stream->Enqueue("cudaMemcpy host to device", [dst, staged] {
      std::memcpy(dst, staged->data(), staged->size());
      return cudaSuccess;
    });
  } else {
    stream->Enqueue("cudaMemcpy", [dst, src, bytes] {
      std::memmove(dst, src, bytes);
      return cudaSuccess;
    });
  }
  if (dst_host && to.kind == Kind::kPageable && !src_host && !wait) {
    ++heap.pageable_async;
    wait = true;
  }
  if (wait) {
    CountHostWait();
    stream->WaitFor(stream->Tail());
  }
  return Sticky(stream->device());
}

cudaError_t Memcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                   cudaStream_t handle, bool wait) {
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  std::shared_ptr<Stream> stream;
  cudaError_t error = ResolveStream(handle, &stream);
  if (error != cudaSuccess) return error;
  Where to, from;
  error = CheckCopy(dst, src, bytes, kind, &to, &from);
  if (error != cudaSuccess) return error;
  return EnqueueCopy(dst, src, bytes, to, from, stream, wait);
}

cudaError_t Memset(void* ptr, int value, size_t bytes, cudaStream_t handle, bool wait) {
  if (bytes == 0) return cudaSuccess;
  std::shared_ptr<Stream> stream;
  const cudaError_t error = ResolveStream(handle, &stream);
  if (error != cudaSuccess) return error;
  if (Classify(ptr, bytes).kind != Kind::kDevice) return cudaErrorInvalidValue;
  stream->Enqueue("cudaMemset", [ptr, value, bytes] {
    std::memset(ptr, value, bytes);
    return cudaSuccess;
  });
  if (wait) {
    CountHostWait();
    stream->WaitFor(stream->Tail());
  }
  return Sticky(stream->device());
}

}  // namespace

cudaError_t AllocateDevice(int device, size_t bytes, void** ptr) {
  DeviceState* state = Device(device);
  if (state == nullptr) return cudaErrorInvalidDevice;
  const uint64_t used = state->bytes_in_use.load() + state->context_bytes;
  if (used + bytes > state->total_bytes) return cudaErrorMemoryAllocation;
  void* block = HostBlock(bytes);
  if (block == nullptr) return cudaErrorMemoryAllocation;
  state->bytes_in_use += bytes;
  Register(block, bytes, device);
  *ptr = block;
  return cudaSuccess;
}

cudaError_t FreeDevice(void* ptr) {
  Allocation removed;
  if (!Unregister(ptr, /*device_memory=*/true, &removed)) return cudaErrorInvalidValue;
  Device(removed.device)->bytes_in_use -= removed.bytes;
  std::free(ptr);
  return cudaSuccess;
}

int DeviceOf(const void* ptr, size_t bytes) {
  const Where where = Classify(ptr, bytes);
  return where.kind == Kind::kDevice ? where.device : -1;
}

}  // namespace cudaemu::internal

namespace cudaemu::testing {
using internal::GetHeap;
uint64_t DeviceBytesInUse(int device) {
  internal::DeviceState* state = internal::Device(device);
  return state == nullptr ? 0 : state->bytes_in_use.load();
}
int64_t LiveAllocations(int device) {
  internal::DeviceState* state = internal::Device(device);
  return state == nullptr ? 0 : state->live_allocations.load();
}
int64_t StagedPeerCopies() { return GetHeap().staged_peer.load(); }
int64_t PageableAsyncCopies() { return GetHeap().pageable_async.load(); }
void FailAllocation(int64_t nth) { GetHeap().fail_at = GetHeap().malloc_calls.load() + nth; }
}  // namespace cudaemu::testing

using namespace cudaemu::internal;  // NOLINT: the C API below is the runtime's surface

extern "C" {

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (ptr == nullptr) return Record(cudaErrorInvalidValue);
  int device = 0;
  const cudaError_t error = CurrentContext(&device);
  if (error != cudaSuccess) return Record(error);
  Heap& heap = GetHeap();
  const int64_t call = ++heap.malloc_calls;
  if (call == heap.fail_at.load()) return Record(cudaErrorMemoryAllocation);
  if (bytes == 0) {
    *ptr = nullptr;
    return cudaSuccess;
  }
  const cudaError_t allocated = AllocateDevice(device, bytes, ptr);
  if (allocated != cudaSuccess) return Record(allocated);
  ++Device(device)->live_allocations;
  return cudaSuccess;
}

// Synchronises the device first, as cudaFree does: the memory may still be in use by work
// queued on its streams.
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  int current = 0;
  const cudaError_t error = CurrentContext(&current);
  if (error != cudaSuccess) return Record(error);
  const int device = DeviceOf(ptr, 0);
  if (device < 0) return Record(cudaErrorInvalidValue);
  SynchronizeDevice(device);
  const cudaError_t freed = FreeDevice(ptr);
  if (freed != cudaSuccess) return Record(freed);
  --Device(device)->live_allocations;
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int flags) {
  if (ptr == nullptr) return Record(cudaErrorInvalidValue);
  int device = 0;
  const cudaError_t error = CurrentContext(&device);
  if (error != cudaSuccess) return Record(error);
  void* block = HostBlock(bytes);
  if (block == nullptr) return Record(cudaErrorMemoryAllocation);
  Register(block, bytes, -1);
  *ptr = block;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  Allocation removed;
  if (!Unregister(ptr, /*device_memory=*/false, &removed)) return Record(cudaErrorInvalidValue);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return Record(Memcpy(dst, src, bytes, kind, nullptr, /*wait=*/true));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return Record(Memcpy(dst, src, bytes, kind, stream, /*wait=*/false));
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                                size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  std::shared_ptr<Stream> impl;
  const cudaError_t error = ResolveStream(stream, &impl);
  if (error != cudaSuccess) return Record(error);
  if (Device(dst_device) == nullptr || Device(src_device) == nullptr) {
    return Record(cudaErrorInvalidDevice);
  }
  if (DeviceOf(dst, bytes) != dst_device || DeviceOf(src, bytes) != src_device) {
    return Record(cudaErrorInvalidValue);
  }
  // Without peer access (either direction) the driver stages the copy through host memory.
  if (dst_device != src_device && !PeerAccessEnabled(dst_device, src_device) &&
      !PeerAccessEnabled(src_device, dst_device)) {
    ++GetHeap().staged_peer;
  }
  impl->Enqueue("cudaMemcpyPeerAsync", [dst, src, bytes] {
    std::memcpy(dst, src, bytes);
    return cudaSuccess;
  });
  return Record(Sticky(impl->device()));
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  return Record(Memset(ptr, value, bytes, nullptr, /*wait=*/true));
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  return Record(Memset(ptr, value, bytes, stream, /*wait=*/false));
}

// Destroys the current device's primary context: waits for its work, frees its
// allocations and clears its sticky error.
cudaError_t cudaDeviceReset(void) {
  int device = 0;
  int count = 0;
  const cudaError_t driver = DeviceCount(&count);
  if (driver != cudaSuccess) return Record(driver);
  cudaGetDevice(&device);
  DeviceState* state = Device(device);
  SynchronizeDevice(device);
  std::vector<void*> blocks;
  {
    Heap& heap = GetHeap();
    std::lock_guard<std::mutex> lock(heap.mu);
    for (auto it = heap.allocations.begin(); it != heap.allocations.end();) {
      if (it->second.device == device) {
        state->bytes_in_use -= it->second.bytes;
        blocks.push_back(reinterpret_cast<void*>(it->first));
        it = heap.allocations.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (void* block : blocks) std::free(block);
  state->live_allocations = 0;
  state->sticky = cudaSuccess;
  std::lock_guard<std::mutex> lock(state->mu);
  state->context_alive = false;
  return cudaSuccess;
}

}  // extern "C"
