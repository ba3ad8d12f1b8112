#include "strategy/strategy_flags.h"

#include <chrono>
#include <vector>

#include "strategy/collectives/cross_device_ops_selection.h"
#include "strategy/replica_devices.h"
#include "util/strings.h"

namespace tower {
namespace {

StatusOr<DType> ParseWireDType(const std::string& name) {
  for (DType wire : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    if (name == DTypeName(wire)) return wire;
  }
  return InvalidArgumentError("--all-reduce-dtype='" + name + "': use float32, bfloat16 or float16");
}

std::chrono::milliseconds Milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

void AddStrategyFlags(FlagParser* parser, StrategyFlags* flags) {
  parser->AddInt("replicas", &flags->replicas, "data-parallel replicas (logical CPUs or virtual GPUs as needed)");
  parser->AddString("devices", &flags->devices, "replica devices, e.g. /GPU:0,/GPU:1 (instead of --replicas)");
  parser->AddString("cross-device-ops", &flags->cross_device_ops, "auto, in-process, nccl, same-card or to-cpu");
  parser->AddDouble("bucket-mb", &flags->bucket_mb, "gradient bucket size of the all-reduce, MB");
  parser->AddBool("deterministic", &flags->deterministic, "the same weights, bit for bit, on 1 device or any number of replicas and workers (up to --virtual-shards), any bucket size and cross-device path; resumable on another topology");
  parser->AddBool("fold-gradients", &flags->fold_gradients, "replicas that share a CPU thread (more replicas than --inter-op-threads) add their gradients into one sum per thread: less memory and work per step; the bits then follow the thread count (off: a thread per replica's bits)");
  parser->AddBool("batch-replica-rows", &flags->batch_replica_rows, "faster, does not simulate devices: CPU replicas that share their variables compute each step's rows as one batch (replica 0 runs the layers over every replica's shard, its kernels on every core, and no all-reduce crosses the replicas); off (the default): each replica its own shard, forward, backward and reducer on its own thread or fiber, and an all-reduce among them, as on as many GPUs. On, 2 replicas on 2 cores ran 1.08-1.11x (mlp) and 1.13-1.40x (linreg) faster, and 8 cost about what 2 do; the bits differ from off's; needs --fold-gradients");
  parser->AddInt("batch-threads", &flags->batch_threads, "with --batch-replica-rows: how many batches (replica threads) compute each step, batch b the replicas b, b + N, ..., each with cores / N intra-op threads; 0: one batch");
  parser->AddInt("virtual-shards", &flags->virtual_shards, "with --deterministic: fixed shards each global batch is cut into (keep it the same across the runs you compare; at least the replicas in sync)");
  parser->AddDouble("collective-timeout", &flags->collective_timeout_s,
                    "seconds a collective waits for every replica and worker before failing");
  parser->AddDouble("max-clock-skew", &flags->max_clock_skew_s, "under mpirun: refuse to start when the workers' wall clocks differ by more than this many seconds (0: only a warning, from 2 s on; training never depends on the clocks)");
  parser->AddString("all-reduce-dtype", &flags->all_reduce_dtype, "under mpirun: what the all-reduce across workers sends, float32, bfloat16 or float16 (16 bits: half the bytes, summed in float32)");
}

Status CheckStrategyFlags(const StrategyFlags& flags, const FlagParser& parser,
                          bool virtual_shards_used) {
  if (!flags.devices.empty() && parser.WasSet("replicas")) {
    return InvalidArgumentError("give --replicas or --devices, not both");
  }
  if (flags.batch_threads != 0 && !flags.batch_replica_rows) {
    return InvalidArgumentError(
        "--batch-threads needs --batch-replica-rows (each replica computes its own shard "
        "unless the replicas' rows are batched)");
  }
  // Negated comparisons so NaN is refused too; the upper bounds keep the conversions to
  // integer bytes and milliseconds in range.
  if (!(flags.bucket_mb * (1 << 20) >= 1 && flags.bucket_mb <= 1 << 20)) {
    return InvalidArgumentError("--bucket-mb must be between 1e-6 and 1048576 (MB), got " +
                                std::to_string(flags.bucket_mb));
  }
  if (parser.WasSet("virtual-shards") && !flags.deterministic && !virtual_shards_used) {
    return InvalidArgumentError("--virtual-shards needs --deterministic");
  }
  if (flags.virtual_shards < 1 || flags.virtual_shards > 65536) {
    return InvalidArgumentError("--virtual-shards must be between 1 and 65536, got " +
                                std::to_string(flags.virtual_shards));
  }
  if (!(flags.collective_timeout_s >= 0.001 && flags.collective_timeout_s <= 7 * 86400)) {
    return InvalidArgumentError("--collective-timeout must be between 0.001 and 604800 "
                                "seconds, got " + std::to_string(flags.collective_timeout_s));
  }
  if (!(flags.max_clock_skew_s >= 0 && flags.max_clock_skew_s <= 365.0 * 86400)) {
    return InvalidArgumentError("--max-clock-skew must be between 0 and 31536000 seconds, got " +
                                std::to_string(flags.max_clock_skew_s));
  }
  TOWER_RETURN_IF_ERROR(ParseCrossDeviceOps(flags.cross_device_ops).status());
  return ParseWireDType(flags.all_reduce_dtype).status();
}

StatusOr<MirroredStrategyOptions> ApplyStrategyFlags(const StrategyFlags& flags,
                                                     const DeviceFlags& device_flags,
                                                     Context& context) {
  MirroredStrategyOptions options;
  TOWER_ASSIGN_OR_RETURN(options.cross_device_ops, ParseCrossDeviceOps(flags.cross_device_ops));
  TOWER_ASSIGN_OR_RETURN(options.cross_process_dtype, ParseWireDType(flags.all_reduce_dtype));
  options.bucket_bytes = static_cast<int64_t>(flags.bucket_mb * (1 << 20));
  options.virtual_shards = flags.deterministic ? static_cast<int>(flags.virtual_shards) : 0;
  options.fold_replica_gradients = flags.fold_gradients;
  options.batch_replica_rows = flags.batch_replica_rows;
  options.batch_threads = static_cast<int>(flags.batch_threads);
  options.collective_timeout = Milliseconds(flags.collective_timeout_s);
  options.max_clock_skew = Milliseconds(flags.max_clock_skew_s);
  if (!flags.devices.empty()) {
    options.devices = Split(flags.devices, ',');
  } else {
    TOWER_ASSIGN_OR_RETURN(options.devices,
                           ConfigureReplicaDevices(flags.replicas, device_flags, context));
  }
  if (flags.deterministic && options.devices.empty()) {
    options.devices = {DeterministicDefaultDevice(context)};
  }
  return options;
}

std::string DeterministicDefaultDevice(const Context& context) {
  return context.GetVisibleDevices("GPU").empty() ? "/CPU:0" : "/GPU:0";
}

}  // namespace tower
