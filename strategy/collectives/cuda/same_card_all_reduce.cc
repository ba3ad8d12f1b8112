// Same-card all-reduce for logical GPUs sharing one physical card: NCCL refuses two ranks
// on one GPU, and TensorFlow falls back to the CPU; here one kernel on the card reads every
// replica's buffer and writes the sum to all of them.
//
// Ordering without host syncs: each replica records an event on its stream (its gradients
// are ready there) and meets the others on the host; replica 0's stream waits for every
// event, runs the kernel, and records `done`; every other replica's stream waits for `done`
// before its next work (the optimizer update). The tree sum (deterministic mode) orders the
// same way; its kernel evaluates the summation tree over every replica's partial sums.
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "device/cuda/cuda_status.h"
#include "strategy/collectives/cuda/same_card_kernel.h"
#include "strategy/collectives/cuda/tree_sum.h"
#include "strategy/collectives/gpu_collectives.h"
#include "strategy/collectives/replica_barrier.h"

namespace tower {
namespace {

class SameCardAllReduce : public CrossDeviceOps {
 public:
  SameCardAllReduce(std::vector<Device*> devices, std::vector<std::string> names,
                    std::chrono::milliseconds timeout, bool spin)
      : devices_(std::move(devices)),
        names_(names),
        barrier_(std::move(names), timeout, spin),
        published_(devices_.size()),
        published_parts_(devices_.size()),
        plans_(devices_.size()),
        ready_(devices_.size(), nullptr) {}

  ~SameCardAllReduce() override {
    ScopedCudaDevice device(ordinal());
    for (cudaEvent_t event : ready_) {
      if (event != nullptr) IgnoreCudaError(cudaEventDestroy(event));
    }
    if (done_ != nullptr) IgnoreCudaError(cudaEventDestroy(done_));
  }

  Status Init() {
    ScopedCudaDevice device(ordinal());
    TOWER_RETURN_IF_ERROR(device.status());
    for (cudaEvent_t& event : ready_) {
      TOWER_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                                 devices_[0]->full_name());
    }
    TOWER_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming),
                               devices_[0]->full_name());
    return OkStatus();
  }

  std::string name() const override { return "same-card"; }

  Status Broadcast(int replica, Span<Tensor* const> tensors) override {
    return Collective(replica, tensors, /*broadcast=*/true);
  }
  void Abort(const Status& reason) override { barrier_.Abort(reason); }
  void Reset() override { barrier_.Reset(); }

 private:
  // The plain sum or the tree sum (`tensors` the roots); no other option.
  Status RunAllReduce(int replica, Span<Tensor* const> tensors,
                      const AllReduceOptions& options) override {
    if (options.tree != nullptr) {
      published_parts_[replica] = options.tree;
      return Collective(replica, tensors, /*broadcast=*/false, /*tree=*/true);
    }
    return Collective(replica, tensors, /*broadcast=*/false);
  }
  int ordinal() const { return devices_[0]->physical().index; }
  cudaStream_t stream(int replica) const {
    return static_cast<cudaStream_t>(devices_[replica]->stream().native_handle());
  }

  Status CheckAll() const {
    for (size_t r = 0; r < published_.size(); ++r) {
      if (published_[r].size() != published_[0].size()) {
        return InvalidArgumentError("all-reduce mismatch: " + names_[r] + " passed " +
                                    std::to_string(published_[r].size()) + " tensors, " +
                                    names_[0] + " passed " + std::to_string(published_[0].size()));
      }
      for (size_t t = 0; t < published_[r].size(); ++t) {
        const Tensor& a = *published_[0][t];
        const Tensor& b = *published_[r][t];
        if (a.shape() != b.shape() || b.dtype() != DType::kFloat32) {
          return InvalidArgumentError("all-reduce mismatch at tensor " + std::to_string(t) +
                                      ": " + names_[0] + " has " + a.shape().ToString() + ", " +
                                      names_[r] + " has " + b.shape().ToString() +
                                      " (float32 only)");
        }
      }
    }
    return OkStatus();
  }

  // Every replica checks every replica's contribution and plans the tree (its own plan
  // cache: the layout is the same from step to step), so all of them report the same error
  // and none launches: shapes, float32, every tensor on its replica's logical GPU of this
  // card (the kernel reads them all), the nodes tiling the leaves, the kernel's limits.
  Status CheckTree(int replica, const SumPlan** plan) {
    TOWER_RETURN_IF_ERROR(
        CheckTreeContributions(published_parts_, published_, names_, /*need_host_memory=*/false));
    const int n = static_cast<int>(devices_.size());
    for (int r = 0; r < n; ++r) {
      const PartialSums& part = *published_parts_[r];
      for (size_t k = 0; k <= part.values.size(); ++k) {
        const bool is_root = k == part.values.size();
        const Span<Tensor* const> list =
            is_root ? published_[r] : Span<Tensor* const>(part.values[k]);
        for (size_t t = 0; t < list.size(); ++t) {
          if (list[t]->device() != devices_[r]) {
            return InvalidArgumentError(
                "same-card tree all-reduce: " + names_[r] + "'s " +
                (is_root ? std::string("root") : part.nodes[k].ToString()) + " of tensor " +
                std::to_string(t) + " is on " + list[t]->device()->full_name() +
                ", not on the replica's own device " + devices_[r]->full_name());
          }
        }
      }
    }
    const TreeNode root{0, published_parts_[0]->num_leaves};
    TOWER_ASSIGN_OR_RETURN(*plan, plans_[replica].Get(root.end, published_parts_,
                                                      Span<const TreeNode>(&root, 1)));
    return CheckSumPlanFits(**plan, n);
  }

  // A CUDA failure aborts the others, who would otherwise wait for this replica.
  Status Fail(int replica, const Status& status) {
    const Status named = status.WithContext(names_[replica]);
    barrier_.Abort(named);
    return named;
  }

  Status Collective(int replica, Span<Tensor* const> tensors, bool broadcast, bool tree = false) {
    const int n = static_cast<int>(devices_.size());
    if (n == 1 && !tree) return OkStatus();  // one replica's tree still forms its root
    ScopedCudaDevice device(ordinal());
    TOWER_RETURN_IF_ERROR(device.status());
    published_[replica] = tensors;
    const cudaError_t record = cudaEventRecord(ready_[replica], stream(replica));
    if (record != cudaSuccess) {
      return Fail(replica, CudaError(record, "cudaEventRecord(ready)", __FILE__, __LINE__,
                                     devices_[replica]->full_name()));
    }
    TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
    const SumPlan* plan = nullptr;
    const Status check = tree ? CheckTree(replica, &plan) : CheckAll();
    if (check.ok() && replica == 0) {
      Status launched =
          tree ? LaunchTree(*plan, tensors.size()) : Launch(tensors.size(), broadcast);
      if (!launched.ok()) return Fail(replica, launched);
    }
    TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
    if (!check.ok()) return check;
    if (replica != 0) {
      const cudaError_t wait = cudaStreamWaitEvent(stream(replica), done_, 0);
      if (wait != cudaSuccess) {
        return Fail(replica, CudaError(wait, "cudaStreamWaitEvent(done)", __FILE__, __LINE__,
                                       devices_[replica]->full_name()));
      }
    }
    return OkStatus();
  }

  // On replica 0's stream: wait for every replica, sum (or copy replica 0's), record done.
  Status Launch(size_t num_tensors, bool broadcast) {
    const int n = static_cast<int>(devices_.size());
    const std::string& where = devices_[0]->full_name();
    for (int k = 1; k < n; ++k) {
      TOWER_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream(0), ready_[k], 0), where);
    }
    for (size_t t = 0; t < num_tensors; ++t) {
      const int64_t count = published_[0][t]->num_elements();
      if (broadcast) {
        for (int k = 1; k < n; ++k) {
          TOWER_CUDA_RETURN_IF_ERROR(
              cudaMemcpyAsync(published_[k][t]->raw_data(), published_[0][t]->raw_data(),
                              published_[0][t]->bytes(), cudaMemcpyDeviceToDevice, stream(0)),
              where);
        }
        continue;
      }
      cuda::ReplicaBuffers buffers{};
      for (int k = 0; k < n; ++k) buffers.data[k] = published_[k][t]->data<float>();
      TOWER_CUDA_RETURN_IF_ERROR(cuda::LaunchSameCardSum(buffers, n, count, stream(0)), where);
    }
    TOWER_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_, stream(0)), where);
    return OkStatus();
  }

  // On replica 0's stream: wait for every replica, evaluate each tensor's tree into every
  // replica's root (one launch per tensor), record done.
  Status LaunchTree(const SumPlan& plan, size_t num_tensors) {
    const int n = static_cast<int>(devices_.size());
    const std::string& where = devices_[0]->full_name();
    for (int k = 1; k < n; ++k) {
      TOWER_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream(0), ready_[k], 0), where);
    }
    std::vector<const float*>& inputs = tree_inputs_;
    std::vector<float*>& outputs = tree_outputs_;
    for (size_t t = 0; t < num_tensors; ++t) {
      inputs.clear();
      outputs.clear();
      // Input slots in the plan's order: replica after replica, each one's nodes in order.
      for (const PartialSums* part : published_parts_) {
        for (const std::vector<Tensor*>& node : part->values) {
          inputs.push_back(node[t]->data<float>());
        }
      }
      for (int k = 0; k < n; ++k) outputs.push_back(published_[k][t]->data<float>());
      TOWER_RETURN_IF_ERROR(LaunchSumPlan(plan, inputs, outputs,
                                          published_[0][t]->num_elements(), stream(0), where));
    }
    TOWER_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_, stream(0)), where);
    return OkStatus();
  }

  const std::vector<Device*> devices_;
  const std::vector<std::string> names_;
  ReplicaBarrier barrier_;
  std::vector<Span<Tensor* const>> published_;
  // The tree sum: each replica's partial sums; a plan cache per replica thread; replica 0's
  // launch scratch.
  std::vector<const PartialSums*> published_parts_;
  std::vector<TreePlanCache> plans_;
  std::vector<const float*> tree_inputs_;
  std::vector<float*> tree_outputs_;
  std::vector<cudaEvent_t> ready_;
  cudaEvent_t done_ = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<CrossDeviceOps>> MakeSameCardAllReduce(
    const std::vector<Device*>& devices, const std::vector<std::string>& replica_names,
    std::chrono::milliseconds timeout, bool spin) {
  if (devices.size() > cuda::kMaxSameCardReplicas) {
    return InvalidArgumentError("same-card all-reduce supports up to " +
                                std::to_string(cuda::kMaxSameCardReplicas) + " replicas");
  }
  for (Device* device : devices) {
    if (!device->is_gpu() || device->physical().uuid != devices[0]->physical().uuid ||
        device->stream().host_addressable()) {
      return InvalidArgumentError("same-card all-reduce needs every replica on one GPU card; " +
                                  device->full_name() + " is not on " +
                                  devices[0]->physical().uuid);
    }
  }
  auto ops = std::make_unique<SameCardAllReduce>(devices, replica_names, timeout, spin);
  TOWER_RETURN_IF_ERROR(ops->Init());
  return std::unique_ptr<CrossDeviceOps>(std::move(ops));
}

}  // namespace tower
