// The replica-to-device policy: which logical devices N replicas run on, configuring
// logical devices as needed (TensorFlow's recipe for simulating several GPUs, or CPUs).
//
//   N GPUs when there are N logical GPUs; else N virtual GPUs carved out of the first GPU;
//   with no GPU, N logical CPUs. Logical devices already asked for are used as they are.
//   One replica: the default device (no names).
//
// Call it before the context initialises (it may configure logical devices).
#ifndef TOWER_STRATEGY_REPLICA_DEVICES_H_
#define TOWER_STRATEGY_REPLICA_DEVICES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "device/context.h"
#include "device/device_flags.h"

namespace tower {

struct ReplicaDeviceRequest {
  int64_t replicas = 1;
  // Logical devices the caller has already configured (0: none asked for). Virtual GPUs
  // are per visible card.
  int64_t virtual_gpus = 0;
  int64_t virtual_cpus = 0;
  // The memory limit (MiB, 0: none) of logical devices this policy creates.
  int64_t gpu_memory_limit_mb = 0;
  int64_t cpu_memory_limit_mb = 0;
};

// The most replicas of one process (as many logical CPUs as a context allows).
constexpr int64_t kMaxReplicasPerProcess = 256;

// Device names ("/GPU:0", "/CPU:3", ...) for a strategy, one per replica; empty for one
// replica. InvalidArgument when the devices already configured cannot hold the replicas.
StatusOr<std::vector<std::string>> ConfigureReplicaDevices(const ReplicaDeviceRequest& request,
                                                           Context& context);

// The same, for the logical devices `flags` configure (what `tower`, the examples and the
// benchmarks do with --replicas).
StatusOr<std::vector<std::string>> ConfigureReplicaDevices(int64_t replicas,
                                                           const DeviceFlags& flags,
                                                           Context& context);

}  // namespace tower

#endif  // TOWER_STRATEGY_REPLICA_DEVICES_H_
