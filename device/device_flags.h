// The device flags shared by `tower`, the examples and the benchmarks:
//   --visible-gpus=0,1|none   --virtual-gpus=N   --memory-limit=MB   --memory-growth=true|false
//   --memory-fraction=F       --virtual-cpus=N   --cpu-memory-limit=MB
//   --intra-op-threads=N      --inter-op-threads=N
// and how they become tower::config calls (before the runtime initialises).
#ifndef TOWER_DEVICE_DEVICE_FLAGS_H_
#define TOWER_DEVICE_DEVICE_FLAGS_H_

#include <cstdint>
#include <string>

#include "device/context.h"
#include "util/flags.h"

namespace tower {

struct DeviceFlags {
  std::string visible_gpus = "all";  // "all", "none", or indices "0,2"
  int64_t virtual_gpus = 0;          // logical GPUs per visible card; 0 = one
  int64_t memory_limit_mb = 0;       // per logical GPU; 0 = no explicit limit
  std::string memory_growth;         // "", "true" or "false"
  double memory_fraction = 0;        // 0 = unset
  int64_t virtual_cpus = 0;          // logical CPUs; 0 = one
  int64_t cpu_memory_limit_mb = 0;   // per logical CPU; 0 = no limit
  int64_t intra_op_threads = 0;      // most threads of one CPU kernel call; 0 = one per core
  int64_t inter_op_threads = 0;      // OS threads running CPU replicas; 0 = one per core
};

void AddDeviceFlags(FlagParser* parser, DeviceFlags* flags);

// Applies the flags to `context` (which must not be initialised yet, or the usual
// FailedPrecondition comes back). Bad values are InvalidArgument naming the flag.
Status ApplyDeviceFlags(const DeviceFlags& flags, Context& context);

}  // namespace tower

#endif  // TOWER_DEVICE_DEVICE_FLAGS_H_
