// NCCL all-reduce for GPUs on distinct cards. Communicators are created once
// (ncclCommInitAll) when the strategy is built; each replica thread then drives its own
// communicator on its device's stream. Before launching, the replicas meet on the host (a
// barrier with a deadline that names a missing replica), so a replica that failed or never
// came cannot leave the others' NCCL kernels waiting on the GPU forever.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>

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
        barrier_(std::move(names), timeout, /*spin=*/true),
        comms_(devices_.size(), nullptr) {}

  ~NcclAllReduce() override {
    for (size_t r = 0; r < comms_.size(); ++r) {
      if (comms_[r] == nullptr) continue;
      ScopedCudaDevice device(devices_[r]->physical().index);
      ncclCommDestroy(comms_[r]);
    }
  }

  Status Init() {
    std::vector<int> ordinals;
    for (Device* device : devices_) ordinals.push_back(device->physical().index);
    TOWER_NCCL_RETURN_IF_ERROR(
        ncclCommInitAll(comms_.data(), static_cast<int>(comms_.size()), ordinals.data()),
        "the NCCL communicators");
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
    if (devices_.size() == 1) return OkStatus();
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
    return OkStatus();
  }

  const std::vector<Device*> devices_;
  const std::vector<std::string> names_;
  ReplicaBarrier barrier_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace

bool GpuCollectivesBuilt() { return true; }

StatusOr<std::unique_ptr<CrossDeviceOps>> MakeNcclAllReduce(
    const std::vector<Device*>& devices, const std::vector<std::string>& replica_names,
    std::chrono::milliseconds timeout) {
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
  auto ops = std::make_unique<NcclAllReduce>(devices, replica_names, timeout);
  TOWER_RETURN_IF_ERROR(ops->Init());
  return std::unique_ptr<CrossDeviceOps>(std::move(ops));
}

}  // namespace tower
