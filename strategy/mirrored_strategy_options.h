// MirroredStrategyOptions: how a MirroredStrategy (or MultiWorkerMirroredStrategy) replicates,
// schedules and all-reduces. Its own header: the user API (mirrored_strategy.h) and the
// implementer's side (mirrored_extended.h) both take it.
#ifndef TOWER_STRATEGY_MIRRORED_STRATEGY_OPTIONS_H_
#define TOWER_STRATEGY_MIRRORED_STRATEGY_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "device/context.h"
#include "ops/dtype.h"
#include "strategy/collectives/cross_device_ops_selection.h"

namespace tower {

struct MirroredStrategyOptions {
  // Device names ("/GPU:0", "/CPU:1", full names...). Empty: every logical GPU, else every
  // logical CPU.
  std::vector<std::string> devices;
  CrossDeviceOpsKind cross_device_ops = CrossDeviceOpsKind::kAuto;
  // Every collective gives up after this long, naming the replicas it waited for.
  std::chrono::milliseconds collective_timeout = std::chrono::minutes(5);
  // Gradients are all-reduced in buckets of about this many bytes during backward.
  int64_t bucket_bytes = 25ll << 20;
  // Deterministic (topology-invariant) training when positive: each global batch is cut
  // into this many fixed virtual shards and every sum follows one fixed tree over them
  // (Distribution::virtual_shards), so the weights have the same bits on 1 device or any
  // number of replicas and workers up to this count, with any bucket size and on any
  // cross-device path. Keep it the same across the runs to compare; it must be at least
  // the number of replicas in sync. 0: off (one pass per replica, sums in path order).
  int virtual_shards = 0;
  // Across workers (MultiWorkerMirroredStrategy): the wall clocks are compared when the
  // strategy is made. Training never depends on them (each worker times its own deadlines),
  // but logs and file times from hosts whose clocks disagree mislead: a skew over 2 s is
  // logged, and one over this limit is refused, naming both workers. 0: never refused.
  std::chrono::milliseconds max_clock_skew{0};
  // How many OS threads run host (CPU) replicas: 0 = tower::config's inter-op setting, whose
  // default is one per core. Host replicas beyond it run as fibers on those threads
  // (strategy/runtime/replica_scheduler.h): 8 replicas on 2 cores cost about what 2 do. GPU
  // replicas always have a thread each (they mostly wait for their streams). 1 puts every
  // host replica on one thread: strategy.Run then runs the replicas' own code one after
  // another on it (a model's batched steps are the same either way: batch_threads).
  int replica_threads = 0;
  // Host replicas of one process share one copy of each variable (and of the optimizer's
  // slots) instead of holding one each: every replica reads the same weights, and each step
  // updates them once, every replica its own slice, right as the all-reduce sums it
  // (Distribution::ReplicasShareVariables). The bits are those of a copy per replica.
  // Off: a copy per replica, as on GPUs. Across workers each process keeps its own copies.
  bool share_variables = true;
  // Host replicas that run as fibers (more of them than replica threads) fold their
  // gradients: the replicas of one thread add theirs into one running sum, and the
  // all-reduce reads one sum per thread (strategy/reducers/gradient_folding.h). Less memory and
  // fewer
  // reads per step; the bits are still the same run after run for the same replicas and
  // threads, but not those of a thread per replica (off), which adds every replica's
  // gradients in replica order whatever the threads. Deterministic mode never folds.
  bool fold_replica_gradients = true;
  // Off (the default): every replica runs its own shard of each step, its own forward,
  // backward and gradient reducer, and the all-reduce sums across replicas, as on as many
  // GPUs: what MirroredStrategy promises and what a run on N logical CPUs simulates.
  // On: faster, does not simulate devices. Host replicas that share their variables compute
  // a model's training and evaluation steps as batches of their rows
  // (Distribution::RunOnReplicaBatches): a batch's first replica runs the layers once over
  // the shards of every member, and the all-reduce and the update run among the batches
  // only. How many batches: batch_threads below; by default one, whose kernels use every
  // core (intra-op threads), so a step of R replicas on C cores pays its per-op costs once
  // and sums nothing across cores (2 replicas on 2 cores: 1.08-1.11x for `mlp`, 1.15x for
  // `linreg` against off; 8 replicas cost about what 2 do; a Zen 5 host, docs/BENCHMARKS.md,
  // runs AH and AI). Each replica's rows are still its shard of every global batch; the
  // update is the same sum of the same rows' gradients, summed in another order, so its
  // bits are not those of off, but the same run after run for the same replicas, batches
  // and threads. Needs fold_replica_gradients (which consents to that order) and no
  // deterministic mode; a batch's activations live on its first replica's device. Steps of
  // several passes (gradient accumulation), check-numerics (which names the replica of a
  // non-finite value) and custom loops (strategy.Run) run every replica on its own thread or
  // fiber either way.
  bool batch_replica_rows = false;
  // How many batches (and replica threads) compute a batched step: batch b is replicas b,
  // b + batch_threads, … (util/round_robin.h), computed by replica b on its thread with
  // kernels split over cores / batch_threads intra-op threads (an explicit intra-op setting
  // is taken as it is). 0: one batch. At most the replica threads.
  int batch_threads = 0;
  // Reduced-precision all-reduce across workers (MultiWorkerMirroredStrategy over MPI):
  // bfloat16 or float16 sends each gradient in 16 bits and sums in float32 (half the bytes
  // of float32, each sum rounded once to 16 bits;
  // strategy/collectives/mpi/cross_process_all_reduce.h).
  // Sums among one process's replicas move no bytes between hosts and stay float32. Every
  // worker must give the same value. float32: off.
  DType cross_process_dtype = DType::kFloat32;
  // Context to take devices from; nullptr: Context::Default().
  Context* context = nullptr;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_MIRRORED_STRATEGY_OPTIONS_H_
