#include <cstring>

#include "device/stream.h"

namespace tower {

Status HostStream::CopyFromHost(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes > 0) std::memcpy(device_dst, host_src, bytes);
  return OkStatus();
}

Status HostStream::CopyToHost(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, device_src, bytes);
  return OkStatus();
}

Status HostStream::StartRead(const void* device_src, size_t bytes) {
  TOWER_RETURN_IF_ERROR(reading_.Start(bytes));
  std::memcpy(read_, device_src, bytes);
  return OkStatus();
}

Status HostStream::FinishRead(void* host_dst) {
  size_t bytes = 0;
  TOWER_RETURN_IF_ERROR(reading_.Finish(&bytes));
  std::memcpy(host_dst, read_, bytes);
  return OkStatus();
}

Status HostStream::CopyWithinDevice(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
  return OkStatus();
}

Status HostStream::CopyFromPeer(void* dst, DeviceStream& src_stream, const void* src,
                                size_t bytes) {
  if (!src_stream.host_addressable()) {
    // A GPU source: let it copy to host memory (this device's memory is host memory).
    return src_stream.CopyToHost(dst, src, bytes);
  }
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return OkStatus();
}

Status HostStream::Zero(void* dst, size_t bytes) {
  if (bytes > 0) std::memset(dst, 0, bytes);
  return OkStatus();
}

}  // namespace tower
