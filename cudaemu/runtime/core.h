// Shared by the files of the runtime core only (context.cc, errors.cc, memory.cc,
// streams.cc): the emulated machine and the state of each visible device.
#ifndef CUDAEMU_RUNTIME_CORE_H_
#define CUDAEMU_RUNTIME_CORE_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "cudaemu/runtime/internal.h"

namespace cudaemu::internal {

struct DeviceState {
  int physical_index = 0;  // before CUDA_VISIBLE_DEVICES renumbering
  std::string name;
  std::string uuid;        // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  unsigned char uuid_bytes[16] = {};
  uint64_t total_bytes = 0;
  uint64_t context_bytes = 0;  // what the primary context takes, like a real one

  std::mutex mu;  // guards the fields below that are not atomic
  bool context_alive = false;
  int contexts_created = 0;
  std::vector<bool> peer_access;  // [peer device]: enabled from this device
  std::atomic<int> sticky{cudaSuccess};
  std::atomic<uint64_t> bytes_in_use{0};
  std::atomic<int64_t> live_allocations{0};
};

// nullptr for an ordinal that is not a visible device.
DeviceState* Device(int device);
// Waits for all work queued so far on every stream of `device` (cudaFree and
// cudaDeviceSynchronize synchronise the device).
void SynchronizeDevice(int device);
bool PeerAccessEnabled(int device, int peer);
// The calling thread's current device (0 until one is chosen); records no error.
int CurrentDeviceOrZero();
// Counts a call that blocks the host until device work is done (testing::HostWaits).
void CountHostWait();

}  // namespace cudaemu::internal

#endif  // CUDAEMU_RUNTIME_CORE_H_
