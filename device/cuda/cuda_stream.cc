#include "device/cuda/cuda_stream.h"

#include "util/trace.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "device/cuda/cuda_status.h"

namespace tower {
namespace {

// Enables direct access from `device`'s copies to `peer`'s memory, once per pair in the
// process (cudaDeviceEnablePeerAccess is per context and fails when repeated). Without it
// cudaMemcpyPeerAsync stages through host memory. Unsupported pairs stay staged.
void EnablePeerAccessOnce(int device, int peer) {
  static std::mutex mu;
  static std::set<std::pair<int, int>>* const tried = new std::set<std::pair<int, int>>();
  std::lock_guard<std::mutex> lock(mu);
  if (device == peer || !tried->insert({device, peer}).second) return;
  int can_access = 0;
  const cudaError_t asked = cudaDeviceCanAccessPeer(&can_access, device, peer);
  IgnoreCudaError(asked);
  if (asked != cudaSuccess || !can_access) return;
  ScopedCudaDevice current(device);
  // Already enabled (by the user's own code) is as good; any other failure leaves it staged.
  IgnoreCudaError(cudaDeviceEnablePeerAccess(peer, 0));
}

}  // namespace

StatusOr<std::unique_ptr<CudaStream>> CudaStream::Create(int ordinal) {
  ScopedCudaDevice device(ordinal);
  TOWER_RETURN_IF_ERROR(device.status());
  const std::string where = "GPU " + std::to_string(ordinal);
  cudaStream_t stream;
  TOWER_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), where);
  cudaEvent_t signal;
  const cudaError_t made = cudaEventCreateWithFlags(&signal, cudaEventDisableTiming);
  if (made != cudaSuccess) {
    IgnoreCudaError(cudaStreamDestroy(stream));
    return CudaError(made, "cudaEventCreateWithFlags", __FILE__, __LINE__, where);
  }
  return std::unique_ptr<CudaStream>(new CudaStream(ordinal, stream, signal));
}

CudaStream::~CudaStream() {
  ScopedCudaDevice device(ordinal_);
  IgnoreCudaError(cudaStreamSynchronize(stream_));
  IgnoreCudaError(cudaEventDestroy(signal_));
  for (cudaEvent_t event : staging_free_) {
    if (event != nullptr) IgnoreCudaError(cudaEventDestroy(event));
  }
  if (staging_ != nullptr) IgnoreCudaError(cudaFreeHost(staging_));
  if (read_done_ != nullptr) IgnoreCudaError(cudaEventDestroy(read_done_));
  if (read_buffer_ != nullptr) IgnoreCudaError(cudaFreeHost(read_buffer_));
  IgnoreCudaError(cudaStreamDestroy(stream_));
}

Status CudaStream::SignalTo(cudaStream_t waiter) {
  ScopedCudaDevice device(ordinal_);
  TOWER_RETURN_IF_ERROR(device.status());
  TOWER_CUDA_RETURN_IF_ERROR(cudaEventRecord(signal_, stream_), Where());
  TOWER_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(waiter, signal_, 0), Where());
  return OkStatus();
}

Status CudaStream::EnsureStaging() {
  if (staging_ != nullptr) return OkStatus();
  void* buffer = nullptr;
  TOWER_CUDA_RETURN_IF_ERROR(cudaMallocHost(&buffer, kStagingBytes), Where());
  staging_ = static_cast<char*>(buffer);
  for (cudaEvent_t& event : staging_free_) {
    TOWER_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                               Where());
  }
  return OkStatus();
}

Status CudaStream::CopyFromHost(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return OkStatus();
  ScopedCudaDevice device(ordinal_);
  TOWER_RETURN_IF_ERROR(device.status());
  std::lock_guard<std::mutex> lock(staging_mu_);
  TOWER_RETURN_IF_ERROR(EnsureStaging());
  constexpr size_t kHalf = kStagingBytes / 2;
  const auto* src = static_cast<const char*>(host_src);
  auto* dst = static_cast<char*>(device_dst);
  for (size_t done = 0; done < bytes;) {
    const size_t chunk = std::min(kHalf, bytes - done);
    const int half = next_half_;
    next_half_ = 1 - next_half_;
    // The copy that last read this half must be done before it is overwritten.
    TOWER_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging_free_[half]), Where());
    char* staged = staging_ + half * kHalf;
    std::memcpy(staged, src + done, chunk);
    TOWER_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst + done, staged, chunk, cudaMemcpyHostToDevice, stream_), Where());
    TOWER_CUDA_RETURN_IF_ERROR(cudaEventRecord(staging_free_[half], stream_), Where());
    done += chunk;
  }
  return OkStatus();
}

Status CudaStream::CopyToHost(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return OkStatus();
  ScopedCudaDevice device(ordinal_);
  TOWER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_), Where());
  TOWER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), Where());
  if (trace::Recording()) tracer_.Flush(/*all=*/true);
  return OkStatus();
}

Status CudaStream::StartRead(const void* device_src, size_t bytes) {
  TOWER_RETURN_IF_ERROR(reading_.Start(bytes));
  const Status queued = QueueRead(device_src, bytes);
  if (!queued.ok()) reading_ = EarlyRead();  // nothing queued: nothing to finish
  return queued;
}

Status CudaStream::QueueRead(const void* device_src, size_t bytes) {
  ScopedCudaDevice device(ordinal_);
  TOWER_RETURN_IF_ERROR(device.status());
  if (read_buffer_ == nullptr) {
    void* buffer = nullptr;
    TOWER_CUDA_RETURN_IF_ERROR(cudaMallocHost(&buffer, kMaxEarlyReadBytes), Where());
    read_buffer_ = static_cast<unsigned char*>(buffer);
  }
  if (read_done_ == nullptr) {
    TOWER_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&read_done_, cudaEventDisableTiming),
                               Where());
  }
  // A read dropped unfinished may still be writing the buffer: this copy is queued after it.
  TOWER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(read_buffer_, device_src, bytes, cudaMemcpyDeviceToHost, stream_),
      Where());
  TOWER_CUDA_RETURN_IF_ERROR(cudaEventRecord(read_done_, stream_), Where());
  return OkStatus();
}

Status CudaStream::FinishRead(void* host_dst) {
  size_t bytes = 0;
  TOWER_RETURN_IF_ERROR(reading_.Finish(&bytes));
  ScopedCudaDevice device(ordinal_);
  TOWER_RETURN_IF_ERROR(device.status());
  TOWER_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(read_done_), Where());
  std::memcpy(host_dst, read_buffer_, bytes);
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
  EnablePeerAccessOnce(ordinal_, peer.ordinal_);
  // Order: the source's pending work, then the copy on this stream, then anything later on
  // the source stream (which may reuse `src` once it is freed).
  TOWER_RETURN_IF_ERROR(peer.SignalTo(stream_));
  {
    ScopedCudaDevice device(ordinal_);
    TOWER_CUDA_RETURN_IF_ERROR(
        cudaMemcpyPeerAsync(dst, ordinal_, src, peer.ordinal_, bytes, stream_), Where());
  }
  return SignalTo(peer.stream_);
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
  if (trace::Recording()) tracer_.Flush(/*all=*/true);
  return OkStatus();
}

void CudaStream::BeginTracedWork() {
  ScopedCudaDevice device(ordinal_);
  if (device.status().ok()) tracer_.Begin(stream_);
}

void CudaStream::EndTracedWork(const char* name) {
  ScopedCudaDevice device(ordinal_);
  if (device.status().ok()) tracer_.End(stream_, name);
}

}  // namespace tower
