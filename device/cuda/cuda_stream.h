// A logical GPU's CUDA stream (non-blocking), and its copies.
#ifndef TOWER_DEVICE_CUDA_CUDA_STREAM_H_
#define TOWER_DEVICE_CUDA_CUDA_STREAM_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <string>

#include "device/cuda/stream_tracer.h"
#include "device/stream.h"
#include "util/statusor.h"

namespace tower {

class CudaStream : public DeviceStream {
 public:
  static StatusOr<std::unique_ptr<CudaStream>> Create(int ordinal);
  ~CudaStream() override;

  bool host_addressable() const override { return false; }
  // Through a pinned staging buffer: the copy is queued without waiting, and the host buffer
  // may be reused at once (from pageable memory the runtime would copy synchronously).
  Status CopyFromHost(void* device_dst, const void* host_src, size_t bytes) override;
  Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) override;
  Status CopyWithinDevice(void* dst, const void* src, size_t bytes) override;
  // GPU to GPU directly where peer access can be enabled (once per pair of cards), instead of
  // through host memory.
  Status CopyFromPeer(void* dst, DeviceStream& src_stream, const void* src,
                      size_t bytes) override;
  Status Zero(void* dst, size_t bytes) override;
  Status Synchronize() override;
  // Into a small pinned buffer behind an event: FinishRead waits on that event, not on the
  // stream.
  Status StartRead(const void* device_src, size_t bytes) override;
  Status FinishRead(void* host_dst) override;
  void* native_handle() const override { return stream_; }
  void BeginTracedWork() override;
  void EndTracedWork(const char* name) override;

  int ordinal() const { return ordinal_; }
  cudaStream_t stream() const { return stream_; }

 private:
  // Pinned host memory for uploads, in two halves used in turn; an event per half says when
  // the copy that last read it is done.
  static constexpr size_t kStagingBytes = size_t{8} << 20;

  CudaStream(int ordinal, cudaStream_t stream, cudaEvent_t signal)
      : ordinal_(ordinal), stream_(stream), signal_(signal) {}
  std::string Where() const { return "GPU " + std::to_string(ordinal_); }
  // Makes `waiter`'s later work wait for the work queued on this stream so far.
  Status SignalTo(cudaStream_t waiter);
  Status EnsureStaging();
  // StartRead's copy into read_buffer_ and its event, made on the first read.
  Status QueueRead(const void* device_src, size_t bytes);

  const int ordinal_;
  const cudaStream_t stream_;
  const cudaEvent_t signal_;  // re-recorded by SignalTo (a wait takes the state at the call)
  std::mutex staging_mu_;     // uploads from several threads take turns on the buffer
  char* staging_ = nullptr;
  cudaEvent_t staging_free_[2] = {nullptr, nullptr};
  int next_half_ = 0;
  // StartRead / FinishRead: pinned, made on the first read.
  unsigned char* read_buffer_ = nullptr;  // [kMaxEarlyReadBytes]
  cudaEvent_t read_done_ = nullptr;
  EarlyRead reading_;
  StreamTracer tracer_;  // only used while a trace records
};

}  // namespace tower

#endif  // TOWER_DEVICE_CUDA_CUDA_STREAM_H_
