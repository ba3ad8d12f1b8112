#include "strategy/reducers/gradient_folding.h"

#include <string>

#include "strategy/runtime/replica_scheduler.h"

namespace tower {

GradientFolding::GradientFolding(int replicas, int groups)
    : deal_(replicas, groups),
      progress_(static_cast<size_t>(replicas)),
      group_(static_cast<size_t>(groups)) {}

void GradientFolding::Publish(int replica, uint64_t generation, size_t index, Tensor* sum) {
  if (leads(replica)) {
    std::vector<Tensor*>& sums = group_[group_of(replica)].sums;
    if (sums.size() <= index) sums.resize(index + 1);  // the first step only
    sums[index] = sum;
  }
  progress_[replica].word.store(Word(generation, index + 1), std::memory_order_release);
}

StatusOr<Span<Tensor* const>> GradientFolding::WaitForSums(int replica, uint64_t generation,
                                                          size_t first, size_t count) {
  const int before = deal_.previous_of(replica);
  if (before < 0) return Span<Tensor* const>();
  const std::atomic<uint64_t>& word = progress_[before].word;
  // A word of another generation is the last step's (or an older run's): a member that runs
  // ahead of the one before it waits for this step's gradients, never takes those.
  auto ready = [&](uint64_t w) {
    return (w >> kCountBits) == generation && (w & kCountMask) >= first + count;
  };
  while (!ready(word.load(std::memory_order_acquire))) {
    if (aborted_.load(std::memory_order_acquire)) return reason_;
    if (!ReplicaScheduler::YieldToOtherReplicas()) {
      return FailedPreconditionError("gradient folding: replica " + std::to_string(replica) +
                                     " waits for replica " + std::to_string(before) +
                                     " outside a replica fiber (folding needs the replicas "
                                     "of a group on one thread)");
    }
  }
  // A group's replicas share one thread, so the one before this one cannot end its step
  // while this one runs, except by an abort (a failure elsewhere): then its tensors may be
  // gone. Checked after the wait; the caller takes its own handles on the sums before it
  // hands the thread on again.
  if (aborted_.load(std::memory_order_acquire)) return reason_;
  const std::vector<Tensor*>& sums = group_[group_of(replica)].sums;
  return Span<Tensor* const>(sums.data() + first, count);
}

void GradientFolding::Abort(const Status& reason) {
  std::lock_guard<std::mutex> lock(abort_mu_);
  if (aborted_.load(std::memory_order_relaxed)) return;
  reason_ = AbortedError("gradient folding stopped: " + reason.message());
  aborted_.store(true, std::memory_order_release);
}

void GradientFolding::Reset() {
  std::lock_guard<std::mutex> lock(abort_mu_);
  aborted_.store(false, std::memory_order_relaxed);
  reason_ = OkStatus();
}

}  // namespace tower
