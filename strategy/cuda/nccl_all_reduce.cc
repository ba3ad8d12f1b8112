// NCCL all-reduce for GPUs on distinct cards. Communicators are created once
// (ncclCommInitAll in one process; ncclCommInitRank over a unique id across processes) when
// the strategy is built; each replica thread then drives its own communicator on its
// device's stream. Before launching, the local replicas meet on the host (a barrier with a
// deadline that names a missing replica), so a replica that failed or never came cannot
// leave the others' NCCL kernels waiting on the GPU forever. Across processes a peer can
// still die mid-collective: there every collective is waited for on the host under the
// deadline, and the communicator is aborted when it expires.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <memory>
#include <thread>

#include "device/cuda/cuda_status.h"
#include "strategy/gpu_collectives.h"
#include "strategy/replica_barrier.h"

namespace tower {
namespace {

Status NcclError(ncclResult_t result, const char* statement, const char* file, int line,
                 const std::string& where) {
  std::string message = std::string(statement) + " failed at " + file + ":" +
                        std::to_string(line) + " on " + where + ": " +
                        ncclGetErrorString(result);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') message += " (" + std::string(last) + ")";
  return result == ncclInvalidArgument || result == ncclInvalidUsage
             ? InvalidArgumentError(message)
             : InternalError(message);
}

#define TOWER_NCCL_RETURN_IF_ERROR(statement, where)                                   \
  do {                                                                                 \
    const ncclResult_t tower_nccl_result_ = (statement);                               \
    if (tower_nccl_result_ != ncclSuccess) {                                           \
      return NcclError(tower_nccl_result_, #statement, __FILE__, __LINE__, where);     \
    }                                                                                  \
  } while (0)

class NcclAllReduce : public CrossDeviceOps {
 public:
  NcclAllReduce(std::vector<Device*> devices, std::vector<std::string> names,
                std::chrono::milliseconds timeout)
      : devices_(std::move(devices)),
        names_(names),
        timeout_(timeout),
        barrier_(std::move(names), timeout, /*spin=*/true),
        comms_(devices_.size(), nullptr),
        aborted_(devices_.size(), false) {}

  ~NcclAllReduce() override {
    for (size_t r = 0; r < comms_.size(); ++r) {
      if (comms_[r] == nullptr || aborted_[r]) continue;
      ScopedCudaDevice device(devices_[r]->physical().index);
      ncclCommDestroy(comms_[r]);
    }
  }

  // One process: a communicator over this process's devices.
  Status Init() {
    std::vector<int> ordinals;
    for (Device* device : devices_) ordinals.push_back(device->physical().index);
    TOWER_NCCL_RETURN_IF_ERROR(
        ncclCommInitAll(comms_.data(), static_cast<int>(comms_.size()), ordinals.data()),
        "the NCCL communicators");
    return OkStatus();
  }

  // Several processes: this process's devices are ranks first_rank... of world_ranks.
  Status InitAcrossProcesses(const std::string& unique_id, int first_rank, int world_ranks) {
    ncclUniqueId id;
    if (unique_id.size() != sizeof(id.internal)) {
      return InvalidArgumentError("NCCL unique id of " + std::to_string(unique_id.size()) +
                                  " bytes; expected " + std::to_string(sizeof(id.internal)));
    }
    std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
    across_processes_ = true;
    // Several ranks from one thread: inside a group, as NCCL requires.
    TOWER_NCCL_RETURN_IF_ERROR(ncclGroupStart(), "the NCCL communicators");
    for (size_t r = 0; r < devices_.size(); ++r) {
      const cudaError_t set = cudaSetDevice(devices_[r]->physical().index);
      if (set != cudaSuccess) {
        ncclGroupEnd();
        return InternalError(names_[r] + ": cudaSetDevice: " + cudaGetErrorString(set));
      }
      TOWER_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&comms_[r], world_ranks, id,
                                                  first_rank + static_cast<int>(r)),
                                 names_[r]);
    }
    TOWER_NCCL_RETURN_IF_ERROR(ncclGroupEnd(), "the NCCL communicators (rank " +
                                                   std::to_string(first_rank) + " of " +
                                                   std::to_string(world_ranks) + ")");
    return OkStatus();
  }

  std::string name() const override { return "nccl"; }

  Status AllReduceSum(int replica, Span<Tensor* const> tensors) override {
    return Collective(replica, tensors, /*broadcast=*/false);
  }
  Status Broadcast(int replica, Span<Tensor* const> tensors) override {
    return Collective(replica, tensors, /*broadcast=*/true);
  }
  void Abort(const Status& reason) override { barrier_.Abort(reason); }
  void Reset() override { barrier_.Reset(); }

 private:
  Status Collective(int replica, Span<Tensor* const> tensors, bool broadcast) {
    if (devices_.size() == 1 && !across_processes_) return OkStatus();
    if (aborted_[replica]) {
      return FailedPreconditionError(names_[replica] + ": the NCCL communicator was aborted "
                                     "after an earlier failure; build a new strategy");
    }
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (tensors[t]->dtype() != DType::kFloat32 || tensors[t]->device() != devices_[replica]) {
        const Status bad = InvalidArgumentError(
            names_[replica] + ": NCCL all-reduce takes float32 tensors on the replica's own "
            "device; tensor " + std::to_string(t) + " is not");
        barrier_.Abort(bad);
        return bad;
      }
    }
    // Everyone is here (or the deadline names who is not) before any NCCL kernel starts.
    TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
    ScopedCudaDevice device(devices_[replica]->physical().index);
    TOWER_RETURN_IF_ERROR(device.status());
    const cudaStream_t stream =
        static_cast<cudaStream_t>(devices_[replica]->stream().native_handle());
    const std::string& where = names_[replica];
    // One group per call: NCCL fuses the tensors' collectives.
    TOWER_NCCL_RETURN_IF_ERROR(ncclGroupStart(), where);
    for (Tensor* tensor : tensors) {
      const size_t count = static_cast<size_t>(tensor->num_elements());
      if (count == 0) continue;
      if (broadcast) {
        TOWER_NCCL_RETURN_IF_ERROR(ncclBroadcast(tensor->raw_data(), tensor->raw_data(), count,
                                                 ncclFloat, 0, comms_[replica], stream),
                                   where);
      } else {
        TOWER_NCCL_RETURN_IF_ERROR(ncclAllReduce(tensor->raw_data(), tensor->raw_data(), count,
                                                 ncclFloat, ncclSum, comms_[replica], stream),
                                   where);
      }
    }
    TOWER_NCCL_RETURN_IF_ERROR(ncclGroupEnd(), where);
    if (across_processes_) return WaitWithDeadline(replica, stream, broadcast);
    return OkStatus();
  }

  // Polls the collective's completion and NCCL's asynchronous error state until the
  // deadline; a peer process that died or stalled makes this replica abort its communicator
  // instead of waiting forever.
  Status WaitWithDeadline(int replica, cudaStream_t stream, bool broadcast) {
    const std::string& where = names_[replica];
    const char* what = broadcast ? "broadcast" : "all-reduce";
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (true) {
      const cudaError_t done = cudaStreamQuery(stream);
      if (done == cudaSuccess) return OkStatus();
      if (done != cudaErrorNotReady) {
        return InternalError(where + ": NCCL " + what + " failed: " + cudaGetErrorString(done));
      }
      ncclResult_t async = ncclSuccess;
      TOWER_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(comms_[replica], &async), where);
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(comms_[replica]);
        aborted_[replica] = true;
        return NcclError(async, "NCCL cross-process collective", __FILE__, __LINE__, where);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comms_[replica]);
        aborted_[replica] = true;
        return DeadlineExceededError(
            where + ": the NCCL " + what + " across processes did not complete within " +
            std::to_string(timeout_.count()) + " ms: a worker died or stalled (see the other "
            "workers' errors); the communicator was aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  const std::vector<Device*> devices_;
  const std::vector<std::string> names_;
  const std::chrono::milliseconds timeout_;
  ReplicaBarrier barrier_;
  std::vector<ncclComm_t> comms_;
  bool across_processes_ = false;
  // Per replica, touched only by that replica's thread (and the destructor).
  std::vector<bool> aborted_;
};

// NCCL cannot put two ranks of one communicator on one GPU.
Status CheckDistinctCards(const std::vector<Device*>& devices) {
  for (size_t i = 0; i < devices.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (devices[i]->physical().uuid == devices[j]->physical().uuid) {
        return InvalidArgumentError("NCCL cannot put two ranks on one GPU: " +
                                    devices[i]->full_name() + " and " +
                                    devices[j]->full_name() + " share card " +
                                    devices[i]->physical().uuid + "; use same-card");
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
