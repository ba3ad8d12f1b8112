#include "device/stream.h"

#include <string>

namespace tower {

Status EarlyRead::Start(size_t bytes) {
  started_ = false;
  if (bytes == 0 || bytes > DeviceStream::kMaxEarlyReadBytes) {
    return InvalidArgumentError("StartRead of " + std::to_string(bytes) + " bytes: an early read "
                                "takes 1 to " + std::to_string(DeviceStream::kMaxEarlyReadBytes) +
                                " bytes; use CopyToHost for more");
  }
  bytes_ = bytes;
  started_ = true;
  return OkStatus();
}

Status EarlyRead::Finish(size_t* bytes) {
  if (!started_) return FailedPreconditionError("FinishRead with no read started (StartRead first)");
  started_ = false;
  *bytes = bytes_;
  return OkStatus();
}

}  // namespace tower
