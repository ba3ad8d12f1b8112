// A logical GPU's CUDA stream (non-blocking), and its copies.
#ifndef TOWER_DEVICE_CUDA_CUDA_STREAM_H_
#define TOWER_DEVICE_CUDA_CUDA_STREAM_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "device/stream.h"
#include "util/statusor.h"

namespace tower {

class CudaStream : public DeviceStream {
 public:
  static StatusOr<std::unique_ptr<CudaStream>> Create(int ordinal);
  ~CudaStream() override;

  bool host_addressable() const override { return false; }
  Status CopyFromHost(void* device_dst, const void* host_src, size_t bytes) override;
  Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) override;
  Status CopyWithinDevice(void* dst, const void* src, size_t bytes) override;
  Status CopyFromPeer(void* dst, DeviceStream& src_stream, const void* src,
                      size_t bytes) override;
  Status Zero(void* dst, size_t bytes) override;
  Status Synchronize() override;
  void* native_handle() const override { return stream_; }

  int ordinal() const { return ordinal_; }
  cudaStream_t stream() const { return stream_; }

 private:
  CudaStream(int ordinal, cudaStream_t stream) : ordinal_(ordinal), stream_(stream) {}
  std::string Where() const { return "GPU " + std::to_string(ordinal_); }

  const int ordinal_;
  const cudaStream_t stream_;
};

}  // namespace tower

#endif  // TOWER_DEVICE_CUDA_CUDA_STREAM_H_
