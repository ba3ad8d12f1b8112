#include "device/cuda/cuda_stream.h"

#include "device/cuda/cuda_status.h"

namespace tower {
namespace {

// Makes `waiter` wait for the work queued on `signaller` so far, without blocking the host.
Status StreamWait(cudaStream_t waiter, cudaStream_t signaller, int signaller_ordinal) {
  ScopedCudaDevice device(signaller_ordinal);
  TOWER_RETURN_IF_ERROR(device.status());
  cudaEvent_t event;
  const std::string where = "GPU " + std::to_string(signaller_ordinal);
  TOWER_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), where);
  cudaError_t error = cudaEventRecord(event, signaller);
  if (error == cudaSuccess) error = cudaStreamWaitEvent(waiter, event, 0);
  cudaEventDestroy(event);  // released once it has completed
  if (error != cudaSuccess) {
    return CudaError(error, "cudaEventRecord/cudaStreamWaitEvent", __FILE__, __LINE__, where);
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<CudaStream>> CudaStream::Create(int ordinal) {
  ScopedCudaDevice device(ordinal);
  TOWER_RETURN_IF_ERROR(device.status());
  cudaStream_t stream;
  TOWER_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "GPU " + std::to_string(ordinal));
  return std::unique_ptr<CudaStream>(new CudaStream(ordinal, stream));
}

CudaStream::~CudaStream() {
  ScopedCudaDevice device(ordinal_);
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
}

Status CudaStream::CopyFromHost(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return OkStatus();
  ScopedCudaDevice device(ordinal_);
  // From pageable memory cudaMemcpyAsync returns once the data is staged: the host buffer
  // may be reused at once, as the interface promises.
  TOWER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_), Where());
  return OkStatus();
}

Status CudaStream::CopyToHost(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return OkStatus();
  ScopedCudaDevice device(ordinal_);
  TOWER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_), Where());
  TOWER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), Where());
  return OkStatus();
}

Status CudaStream::CopyWithinDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return OkStatus();
  ScopedCudaDevice device(ordinal_);
  TOWER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), Where());
  return OkStatus();
}

Status CudaStream::CopyFromPeer(void* dst, DeviceStream& src_stream, const void* src,
                                size_t bytes) {
  if (bytes == 0) return OkStatus();
  if (src_stream.host_addressable()) return CopyFromHost(dst, src, bytes);
  auto& peer = static_cast<CudaStream&>(src_stream);
  // Order: the source's pending work, then the copy on this stream, then anything later on
  // the source stream (which may reuse `src` once it is freed).
  TOWER_RETURN_IF_ERROR(StreamWait(stream_, peer.stream_, peer.ordinal_));
  {
    ScopedCudaDevice device(ordinal_);
    TOWER_CUDA_RETURN_IF_ERROR(
        cudaMemcpyPeerAsync(dst, ordinal_, src, peer.ordinal_, bytes, stream_), Where());
  }
  return StreamWait(peer.stream_, stream_, ordinal_);
}

Status CudaStream::Zero(void* dst, size_t bytes) {
  if (bytes == 0) return OkStatus();
  ScopedCudaDevice device(ordinal_);
  TOWER_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, bytes, stream_), Where());
  return OkStatus();
}

Status CudaStream::Synchronize() {
  ScopedCudaDevice device(ordinal_);
  TOWER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), Where());
  return OkStatus();
}

}  // namespace tower
