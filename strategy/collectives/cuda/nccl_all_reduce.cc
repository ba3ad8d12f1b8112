// NCCL all-reduce for GPUs on distinct cards. Communicators are created once
// (ncclCommInitAll in one process; ncclCommInitRank over a unique id across processes) when
// the strategy is built; each replica thread then drives its own communicator on its
// device's stream.
//
// Nothing may wait forever:
// - Before launching, the local replicas meet on the host (a barrier with a deadline that
//   names a missing replica), so no NCCL kernel starts unless every local replica came.
// - Across processes a peer can die at any time: the communicators are non-blocking
//   (config.blocking = 0), so setup, every collective and the final flush are polled under
//   the deadline, and every collective is waited for on the host under the deadline. On
//   expiry, or on an asynchronous NCCL error, the communicators are aborted.
// - A non-blocking call may return ncclInProgress while NCCL's own thread still issues the
//   work (it does for a communicator's first collectives, which connect the peers). Until
//   ncclCommGetAsyncError stops saying ncclInProgress the stream may hold nothing of it (an
//   idle stream is not a finished collective) and any other call on the communicator is
//   refused (ncclInvalidArgument, which also fails the communicator): so every launch is
//   polled to its issue before the `launched` event is recorded or the stream waited for.
// - In one process, a replica can fail after the barrier without launching its part: the
//   others' kernels would then wait on the GPU forever, and so would the next copy to the
//   host. When the strategy aborts (a replica failed), a collective still in flight after
//   the deadline makes this abort the communicators, which releases those kernels.
// An aborted communicator is never used again (ncclCommAbort frees it): later collectives
// fail, saying to build a new strategy. Aborting is shared by all replica threads and the
// failing one, so it happens once, under a lock per replica.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "device/cuda/cuda_status.h"
#include "strategy/step/distribution.h"
#include "strategy/collectives/cross_device_ops_selection.h"
#include "strategy/collectives/cuda/nccl_status.h"
#include "strategy/collectives/cuda/tree_sum.h"
#include "strategy/collectives/gpu_collectives.h"
#include "strategy/collectives/replica_barrier.h"

namespace tower {
namespace {

using Clock = std::chrono::steady_clock;

class NcclAllReduce : public CrossDeviceOps {
 public:
  NcclAllReduce(std::vector<Device*> devices, std::vector<std::string> names,
                std::chrono::milliseconds timeout)
      : devices_(std::move(devices)),
        names_(names),
        timeout_(timeout),
        barrier_(std::move(names), timeout, /*spin=*/true),
        ranks_(devices_.size()),
        tree_(devices_.size()),
        published_parts_(devices_.size()),
        published_roots_(devices_.size()) {}

  ~NcclAllReduce() override {
    const auto deadline = Clock::now() + timeout_;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      Rank& rank = ranks_[r];
      ScopedCudaDevice device(devices_[r]->physical().index);
      std::lock_guard<std::mutex> lock(rank.mu);
      if (rank.comm != nullptr) Close(rank.comm, deadline);  // never an aborted one
      if (rank.launched != nullptr) IgnoreCudaError(cudaEventDestroy(rank.launched));
    }
  }

  // One process: a communicator over this process's devices.
  Status Init() {
    std::vector<int> ordinals;
    std::vector<ncclComm_t> comms(ranks_.size(), nullptr);
    for (Device* device : devices_) ordinals.push_back(device->physical().index);
    if (devices_.size() > 1) {
      TOWER_NCCL_RETURN_IF_ERROR(
          ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), ordinals.data()),
          "the NCCL communicators");
    }
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r].comm = comms[r];
      ScopedCudaDevice device(ordinals[r]);
      TOWER_RETURN_IF_ERROR(device.status());
      TOWER_CUDA_RETURN_IF_ERROR(
          cudaEventCreateWithFlags(&ranks_[r].launched, cudaEventDisableTiming), names_[r]);
    }
    return OkStatus();
  }

  // Several processes: this process's devices are ranks first_rank... of world_ranks. Setup
  // is non-blocking and polled under the deadline: a worker that died between sharing the id
  // and joining must not hang the others here.
  Status InitAcrossProcesses(const std::string& unique_id, int first_rank, int world_ranks) {
    ncclUniqueId id;
    if (unique_id.size() != sizeof(id.internal)) {
      return InvalidArgumentError("NCCL unique id of " + std::to_string(unique_id.size()) +
                                  " bytes; expected " + std::to_string(sizeof(id.internal)));
    }
    std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
    across_processes_ = true;
    first_rank_ = first_rank;
    world_ranks_ = world_ranks;
    const std::string job = "rank " + std::to_string(first_rank) + " of " +
                            std::to_string(world_ranks) + " NCCL ranks";
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    // Several ranks from one thread: inside a group, as NCCL requires. The group is always
    // closed, and whatever was made is aborted on failure.
    TOWER_NCCL_RETURN_IF_ERROR(ncclGroupStart(), "the NCCL communicators (" + job + ")");
    Status failure;
    for (size_t r = 0; r < ranks_.size() && failure.ok(); ++r) {
      ScopedCudaDevice device(devices_[r]->physical().index);
      failure = device.status();
      if (!failure.ok()) break;
      const ncclResult_t result =
          ncclCommInitRankConfig(&ranks_[r].comm, world_ranks, id,
                                 first_rank + static_cast<int>(r), &config);
      if (result != ncclSuccess && result != ncclInProgress) {
        failure = NcclError(result, "ncclCommInitRankConfig", __FILE__, __LINE__, names_[r]);
      }
    }
    const ncclResult_t closed = ncclGroupEnd();
    if (failure.ok() && closed != ncclSuccess && closed != ncclInProgress) {
      failure = NcclError(closed, "ncclGroupEnd", __FILE__, __LINE__, job);
    }
    if (failure.ok()) failure = WaitForSetup(job);
    if (failure.ok()) {
      for (size_t r = 0; r < ranks_.size() && failure.ok(); ++r) {
        ScopedCudaDevice device(devices_[r]->physical().index);
        const cudaError_t made = cudaEventCreateWithFlags(&ranks_[r].launched,
                                                          cudaEventDisableTiming);
        if (made != cudaSuccess) {
          failure = CudaError(made, "cudaEventCreateWithFlags", __FILE__, __LINE__, names_[r]);
        }
      }
    }
    if (!failure.ok()) AbortCommunicators(failure);
    return failure;
  }

  std::string name() const override { return "nccl"; }

  Status Broadcast(int replica, Span<Tensor* const> tensors) override {
    return Collective(replica, tensors, /*broadcast=*/true);
  }

  // An asynchronous NCCL error (a peer's failure seen by the library) fails the step here.
  Status FinishReductions(int replica) override {
    if (devices_.size() == 1 && !across_processes_) return OkStatus();
    return CheckAsyncError(replica);
  }

  void Abort(const Status& reason) override {
    barrier_.Abort(reason);
    if (!InFlightCollectivesFinish()) {
      AbortCommunicators(InternalError("a collective could not finish after: " +
                                       reason.ToString()));
    }
  }

  void Reset() override { barrier_.Reset(); }

 private:
  Status RunAllReduce(int replica, Span<Tensor* const> tensors,
                      const AllReduceOptions& options) override {
    if (options.tree != nullptr) return SumTree(replica, *options.tree, tensors);
    return Collective(replica, tensors, /*broadcast=*/false);
  }

  // Deterministic mode. NCCL's own reduction order depends on the rank count and topology,
  // so it is not used: every rank gathers every rank's partial sums (ncclAllGather, padded
  // to the most subtrees any rank holds) and evaluates the summation tree itself, with the
  // same kernel on every GPU. Traffic: each GPU receives every rank's subtrees (about
  // N × the gradient bytes, against ~2× for ncclAllReduce): the price of fixed bits.
  //
  // The gather needs no metadata: NCCL rank g (global replica g) holds the cover of its
  // virtual shards, ReplicaRows(num_leaves, ranks, g), which every rank can compute; a
  // replica passing anything else is refused before anything is launched.
  Status SumTree(int replica, const PartialSums& mine, Span<Tensor* const> roots) {
    const std::string& where = names_[replica];
    TOWER_RETURN_IF_ERROR(Aborted().WithContext(where));
    const Status async = CheckAsyncError(replica);
    if (!async.ok()) {
      AbortCommunicators(async);
      return async;
    }
    TreeScratch& scratch = tree_[replica];
    published_parts_[replica] = &mine;
    published_roots_[replica] = roots;
    // Every local replica checks every local replica's contribution, so all report the same
    // error and none launches; the second wait keeps the published pointers valid until
    // all have read them. (A contribution is checked against the other processes' only
    // through the layout: a mismatch there ends at the deadline, as for the plain sum.)
    TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
    const Status check = CheckTreeCall(replica);
    TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
    TOWER_RETURN_IF_ERROR(check);
    const SumPlan& plan = *scratch.plan_now;
    ScopedCudaDevice device(devices_[replica]->physical().index);
    TOWER_RETURN_IF_ERROR(device.status());
    const cudaStream_t stream =
        static_cast<cudaStream_t>(devices_[replica]->stream().native_handle());
    std::vector<const float*>& inputs = scratch.inputs;
    std::vector<float*>& outputs = scratch.outputs;
    outputs.resize(1);
    const int ranks = static_cast<int>(scratch.layout.size());
    if (ranks == 1) {
      // One replica alone: its own subtrees make the root.
      for (size_t t = 0; t < roots.size(); ++t) {
        inputs.clear();
        for (const auto& node : mine.values) inputs.push_back(node[t]->data<float>());
        outputs[0] = roots[t]->data<float>();
        TOWER_RETURN_IF_ERROR(
            LaunchSumPlan(plan, inputs, outputs, roots[t]->num_elements(), stream, where));
      }
      return OkStatus();
    }
    // Pack this rank's subtrees into its slice of `widest` × `elements` floats: node k at
    // k × elements, the tensors end to end within it; the slice's tail is padding for ranks
    // holding fewer subtrees (never read). Every rank's slice is the same size.
    int64_t elements = 0;
    for (const Tensor* root : roots) elements += root->num_elements();
    const int64_t slice = static_cast<int64_t>(scratch.widest) * elements;
    TOWER_RETURN_IF_ERROR(PackSubtrees(replica, mine, roots, elements, slice, ranks, stream));
    const Tensor& send = scratch.send;
    const Tensor& gathered = scratch.gathered;
    bool in_progress = false;
    {
      Rank& rank = ranks_[replica];
      std::lock_guard<std::mutex> lock(rank.mu);
      if (rank.comm == nullptr) return Aborted().WithContext(where);
      if (slice > 0) {
        const ncclResult_t gathered_result =
            ncclAllGather(send.raw_data(), gathered.raw_data(), static_cast<size_t>(slice),
                          ncclFloat, rank.comm, stream);
        in_progress = gathered_result == ncclInProgress;
        if (gathered_result != ncclSuccess && !in_progress) {
          return NameWorkers(NcclError(gathered_result, "ncclAllGather", __FILE__, __LINE__,
                                       where, rank.comm));
        }
      }
    }
    TOWER_RETURN_IF_ERROR(Issued(replica, in_progress, stream));
    // Every GPU evaluates the same tree from the same gathered subtrees. The plan's input
    // slots are every rank's subtrees, rank after rank; the roots are read from `gathered`
    // only, so a root may be one of this replica's own subtrees.
    int64_t offset = 0;
    for (size_t t = 0; t < roots.size(); ++t) {
      inputs.clear();
      for (int g = 0; g < ranks; ++g) {
        for (size_t k = 0; k < scratch.layout[g].nodes.size(); ++k) {
          inputs.push_back(gathered.data<float>() + g * slice +
                           static_cast<int64_t>(k) * elements + offset);
        }
      }
      outputs[0] = roots[t]->data<float>();
      TOWER_RETURN_IF_ERROR(
          LaunchSumPlan(plan, inputs, outputs, roots[t]->num_elements(), stream, where));
      offset += roots[t]->num_elements();
    }
    if (across_processes_) return WaitWithDeadline(replica, stream, /*broadcast=*/false);
    return OkStatus();
  }

  // SumTree's packing: this replica's subtrees copied into its slice of scratch.send (`elements`
  // floats per node, `slice` floats in all), scratch.gathered sized for every rank's slice.
  Status PackSubtrees(int replica, const PartialSums& mine, Span<Tensor* const> roots,
                      int64_t elements, int64_t slice, int ranks, cudaStream_t stream) {
    const std::string& where = names_[replica];
    TreeScratch& scratch = tree_[replica];
    Tensor& send = scratch.send;
    Tensor& gathered = scratch.gathered;
    // Reallocation frees the old buffers while earlier gathers may still use them: safe,
    // as device memory is reused in the order of the device's stream, which runs all of this.
    if (!send.valid() || send.num_elements() < slice) {
      TOWER_ASSIGN_OR_RETURN(send, Tensor::Empty(devices_[replica], Shape{slice}));
    }
    if (!gathered.valid() || gathered.num_elements() < slice * ranks) {
      TOWER_ASSIGN_OR_RETURN(gathered, Tensor::Empty(devices_[replica], Shape{slice * ranks}));
    }
    for (size_t k = 0; k < mine.values.size(); ++k) {
      int64_t offset = static_cast<int64_t>(k) * elements;
      for (size_t t = 0; t < roots.size(); ++t) {
        if (roots[t]->bytes() > 0) {
          TOWER_CUDA_RETURN_IF_ERROR(
              cudaMemcpyAsync(send.data<float>() + offset, mine.values[k][t]->raw_data(),
                              roots[t]->bytes(), cudaMemcpyDeviceToDevice, stream),
              where);
        }
        offset += roots[t]->num_elements();
      }
    }
    return OkStatus();
  }

  struct Rank {
    std::mutex mu;                  // held while this rank's communicator is used or aborted
    ncclComm_t comm = nullptr;      // nullptr once aborted (or never made)
    cudaEvent_t launched = nullptr; // recorded after each collective launch
  };

  // Why the communicators are gone, or OK.
  Status Aborted() {
    std::lock_guard<std::mutex> lock(abort_mu_);
    return abort_reason_;
  }

  // Aborts every communicator of this process once, from whichever thread gets here first.
  void AbortCommunicators(const Status& reason) {
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      if (!abort_reason_.ok()) return;
      abort_reason_ = FailedPreconditionError(
          "the NCCL communicators were aborted after an earlier failure (" + reason.ToString() +
          "); build a new strategy");
    }
    barrier_.Abort(reason);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      Rank& rank = ranks_[r];
      ScopedCudaDevice device(devices_[r]->physical().index);
      std::lock_guard<std::mutex> lock(rank.mu);
      if (rank.comm != nullptr) ncclCommAbort(rank.comm);
      rank.comm = nullptr;
    }
  }

  // Waits up to the deadline for every replica's last launched collective; false if one
  // cannot finish (a peer never launched its part).
  bool InFlightCollectivesFinish() {
    if (devices_.size() == 1 && !across_processes_) return true;
    const auto deadline = Clock::now() + timeout_;
    for (Rank& rank : ranks_) {
      if (rank.launched == nullptr) continue;
      while (true) {
        const cudaError_t done = cudaEventQuery(rank.launched);
        if (done != cudaErrorNotReady) {
          IgnoreCudaError(done);
          break;
        }
        IgnoreCudaError(done);
        if (Clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return true;
  }

  Status CheckAsyncError(int replica) {
    Rank& rank = ranks_[replica];
    std::lock_guard<std::mutex> lock(rank.mu);
    if (rank.comm == nullptr) return Aborted();
    ncclResult_t async = ncclSuccess;
    TOWER_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(rank.comm, &async), names_[replica]);
    if (async == ncclSuccess || async == ncclInProgress) return OkStatus();
    // A local replica's abort (recorded before any communicator is aborted) shows here as a
    // peer's error: report its cause instead.
    const Status aborted = Aborted();
    if (!aborted.ok()) return aborted;
    return NameWorkers(
        NcclError(async, "an NCCL collective", __FILE__, __LINE__, names_[replica], rank.comm));
  }

  // NCCL names ranks: across processes, a failure also says which worker holds them (every
  // worker has the same number of local replicas, checked when the strategy was made),
  // whether it shows at launch or later, asynchronously.
  Status NameWorkers(const Status& failed) const {
    if (failed.ok() || !across_processes_) return failed;
    const std::string n = std::to_string(ranks_.size());
    return Status(failed.code(), failed.message() + " (NCCL rank k is worker k / " + n +
                                     ", replica k % " + n + ")");
  }

  // SumTree's state, per local replica (used by its thread only).
  struct TreeScratch {
    int num_leaves = -1;                    // the layout below is for this leaf count
    std::vector<PartialSums> layout;        // every rank's nodes (no values), by NCCL rank
    std::vector<const PartialSums*> parts;  // pointers into `layout`
    size_t widest = 0;                      // the most nodes any rank holds
    TreePlanCache plans;
    const SumPlan* plan_now = nullptr;  // this call's plan (from `plans`)
    Tensor send;                        // this rank's packed subtrees
    Tensor gathered;                    // every rank's, rank after rank
    std::vector<const float*> inputs;
    std::vector<float*> outputs;
  };

  // After the first barrier of SumTree: checks every local replica's published
  // contribution (the same answer on each) and plans the tree into tree_[replica].
  Status CheckTreeCall(int replica) {
    TreeScratch& scratch = tree_[replica];
    const int leaves = published_parts_[0]->num_leaves;
    const int ranks = across_processes_ ? world_ranks_ : static_cast<int>(devices_.size());
    const int first = across_processes_ ? first_rank_ : 0;
    TOWER_RETURN_IF_ERROR(CheckTreeContributions(published_parts_, published_roots_, names_,
                                                 /*need_host_memory=*/false));
    if (leaves < 1) {
      return InvalidArgumentError("NCCL tree all-reduce over " + std::to_string(leaves) +
                                  " leaves: there must be at least one");
    }
    if (scratch.num_leaves != leaves) {
      scratch.layout.assign(ranks, PartialSums());
      scratch.parts.clear();
      scratch.widest = 0;
      for (int g = 0; g < ranks; ++g) {
        const RowRange shards = ReplicaRows(leaves, ranks, g);
        scratch.layout[g].num_leaves = leaves;
        scratch.layout[g].nodes = CoverNodes(leaves, static_cast<int>(shards.first),
                                             static_cast<int>(shards.end()));
        scratch.widest = std::max(scratch.widest, scratch.layout[g].nodes.size());
        scratch.parts.push_back(&scratch.layout[g]);
      }
      scratch.num_leaves = leaves;
    }
    for (size_t r = 0; r < devices_.size(); ++r) {
      const PartialSums& part = *published_parts_[r];
      const int rank = first + static_cast<int>(r);
      const PartialSums& expected = scratch.layout[rank];
      if (part.nodes != expected.nodes) {
        std::string given, wanted;
        for (const TreeNode& node : part.nodes) {
          given += (given.empty() ? "" : ", ") + node.ToString();
        }
        for (const TreeNode& node : expected.nodes) {
          wanted += (wanted.empty() ? "" : ", ") + node.ToString();
        }
        return InvalidArgumentError(
            "NCCL tree all-reduce: " + names_[r] + " (NCCL rank " + std::to_string(rank) +
            " of " + std::to_string(ranks) + ") passes the sums of {" + given + "}, but " +
            "holds virtual shards ReplicaRows(" + std::to_string(leaves) + ", " +
            std::to_string(ranks) + ", " + std::to_string(rank) + ") whose subtrees are {" +
            wanted + "}");
      }
      for (size_t k = 0; k <= part.values.size(); ++k) {
        const bool is_root = k == part.values.size();
        const Span<Tensor* const> list =
            is_root ? published_roots_[r] : Span<Tensor* const>(part.values[k]);
        for (size_t t = 0; t < list.size(); ++t) {
          if (list[t]->device() != devices_[r]) {
            return InvalidArgumentError(
                "NCCL tree all-reduce: " + names_[r] + "'s " +
                (is_root ? std::string("root") : part.nodes[k].ToString()) + " of tensor " +
                std::to_string(t) + " is on " + list[t]->device()->full_name() +
                ", not on the replica's own device " + devices_[r]->full_name());
          }
        }
      }
    }
    const TreeNode root{0, leaves};
    TOWER_ASSIGN_OR_RETURN(
        scratch.plan_now, scratch.plans.Get(leaves, scratch.parts, Span<const TreeNode>(&root, 1)));
    return CheckSumPlanFits(*scratch.plan_now, 1);
  }

  Status Collective(int replica, Span<Tensor* const> tensors, bool broadcast) {
    if (devices_.size() == 1 && !across_processes_) return OkStatus();
    TOWER_RETURN_IF_ERROR(Aborted().WithContext(names_[replica]));
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (tensors[t]->dtype() != DType::kFloat32 || tensors[t]->device() != devices_[replica]) {
        const Status bad = InvalidArgumentError(
            names_[replica] + ": NCCL all-reduce takes float32 tensors on the replica's own "
            "device; tensor " + std::to_string(t) + " is not");
        barrier_.Abort(bad);
        return bad;
      }
    }
    const Status async = CheckAsyncError(replica);
    if (!async.ok()) {
      AbortCommunicators(async);
      return async;
    }
    // Everyone is here (or the deadline names who is not) before any NCCL kernel starts.
    TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
    ScopedCudaDevice device(devices_[replica]->physical().index);
    TOWER_RETURN_IF_ERROR(device.status());
    const cudaStream_t stream =
        static_cast<cudaStream_t>(devices_[replica]->stream().native_handle());
    bool in_progress = false;
    TOWER_RETURN_IF_ERROR(NameWorkers(Launch(replica, tensors, broadcast, stream, &in_progress)));
    TOWER_RETURN_IF_ERROR(Issued(replica, in_progress, stream));
    if (across_processes_) return WaitWithDeadline(replica, stream, broadcast);
    return OkStatus();
  }

  // One group per call: NCCL fuses the tensors' collectives. `*in_progress`: the group
  // returned ncclInProgress (a non-blocking communicator; see Issued).
  Status Launch(int replica, Span<Tensor* const> tensors, bool broadcast, cudaStream_t stream,
                bool* in_progress) {
    Rank& rank = ranks_[replica];
    const std::string& where = names_[replica];
    std::lock_guard<std::mutex> lock(rank.mu);
    if (rank.comm == nullptr) return Aborted();
    TOWER_NCCL_RETURN_IF_ERROR(ncclGroupStart(), where);
    Status failure;
    for (Tensor* tensor : tensors) {
      const size_t count = static_cast<size_t>(tensor->num_elements());
      if (count == 0) continue;
      const ncclResult_t result =
          broadcast ? ncclBroadcast(tensor->raw_data(), tensor->raw_data(), count, ncclFloat, 0,
                                    rank.comm, stream)
                    : ncclAllReduce(tensor->raw_data(), tensor->raw_data(), count, ncclFloat,
                                    ncclSum, rank.comm, stream);
      if (result != ncclSuccess) {
        failure = NcclError(result, broadcast ? "ncclBroadcast" : "ncclAllReduce", __FILE__,
                            __LINE__, where, rank.comm);
        break;
      }
    }
    const ncclResult_t closed = ncclGroupEnd();  // always closes the group
    *in_progress = closed == ncclInProgress;
    if (failure.ok() && closed != ncclSuccess && closed != ncclInProgress) {
      failure = NcclError(closed, "ncclGroupEnd", __FILE__, __LINE__, where, rank.comm);
    }
    return failure;
  }

  // After a launch: when it returned ncclInProgress, polls ncclCommGetAsyncError until NCCL
  // has issued the work (under the deadline; the lock is taken per poll, so that another
  // replica's failure can abort meanwhile); then records the `launched` event behind it.
  Status Issued(int replica, bool in_progress, cudaStream_t stream) {
    Rank& rank = ranks_[replica];
    const std::string& where = names_[replica];
    const auto deadline = Clock::now() + timeout_;
    while (in_progress) {
      ncclResult_t state = ncclInProgress;
      {
        std::lock_guard<std::mutex> lock(rank.mu);
        if (rank.comm == nullptr) return Aborted().WithContext(where);
        TOWER_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(rank.comm, &state), where);
      }
      if (state == ncclSuccess) break;
      if (state != ncclInProgress) {
        const Status aborted = Aborted();
        const Status failed =
            !aborted.ok() ? aborted
                          : NameWorkers(NcclError(state, "an NCCL launch in progress", __FILE__,
                                                  __LINE__, where, rank.comm));
        AbortCommunicators(failed);
        return failed;
      }
      if (Clock::now() > deadline) {
        const Status expired = DeadlineExceededError(
            where + ": NCCL did not issue a collective within " +
            std::to_string(timeout_.count()) + " ms of its launch (ncclInProgress): a worker "
            "died or stalled while the peers connected (see the other workers' errors); the "
            "communicators were aborted");
        AbortCommunicators(expired);
        return expired;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    std::lock_guard<std::mutex> lock(rank.mu);
    if (rank.comm == nullptr) return Aborted().WithContext(where);
    TOWER_CUDA_RETURN_IF_ERROR(cudaEventRecord(rank.launched, stream), where);
    return OkStatus();
  }

  // Ends the use of a communicator that was never aborted. A non-blocking one is finalized
  // first (NCCL flushes its collectives, possibly returning ncclInProgress), polled until
  // `deadline`, then destroyed; one whose flush fails or does not end is aborted instead, so
  // that no peer's failure can hold the destructor.
  static void Close(ncclComm_t comm, Clock::time_point deadline) {
    ncclResult_t state = ncclCommFinalize(comm);
    while (state == ncclInProgress && Clock::now() <= deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) state = ncclInternalError;
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(comm);
    } else {
      ncclCommAbort(comm);
    }
  }

  // Polls the collective's completion and NCCL's asynchronous error state until the
  // deadline; a peer process that died or stalled makes this abort the communicators
  // instead of waiting forever.
  Status WaitWithDeadline(int replica, cudaStream_t stream, bool broadcast) {
    const std::string& where = names_[replica];
    const char* what = broadcast ? "broadcast" : "all-reduce";
    const auto deadline = Clock::now() + timeout_;
    while (true) {
      const cudaError_t done = cudaStreamQuery(stream);
      // A collective released by another replica's abort completes with undefined data.
      if (done == cudaSuccess) return Aborted().WithContext(where);
      // The runtime records cudaErrorNotReady as the thread's last error: cleared here, or
      // the next kernel of this thread would report it as its own failure.
      IgnoreCudaError(done);
      if (done != cudaErrorNotReady) {
        return CudaError(done, "cudaStreamQuery (NCCL collective)", __FILE__, __LINE__, where);
      }
      const Status async = CheckAsyncError(replica);
      if (!async.ok()) {
        AbortCommunicators(async);
        return async;
      }
      if (Clock::now() > deadline) {
        const Status expired = DeadlineExceededError(
            where + ": the NCCL " + what + " across processes did not complete within " +
            std::to_string(timeout_.count()) + " ms: a worker died or stalled (see the other "
            "workers' errors); the communicators were aborted");
        AbortCommunicators(expired);
        return expired;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // Polls non-blocking setup until every communicator is ready, under the deadline.
  Status WaitForSetup(const std::string& job) {
    const auto deadline = Clock::now() + timeout_;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      while (true) {
        ncclResult_t state = ncclInProgress;
        const ncclResult_t asked = ncclCommGetAsyncError(ranks_[r].comm, &state);
        if (asked != ncclSuccess) {
          return NcclError(asked, "ncclCommGetAsyncError", __FILE__, __LINE__, names_[r]);
        }
        if (state == ncclSuccess) break;
        if (state != ncclInProgress) {
          return NcclError(state, "NCCL setup", __FILE__, __LINE__, names_[r], ranks_[r].comm);
        }
        if (Clock::now() > deadline) {
          return DeadlineExceededError(
              "NCCL setup across processes (" + job + ") did not complete within " +
              std::to_string(timeout_.count()) + " ms: a worker never joined (it died or "
              "stalled after the NCCL id was shared; see the other workers' errors)");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return OkStatus();
  }

  const std::vector<Device*> devices_;
  const std::vector<std::string> names_;
  const std::chrono::milliseconds timeout_;
  ReplicaBarrier barrier_;
  std::vector<Rank> ranks_;  // per local replica
  bool across_processes_ = false;
  int first_rank_ = 0;   // across processes: this process's first NCCL rank
  int world_ranks_ = 0;  // and the number of ranks
  // SumTree: per local replica, its state; and each one's published contribution
  // (written before the first barrier of a call, read by all until the second).
  std::vector<TreeScratch> tree_;
  std::vector<const PartialSums*> published_parts_;
  std::vector<Span<Tensor* const>> published_roots_;
  std::mutex abort_mu_;
  Status abort_reason_;  // guarded by abort_mu_
};

// NCCL refuses two ranks of one communicator on one GPU unless its own switch allows it
// (collectives/cross_device_ops_selection.h: what a strategy asked for NCCL on one card gets).
Status CheckDistinctCards(const std::vector<Device*>& devices) {
  if (NcclRanksMayShareGpu()) return OkStatus();
  for (size_t i = 0; i < devices.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (devices[i]->physical().uuid == devices[j]->physical().uuid) {
        return InvalidArgumentError("NCCL cannot put two ranks on one GPU: " +
                                    devices[i]->full_name() + " and " +
                                    devices[j]->full_name() + " share card " +
                                    devices[i]->physical().uuid + "; use same-card, or set " +
                                    kNcclMultiRankGpuVariable + "=1");
      }
    }
  }
  return OkStatus();
}

}  // namespace

bool GpuCollectivesBuilt() { return true; }

StatusOr<std::unique_ptr<CrossDeviceOps>> MakeNcclAllReduce(
    const std::vector<Device*>& devices, const std::vector<std::string>& replica_names,
    std::chrono::milliseconds timeout) {
  TOWER_RETURN_IF_ERROR(CheckDistinctCards(devices));
  auto ops = std::make_unique<NcclAllReduce>(devices, replica_names, timeout);
  TOWER_RETURN_IF_ERROR(ops->Init());
  return std::unique_ptr<CrossDeviceOps>(std::move(ops));
}

StatusOr<std::string> NewNcclUniqueId() {
  ncclUniqueId id;
  TOWER_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id), "the NCCL unique id");
  return std::string(id.internal, sizeof(id.internal));
}

StatusOr<std::unique_ptr<CrossDeviceOps>> MakeNcclAllReduceAcrossProcesses(
    const std::vector<Device*>& devices, const std::vector<std::string>& replica_names,
    std::chrono::milliseconds timeout, const std::string& unique_id, int first_rank,
    int world_ranks) {
  TOWER_RETURN_IF_ERROR(CheckDistinctCards(devices));
  auto ops = std::make_unique<NcclAllReduce>(devices, replica_names, timeout);
  TOWER_RETURN_IF_ERROR(ops->InitAcrossProcesses(unique_id, first_rank, world_ranks));
  return std::unique_ptr<CrossDeviceOps>(std::move(ops));
}

}  // namespace tower
