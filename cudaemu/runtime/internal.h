// What the parts of the emulation (runtime, kernels, cuBLAS, NCCL) share: the calling
// thread's error state, devices and their primary contexts, streams as ordered queues of
// host work, and the registry of device allocations. Not for Tower: Tower sees only the
// CUDA API of cudaemu/include.
#ifndef CUDAEMU_RUNTIME_INTERNAL_H_
#define CUDAEMU_RUNTIME_INTERNAL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace cudaemu::internal {

// ---- errors ------------------------------------------------------------------------------
// Records `error` as the calling thread's last error (nothing for cudaSuccess) and returns
// it: every API entry point returns through this.
cudaError_t Record(cudaError_t error);

// ---- devices and contexts ------------------------------------------------------------------
// Visible devices (CUDAEMU_GPUS, then CUDA_VISIBLE_DEVICES), or the driver error
// (CUDAEMU_NO_DRIVER=1 → cudaErrorInsufficientDriver, zero GPUs → cudaErrorNoDevice).
cudaError_t DeviceCount(int* count);
// "GPU-xxxxxxxx-..." of visible device `device` (stable per host and physical index).
std::string DeviceUuid(int device);
// Makes sure `device`'s primary context exists (creating it counts, and reserves the
// context's memory) and returns its sticky error, if any. Does not change the current device.
cudaError_t EnsureContext(int device);
// The calling thread's current device with its context made ready (first use creates it,
// as any CUDA call that needs a context does), or the error.
cudaError_t CurrentContext(int* device);
// Makes `error` sticky on `device`'s context (a kernel fault): every later call that uses
// the context fails with it.
void SetSticky(int device, cudaError_t error);
cudaError_t Sticky(int device);

// ---- streams -------------------------------------------------------------------------------
// An in-order queue of work run by a thread of its own. Work is a host function returning
// cudaSuccess or a fault; a fault becomes the context's sticky error and the stream's later
// work is skipped. CUDAEMU_STREAM_DELAY_US=M delays every item by a random 0..M µs.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual int device() const = 0;
  // Enqueues `work` after everything enqueued before. `what` names it in diagnostics.
  virtual void Enqueue(std::string what, std::function<cudaError_t()> work) = 0;
  // The position of the last item enqueued so far (0 when none).
  virtual uint64_t Tail() = 0;
  // Blocks until every item up to `position` has run.
  virtual void WaitFor(uint64_t position) = 0;
  virtual bool Reached(uint64_t position) = 0;
};

// `handle` as a stream of `device`... nullptr (the legacy default stream) resolves to the
// default stream of the calling thread's current device. Unknown or destroyed handles give
// cudaErrorInvalidResourceHandle. The context of the stream's device is made ready.
cudaError_t ResolveStream(cudaStream_t handle, std::shared_ptr<Stream>* stream);

// ---- memory --------------------------------------------------------------------------------
// Device memory of `device` that counts against its capacity (cudaMemGetInfo) like
// cudaMalloc's; for library-internal buffers (cuBLAS's default workspace).
cudaError_t AllocateDevice(int device, size_t bytes, void** ptr);
cudaError_t FreeDevice(void* ptr);
// The device whose live allocation holds [ptr, ptr + bytes), or -1 (not device memory, or
// only partly inside one allocation: an overrun).
int DeviceOf(const void* ptr, size_t bytes);

// ---- environment ---------------------------------------------------------------------------
// Integer value of an environment variable, or `fallback` when unset or empty.
int64_t EnvInt(const char* name, int64_t fallback);
// The process's seed for every random choice of the emulation: CUDAEMU_SEED, or with
// CUDAEMU_SEED=random one drawn once and printed.
uint64_t EmulationSeed();

}  // namespace cudaemu::internal

#endif  // CUDAEMU_RUNTIME_INTERNAL_H_
