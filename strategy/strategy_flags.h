// The strategy flags shared by `tower train` and the benchmarks (one declaration, one check,
// one mapping to MirroredStrategyOptions):
//   --replicas=N  --devices=LIST  --cross-device-ops=KIND  --bucket-mb=MB  --deterministic
//   --virtual-shards=N  --fold-gradients  --batch-replica-rows  --batch-threads=N
//   --collective-timeout=S  --max-clock-skew=S  --all-reduce-dtype=T
// The device flags (device/device_flags.h) come first: the replicas' devices are configured
// on the context they set up.
#ifndef TOWER_STRATEGY_STRATEGY_FLAGS_H_
#define TOWER_STRATEGY_STRATEGY_FLAGS_H_

#include <cstdint>
#include <string>

#include "device/context.h"
#include "device/device_flags.h"
#include "strategy/mirrored_strategy.h"
#include "util/flags.h"

namespace tower {

struct StrategyFlags {
  int64_t replicas = 1;                   // data-parallel replicas (of this worker)
  std::string devices;                    // "/GPU:0,/GPU:1": instead of replicas
  std::string cross_device_ops = "auto";  // ParseCrossDeviceOps's names
  double bucket_mb = 25;                  // gradient bucket, MiB
  bool deterministic = false;             // virtual shards: one device's bits everywhere
  int64_t virtual_shards = 8;             // with deterministic
  bool fold_gradients = true;             // MirroredStrategyOptions::fold_replica_gradients
  bool batch_replica_rows = false;        // MirroredStrategyOptions::batch_replica_rows
  int64_t batch_threads = 0;              // with batch_replica_rows (0: one batch)
  double collective_timeout_s = 300;      // seconds a collective waits for everyone
  double max_clock_skew_s = 0;            // under mpirun; 0: only a warning
  std::string all_reduce_dtype = "float32";  // what crosses processes: float32, bfloat16, float16
};

void AddStrategyFlags(FlagParser* parser, StrategyFlags* flags);

// Checks the values before anything is built: InvalidArgument naming the flag and what to
// give. `parser` (after Parse) says which flags were given. `virtual_shards_used`: a caller's
// own flag also uses --virtual-shards (the benchmark's --ab-deterministic), so it may be given
// without --deterministic.
Status CheckStrategyFlags(const StrategyFlags& flags, const FlagParser& parser,
                          bool virtual_shards_used = false);

// The options the flags ask for, the replicas' devices configured on `context` (not yet
// initialised) from --devices or --replicas (strategy/replica_devices.h). With --deterministic
// and one replica, the default device is named (DeterministicDefaultDevice). Expects
// CheckStrategyFlags to have passed.
StatusOr<MirroredStrategyOptions> ApplyStrategyFlags(const StrategyFlags& flags,
                                                     const DeviceFlags& device_flags,
                                                     Context& context);

// The device deterministic mode runs its virtual shards on when no replica device is named
// (one replica): "/GPU:0" where GPUs are visible, else "/CPU:0". By its short name, since a
// full name would initialise the context, and under mpirun the strategy names the devices
// for its worker.
std::string DeterministicDefaultDevice(const Context& context);

}  // namespace tower

#endif  // TOWER_STRATEGY_STRATEGY_FLAGS_H_
