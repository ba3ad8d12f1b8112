#include "strategy/mpi/cross_process_all_reduce.h"

#include <cstring>

namespace tower {
namespace {

int64_t TotalElements(Span<Tensor* const> tensors) {
  int64_t total = 0;
  for (const Tensor* t : tensors) total += t->num_elements();
  return total;
}

}  // namespace

CrossProcessAllReduce::CrossProcessAllReduce(std::unique_ptr<CrossDeviceOps> local,
                                             MpiWorld* world,
                                             std::vector<std::string> replica_names,
                                             std::chrono::milliseconds timeout, bool spin)
    : local_(std::move(local)),
      world_(world),
      timeout_(timeout),
      // The other replicas wait here while replica 0 runs the cross-process step, which has
      // the deadline `timeout` of its own and, on expiry, aborts this barrier with the error
      // that names the missing worker. Waiting twice as long lets that error, not a local
      // "replica 0 never arrived", be the one every replica reports.
      barrier_(replica_names, 2 * timeout, spin),
      published_(replica_names.size()) {}

void CrossProcessAllReduce::Abort(const Status& reason) {
  local_->Abort(reason);
  barrier_.Abort(reason);
}

void CrossProcessAllReduce::Reset() {
  local_->Reset();
  barrier_.Reset();
}

Status CrossProcessAllReduce::CrossThenShare(int replica, Span<Tensor* const> tensors,
                                             const std::function<Status()>& cross) {
  published_[replica] = tensors;
  if (replica == 0) {
    const Status status = cross();
    if (!status.ok()) {
      barrier_.Abort(status);
      return status;
    }
  }
  TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
  Status copied;
  if (replica != 0) {
    for (size_t t = 0; t < tensors.size() && copied.ok(); ++t) {
      copied = tensors[t]->CopyFrom(*published_[0][t]);
    }
  }
  if (!copied.ok()) barrier_.Abort(copied);
  // Replica 0's tensors must outlive the others' copies.
  TOWER_RETURN_IF_ERROR(barrier_.Wait(replica));
  return copied;
}

Status CrossProcessAllReduce::AllReduceSum(int replica, Span<Tensor* const> tensors) {
  TOWER_RETURN_IF_ERROR(local_->AllReduceSum(replica, tensors));
  return CrossThenShare(replica, tensors, [&]() -> Status {
    // Every tensor in one message: pack, sum across workers, unpack.
    staging_.resize(static_cast<size_t>(TotalElements(tensors)));
    int64_t offset = 0;
    for (const Tensor* t : tensors) {
      TOWER_RETURN_IF_ERROR(t->ToHostBytes(staging_.data() + offset));
      offset += t->num_elements();
    }
    TOWER_RETURN_IF_ERROR(world_->AllReduceSum(
        staging_.data(), offset, timeout_,
        "all-reduce of " + std::to_string(tensors.size()) + " tensors (" +
            std::to_string(offset) + " floats)"));
    offset = 0;
    for (Tensor* t : tensors) {
      TOWER_RETURN_IF_ERROR(
          t->device()->stream().CopyFromHost(t->raw_data(), staging_.data() + offset, t->bytes()));
      offset += t->num_elements();
    }
    return OkStatus();
  });
}

Status CrossProcessAllReduce::Broadcast(int replica, Span<Tensor* const> tensors) {
  return CrossThenShare(replica, tensors, [&]() -> Status {
    staging_.resize(static_cast<size_t>(TotalElements(tensors)));
    int64_t offset = 0;
    for (const Tensor* t : tensors) {
      TOWER_RETURN_IF_ERROR(t->ToHostBytes(staging_.data() + offset));
      offset += t->num_elements();
    }
    TOWER_RETURN_IF_ERROR(world_->Broadcast(staging_.data(), offset * sizeof(float), 0, timeout_,
                                            "broadcast of " + std::to_string(tensors.size()) +
                                                " tensors from rank 0"));
    offset = 0;
    for (Tensor* t : tensors) {
      TOWER_RETURN_IF_ERROR(
          t->device()->stream().CopyFromHost(t->raw_data(), staging_.data() + offset, t->bytes()));
      offset += t->num_elements();
    }
    return OkStatus();
  });
}

}  // namespace tower
