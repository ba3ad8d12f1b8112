#include "strategy/mirrored_extended.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>

#include "device/context.h"
#include "device/cpu_platform.h"
#include "device/intra_op.h"
#include "device/placement.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "strategy/collectives/flight_recorder.h"
#include "strategy/collectives/gpu_collectives.h"
#include "strategy/collectives/in_process_all_reduce.h"
#include "strategy/collectives/reduction_to_one_device.h"
#include "strategy/reducers/tree_gradient_reducer.h"
#include "util/logging.h"
#include "util/strings.h"
#include "util/trace.h"

namespace tower {

// A local replica as its step sees it: its collectives go through `ops` (the all-reduce
// among every replica, or among the batches for a batch's first replica), and its failures
// are named `name`.
class MirroredExtended::Replica : public ReplicaContext {
 public:
  Replica(MirroredExtended* extended, int id, CrossDeviceOps* ops, GradientFolding* folding,
          const std::string& name, int intra_op_threads)
      : extended_(extended), id_(id), ops_(ops), name_(name), intra_op_threads_(intra_op_threads) {
    const int shards = extended->virtual_shards_;
    if (shards > 0) {
      const RowRange leaves = ReplicaRows(shards, extended->num_replicas_in_sync(),
                                          extended->first_global_replica() + id);
      reducer_ = std::make_unique<TreeGradientReducer>(
          ops, id, extended->bucket_bytes_, shards,
          TreeNode{static_cast<int>(leaves.first), static_cast<int>(leaves.end())});
    } else {
      reducer_ =
          std::make_unique<BucketedGradientReducer>(ops, id, extended->bucket_bytes_, folding);
    }
  }
  int replica_id() const override { return id_; }
  int num_replicas_in_sync() const override { return extended_->num_replicas_in_sync(); }
  int global_replica_id() const override { return extended_->first_global_replica() + id_; }
  Device* device() const override { return extended_->devices_[id_]; }
  Status AllReduceSum(Span<Tensor* const> tensors) override {
    // A custom loop's sum: no bucket.
    return SumBucketRecorded(id_, /*bucket=*/-1, tensors,
                             [&]() -> Status { return ops_->AllReduce(id_, tensors); });
  }
  Status Broadcast(Span<Tensor* const> tensors) override { return ops_->Broadcast(id_, tensors); }
  Status FinishReductions() override { return ops_->FinishReductions(id_); }
  GradientReducer& gradient_reducer() override { return *reducer_; }
  CrossDeviceOps& ops() const { return *ops_; }
  const std::string& name() const { return name_; }
  // Threads its CPU kernels may use.
  int intra_op_threads() const { return intra_op_threads_; }

 private:
  MirroredExtended* extended_;
  int id_;
  CrossDeviceOps* ops_;
  const std::string& name_;
  const int intra_op_threads_;
  std::unique_ptr<GradientReducer> reducer_;
};

namespace {

StatusOr<std::vector<Device*>> ResolveDevices(Context& context,
                                              const std::vector<std::string>& specs) {
  std::vector<Device*> devices;
  if (specs.empty()) {
    TOWER_ASSIGN_OR_RETURN(devices, context.Devices("GPU"));
    if (devices.empty()) {
      TOWER_ASSIGN_OR_RETURN(devices, context.Devices("CPU"));
    }
    return devices;
  }
  std::set<Device*> seen;
  for (const std::string& spec : specs) {
    TOWER_ASSIGN_OR_RETURN(DeviceName name, DeviceName::Parse(spec));
    if (!name.has_device()) {
      return InvalidArgumentError("strategy device '" + spec +
                                  "' names no device (use e.g. "
                                  "/GPU:0 or /CPU:1)");
    }
    TOWER_ASSIGN_OR_RETURN(Device * device, context.FindDevice(name));
    if (!seen.insert(device).second) {
      return InvalidArgumentError("strategy device '" + spec + "' (" + device->full_name() +
                                  ") is listed twice; each replica needs its own device");
    }
    devices.push_back(device);
  }
  return devices;
}

// The first "; "-separated item where two signatures differ.
std::pair<std::string, std::string> FirstDifference(const std::string& a, const std::string& b) {
  const std::vector<std::string> x = Split(a, ';');
  const std::vector<std::string> y = Split(b, ';');
  for (size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
    const std::string left = i < x.size() ? x[i] : "(nothing)";
    const std::string right = i < y.size() ? y[i] : "(nothing)";
    if (left != right) return {left, right};
  }
  return {a, b};
}

ReplicaDeviceInfo Info(const Device* device) {
  ReplicaDeviceInfo info;
  info.name = device->full_name();
  info.is_gpu = device->is_gpu();
  info.host_memory = device->stream().host_addressable();
  info.card_uuid = device->physical().uuid;
  return info;
}

// PrepareLocal's checks of the collectives' options (the deadline, the gradient bucket, the
// virtual shards, what crosses processes), in that order.
Status CheckCollectiveOptions(const std::string& kind, const MirroredStrategyOptions& options) {
  if (options.collective_timeout.count() <= 0) {
    return InvalidArgumentError(kind + ": the collective timeout must be positive");
  }
  if (options.bucket_bytes <= 0) {
    return InvalidArgumentError(kind + ": the gradient bucket size must be positive");
  }
  if (options.virtual_shards < 0) {
    return InvalidArgumentError(kind +
                                ": the number of virtual shards must be 0 (off) or "
                                "positive, not " +
                                std::to_string(options.virtual_shards));
  }
  if (options.cross_process_dtype != DType::kFloat32 &&
      options.cross_process_dtype != DType::kBFloat16 &&
      options.cross_process_dtype != DType::kFloat16) {
    return InvalidArgumentError(kind +
                                ": the cross-process all-reduce sends float32, bfloat16 "
                                "or float16, not " +
                                std::string(DTypeName(options.cross_process_dtype)));
  }
  return OkStatus();
}

// PrepareLocal's checks of the thread counts: 0 (the default) or positive.
Status CheckThreadOptions(const std::string& kind, const MirroredStrategyOptions& options) {
  if (options.replica_threads < 0) {
    return InvalidArgumentError(kind +
                                ": replica_threads must be 0 (one per core) or "
                                "positive, not " +
                                std::to_string(options.replica_threads));
  }
  if (options.batch_threads < 0) {
    return InvalidArgumentError(kind +
                                ": batch_threads must be 0 (one batch) or positive, "
                                "not " +
                                std::to_string(options.batch_threads));
  }
  return OkStatus();
}

// Each replica's device as ChooseCrossDeviceOps reads it; appends the replicas' names in
// errors ("replica 1 (/job:localhost/replica:0/task:0/device:CPU:1)") to `names`.
std::vector<ReplicaDeviceInfo> DescribeReplicas(const std::vector<Device*>& devices,
                                                std::vector<std::string>* names) {
  std::vector<ReplicaDeviceInfo> infos;
  for (size_t r = 0; r < devices.size(); ++r) {
    infos.push_back(Info(devices[r]));
    names->push_back("replica " + std::to_string(r) + " (" + devices[r]->full_name() + ")");
  }
  return infos;
}

// The replicas' OS threads, whether they spin and whether they share their variables, on
// `cores` usable cores.
void PlanReplicaThreads(const MirroredStrategyOptions& options,
                        const std::vector<ReplicaDeviceInfo>& infos, int cores,
                        MirroredExtended::LocalSetup* setup) {
  // Host replicas beyond the threads allowed run as fibers on them; GPU replicas have a
  // thread each. Spinning only pays when every replica thread has a core of its own.
  const int replicas = static_cast<int>(setup->devices.size());
  const bool all_host = std::all_of(infos.begin(), infos.end(),
                                    [](const ReplicaDeviceInfo& i) { return i.host_memory; });
  const int allowed =
      options.replica_threads > 0 ? options.replica_threads : ResolvedInterOpThreads();
  setup->threads = all_host ? std::min(replicas, allowed) : replicas;
  // Sharing is for logical CPUs (one host memory, read in place by every CPU kernel).
  const bool all_cpus = std::all_of(setup->devices.begin(), setup->devices.end(),
                                    [](const Device* d) { return d->is_cpu(); });
  setup->share_variables = options.share_variables && all_cpus && replicas > 1;
  setup->spin = setup->threads <= cores;
}

// Replicas that share their variables compute a model's steps in batches (replica b leads
// the batch of b, b + batch threads, …), their all-reduce among the batches: the batches'
// names, all-reduce and kernel threads (`intra_op`: the explicit setting, 0 if none).
Status PrepareBatches(const std::string& kind, const MirroredStrategyOptions& options, int cores,
                      int intra_op, MirroredExtended::LocalSetup* setup) {
  if (options.batch_threads > setup->threads) {
    return InvalidArgumentError(kind + ": batch_threads must be 0 (one batch) or 1 to the " +
                                std::to_string(setup->threads) + " replica threads, not " +
                                std::to_string(options.batch_threads));
  }
  const int replicas = static_cast<int>(setup->devices.size());
  const int batches = std::max(1, options.batch_threads);
  for (int b = 0; b < batches; ++b) {
    setup->batch_names.push_back(setup->names[b] + ", " +
                                 Distribution::DescribeBatch(replicas, batches, b));
  }
  setup->batch_ops = std::make_unique<InProcessAllReduce>(setup->batch_names,
                                                          options.collective_timeout, setup->spin);
  setup->batch_intra_op_threads = intra_op > 0 ? intra_op : std::max(1, cores / batches);
  return OkStatus();
}

// The in-process all-reduce among the local replicas, folding their gradients and batching
// their steps where the options allow.
Status MakeInProcessOps(const std::string& kind, const MirroredStrategyOptions& options, int cores,
                        int intra_op, MirroredExtended::LocalSetup* setup) {
  const int replicas = static_cast<int>(setup->devices.size());
  auto ops =
      std::make_unique<InProcessAllReduce>(setup->names, options.collective_timeout, setup->spin);
  // Replicas as fibers fold their gradients, one group per thread (not in deterministic
  // mode, whose sums follow its tree).
  if (options.fold_replica_gradients && setup->threads < replicas && setup->virtual_shards == 0) {
    setup->fold_groups = setup->threads;
    ops->EnableFolding(setup->fold_groups);
  }
  // Not without folding's consent to another summation order, nor in deterministic mode.
  if (options.batch_replica_rows && options.fold_replica_gradients && setup->share_variables &&
      setup->virtual_shards == 0) {
    TOWER_RETURN_IF_ERROR(PrepareBatches(kind, options, cores, intra_op, setup));
  }
  setup->ops = std::move(ops);
  return OkStatus();
}

// The all-reduce among the local replicas that setup->choice names.
Status MakeLocalOps(const std::string& kind, const MirroredStrategyOptions& options,
                    Context& context, int cores, int intra_op,
                    MirroredExtended::LocalSetup* setup) {
  switch (setup->choice.kind) {
    case CrossDeviceOpsKind::kInProcess:
      return MakeInProcessOps(kind, options, cores, intra_op, setup);
    case CrossDeviceOpsKind::kNccl: {
      TOWER_ASSIGN_OR_RETURN(
          setup->ops, MakeNcclAllReduce(setup->devices, setup->names, options.collective_timeout));
      break;
    }
    case CrossDeviceOpsKind::kSameCard: {
      TOWER_ASSIGN_OR_RETURN(setup->ops,
                             MakeSameCardAllReduce(setup->devices, setup->names,
                                                   options.collective_timeout, setup->spin));
      break;
    }
    case CrossDeviceOpsKind::kToCpu:
    case CrossDeviceOpsKind::kAuto: {
      TOWER_ASSIGN_OR_RETURN(std::vector<Device*> cpus, context.Devices("CPU"));
      setup->ops = std::make_unique<ReductionToOneDevice>(cpus.front(), setup->names,
                                                          options.collective_timeout, setup->spin);
      break;
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<MirroredExtended::LocalSetup> MirroredExtended::PrepareLocal(
    const std::string& kind, const MirroredStrategyOptions& options) {
  Context& context = options.context != nullptr ? *options.context : Context::Default();
  LocalSetup setup;
  setup.context = &context;
  TOWER_ASSIGN_OR_RETURN(setup.devices, ResolveDevices(context, options.devices));
  if (setup.devices.empty()) return InvalidArgumentError(kind + ": no devices to replicate on");
  TOWER_RETURN_IF_ERROR(CheckCollectiveOptions(kind, options));
  setup.bucket_bytes = options.bucket_bytes;
  setup.virtual_shards = options.virtual_shards;
  setup.timeout = options.collective_timeout;
  setup.cross_process_dtype = options.cross_process_dtype;
  const std::vector<ReplicaDeviceInfo> infos = DescribeReplicas(setup.devices, &setup.names);
  TOWER_ASSIGN_OR_RETURN(
      setup.choice, ChooseCrossDeviceOps(infos, options.cross_device_ops, GpuCollectivesBuilt(),
                                         NcclRanksMayShareGpu()));
  TOWER_RETURN_IF_ERROR(CheckThreadOptions(kind, options));
  const int cores = std::max(1, UsableCores());
  PlanReplicaThreads(options, infos, cores, &setup);
  // Each replica thread's kernels split only into the cores the replicas leave idle (an
  // explicit intra-op setting is taken as it is).
  const int intra_op = Context::Global().GetIntraOpParallelismThreads();
  setup.intra_op_threads = intra_op > 0 ? intra_op : std::max(1, cores / setup.threads);
  TOWER_RETURN_IF_ERROR(MakeLocalOps(kind, options, context, cores, intra_op, &setup));
  return setup;
}

StatusOr<std::unique_ptr<MirroredExtended>> MirroredExtended::Assemble(std::string kind,
                                                                       World* world,
                                                                       LocalSetup setup) {
  const int replicas = world->size() * static_cast<int>(setup.devices.size());
  if (setup.virtual_shards > 0 && setup.virtual_shards < replicas) {
    return InvalidArgumentError(
        kind + ": deterministic mode with " + std::to_string(setup.virtual_shards) +
        " virtual shards cannot feed " + std::to_string(replicas) +
        " replicas in sync; give "
        "it at least as many shards as replicas (and the same count to every run whose "
        "results you compare)");
  }
  std::unique_ptr<MirroredExtended> extended(
      new MirroredExtended(std::move(kind), world, std::move(setup)));
  extended->LogSetup();
  return extended;
}

// "Using <kind> with devices (...)", then how its replicas share, sum and compute.
void MirroredExtended::LogSetup() const {
  std::vector<std::string> device_names;
  for (Device* device : devices_) device_names.push_back(device->full_name());
  TOWER_LOG(INFO) << "Using " << kind_ << " with devices (" << Join(device_names, ", ") << ")";
  if (num_replicas_in_sync() > 1) {
    TOWER_LOG(INFO) << "Cross-device ops: " << CrossDeviceOpsName(choice_.kind) << " ("
                    << choice_.reason << ")";
  }
  if (ReplicasShareVariables()) {
    TOWER_LOG(INFO) << "Variables: one copy in host memory shared by the " << num_local_replicas()
                    << " replicas";
  }
  if (folding_ != nullptr) {
    TOWER_LOG(INFO) << "Gradients: folded into one running sum per replica thread ("
                    << folding_->groups() << " for " << num_local_replicas() << " replicas)";
  }
  if (batched_groups() > 0) {
    TOWER_LOG(INFO) << "Steps: computed in " << batched_groups() << " batch(es) for "
                    << num_local_replicas() << " replicas, kernels on " << batch_intra_op_threads_
                    << " thread(s) each";
  } else if (num_local_replicas() > 1) {
    TOWER_LOG(INFO) << "Steps: each of the " << num_local_replicas()
                    << " replicas computes its own shard (forward, backward, gradients) and "
                       "the all-reduce sums them";
  }
  if (virtual_shards_ > 0) {
    TOWER_LOG(INFO) << "Deterministic: every batch in " << virtual_shards_
                    << " virtual shard(s), summed along a fixed tree";
  }
}

MirroredExtended::MirroredExtended(std::string kind, World* world, LocalSetup setup)
    : kind_(std::move(kind)),
      world_(world),
      devices_(std::move(setup.devices)),
      context_(setup.context),
      names_(std::move(setup.names)),
      choice_(std::move(setup.choice)),
      cross_device_ops_(std::move(setup.ops)),
      bucket_bytes_(setup.bucket_bytes),
      virtual_shards_(setup.virtual_shards),
      cross_process_dtype_(setup.cross_process_dtype),
      timeout_(setup.timeout),
      intra_op_threads_(setup.intra_op_threads),
      batch_intra_op_threads_(setup.batch_intra_op_threads),
      share_variables_(setup.share_variables),
      batch_ops_(std::move(setup.batch_ops)),
      batch_names_(std::move(setup.batch_names)) {
  if (setup.fold_groups > 0 &&
      cross_device_ops_->Supports(AllReduceOptions::Folded(1, setup.fold_groups))) {
    folding_ =
        std::make_unique<GradientFolding>(static_cast<int>(devices_.size()), setup.fold_groups);
  }
  for (size_t r = 0; r < devices_.size(); ++r) {
    replicas_.push_back(std::make_unique<Replica>(this, static_cast<int>(r),
                                                  cross_device_ops_.get(), folding_.get(),
                                                  names_[r], intra_op_threads_));
  }
  // Batches rest on shared variables (a batch's update is every member's), which only the
  // replicas of one process have.
  if (batch_ops_ != nullptr && ReplicasShareVariables()) {
    for (size_t b = 0; b < batch_names_.size(); ++b) {
      batches_.push_back(std::make_unique<Replica>(this, static_cast<int>(b), batch_ops_.get(),
                                                   nullptr, batch_names_[b],
                                                   batch_intra_op_threads_));
    }
  }
  scheduler_ = std::make_unique<ReplicaScheduler>(static_cast<int>(devices_.size()), setup.threads,
                                                  setup.spin);
}

MirroredExtended::~MirroredExtended() = default;

std::string MirroredExtended::Describe() const {
  std::vector<std::string> names;
  for (Device* device : devices_) names.push_back(device->full_name());
  std::string text = kind_ + "(" + Join(names, ", ") + ")";
  if (world_->size() > 1) {
    text += " on " + world_->Describe(world_->rank()) + " of " + std::to_string(world_->size());
  }
  return text;
}

Status MirroredExtended::CheckConsistent(const std::string& model_signature) {
  if (world_->size() == 1) return OkStatus();
  const std::string signature =
      "replicas " + std::to_string(num_replicas_in_sync()) + "; gradient buckets of " +
      std::to_string(bucket_bytes_) + " bytes; virtual shards " + std::to_string(virtual_shards_) +
      "; all-reduce across workers in " + std::string(DTypeName(cross_process_dtype_)) + "; " +
      model_signature;
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> all,
                         world_->AllGather(signature, timeout_, "comparing the workers' models"));
  for (int r = 1; r < world_->size(); ++r) {
    if (all[r] != all[0]) {
      const auto [first, other] = FirstDifference(all[0], all[r]);
      return InvalidArgumentError("workers disagree before the first step: " + world_->Describe(0) +
                                  " has '" + first + "', " + world_->Describe(r) + " has '" +
                                  other + "'");
    }
  }
  return OkStatus();
}

Status MirroredExtended::RunReplica(Replica& replica,
                                    const std::function<Status(ReplicaContext&)>& fn) {
  ScopedDefaultContext use_context(*context_);
  ScopedIntraOpThreads share(replica.intra_op_threads());
  // A failure is kept in first_failure_; nothing is written per replica into memory another
  // replica writes too (one cache line bouncing between cores every step).
  Status status;
  try {
    // Ops without inputs inside fn land on this replica's device (TensorFlow's replica
    // context does the same).
    DeviceScope scope(*devices_[replica.replica_id()]);
    trace::LaneScope lane(replica.replica_id());
    status = fn(replica);
  } catch (const std::exception& e) {
    status = InternalError(std::string("threw an exception: ") + e.what());
  } catch (...) {
    status = InternalError("threw an exception that is not a std::exception");
  }
  if (!status.ok()) {
    const Status named = status.WithContext(replica.name());
    {
      std::lock_guard<std::mutex> lock(failure_mu_);
      // The first replica to fail is the cause; the others fail because it aborted them.
      if (first_failure_.ok()) {
        first_failure_ = named;
        failed_.store(true, std::memory_order_release);
      }
    }
    replica.ops().Abort(named);
    if (folding_ != nullptr) folding_->Abort(named);
    return named;
  }
  return OkStatus();
}

void MirroredExtended::RunScheduled(void* self, int replica) {
  auto* extended = static_cast<MirroredExtended*>(self);
  extended->RunReplica(*extended->replicas_[replica], *extended->fn_).IgnoreError();
}

void MirroredExtended::RunScheduledBatch(void* self, int first_replica) {
  auto* extended = static_cast<MirroredExtended*>(self);
  extended->RunReplica(*extended->batches_[first_replica], *extended->fn_).IgnoreError();
}

Status MirroredExtended::RunOnReplicas(const std::function<Status(ReplicaContext&)>& fn) {
  return RunOn(fn, /*batches=*/false);
}

Status MirroredExtended::RunOnReplicaBatches(const std::function<Status(ReplicaContext&)>& fn) {
  if (batches_.empty()) {
    return FailedPreconditionError(
        "RunOnReplicaBatches: this strategy's replicas are not "
        "batched (batched_groups() is 0)");
  }
  return RunOn(fn, /*batches=*/true);
}

Status MirroredExtended::RunOn(const std::function<Status(ReplicaContext&)>& fn, bool batches) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  if (fn_ != &fn) fn_ = &fn;
  if (batches) {
    scheduler_->RunFirstOfThreads(static_cast<int>(batches_.size()),
                                  &MirroredExtended::RunScheduledBatch, this);
  } else {
    if (folding_ != nullptr) folding_->StartRun();
    scheduler_->Run(&MirroredExtended::RunScheduled, this);
  }
  // Every replica has returned (the scheduler's run ends after them): what they wrote is
  // visible here.
  if (!failed_.load(std::memory_order_acquire)) return OkStatus();
  Status failure;
  {
    std::lock_guard<std::mutex> lock(failure_mu_);
    failure = std::move(first_failure_);
    first_failure_ = OkStatus();  // the next run starts without one
    failed_.store(false, std::memory_order_relaxed);
  }
  // How every replica's collectives ended, once all have stopped (the first failure is the
  // reason).
  const Status dumped = FlightRecorder::Get().Dump(failure.message());
  if (!dumped.ok()) TOWER_LOG(WARNING) << dumped.message();
  (batches ? *batch_ops_ : *cross_device_ops_).Reset();  // ready for the next run
  if (folding_ != nullptr) folding_->Reset();
  return failure;
}

}  // namespace tower
