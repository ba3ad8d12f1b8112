#include "strategy/gradient_reducer.h"

#include <algorithm>
#include <string>

namespace tower {

std::vector<size_t> PlanBuckets(Span<const int64_t> gradient_bytes, int64_t bucket_bytes) {
  std::vector<size_t> ends;
  int64_t filled = 0;
  for (size_t i = 0; i < gradient_bytes.size(); ++i) {
    filled += gradient_bytes[i];
    if (i + 1 == gradient_bytes.size() || filled >= bucket_bytes) {
      ends.push_back(i + 1);
      filled = 0;
    }
  }
  return ends;
}

Status BucketedGradientReducer::Begin(Span<const int64_t> gradient_bytes, int pass,
                                      int passes) {
  if (pass != 0 || passes != 1) {
    return FailedPreconditionError("gradient reducer: pass " + std::to_string(pass) + " of " +
                                   std::to_string(passes) + "; without virtual shards a "
                                   "replica runs one pass per step");
  }
  if (!std::equal(gradient_bytes.begin(), gradient_bytes.end(), sizes_.begin(), sizes_.end())) {
    sizes_.assign(gradient_bytes.begin(), gradient_bytes.end());
    bucket_ends_ = PlanBuckets(sizes_, bucket_bytes_);
  }
  next_ = 0;
  bucket_ = 0;
  pending_.clear();
  started_ = true;
  return OkStatus();
}

Status BucketedGradientReducer::Add(Tensor* gradient) {
  if (!started_) return FailedPreconditionError("gradient reducer: Add before Begin");
  if (next_ >= sizes_.size()) {
    return InvalidArgumentError("gradient reducer: gradient " + std::to_string(next_ + 1) +
                                " of a step announced with " + std::to_string(sizes_.size()));
  }
  if (static_cast<int64_t>(gradient->bytes()) != sizes_[next_]) {
    return InvalidArgumentError("gradient reducer: gradient " + std::to_string(next_ + 1) +
                                " has " + std::to_string(gradient->bytes()) +
                                " bytes, announced " + std::to_string(sizes_[next_]));
  }
  pending_.push_back(gradient);
  ++next_;
  // A full bucket is summed now, except the last (Finish adds the extras to it).
  if (next_ == bucket_ends_[bucket_] && bucket_ + 1 < bucket_ends_.size()) {
    TOWER_RETURN_IF_ERROR(ops_->AllReduceSum(replica_, pending_));
    pending_.clear();
    ++bucket_;
  }
  return OkStatus();
}

Status BucketedGradientReducer::Finish(Span<Tensor* const> extra) {
  if (!started_) return FailedPreconditionError("gradient reducer: Finish before Begin");
  started_ = false;
  if (next_ != sizes_.size()) {
    return InvalidArgumentError("gradient reducer: the step ended after " +
                                std::to_string(next_) + " of " + std::to_string(sizes_.size()) +
                                " announced gradients");
  }
  for (Tensor* tensor : extra) pending_.push_back(tensor);
  if (!pending_.empty()) TOWER_RETURN_IF_ERROR(ops_->AllReduceSum(replica_, pending_));
  pending_.clear();
  return ops_->FinishReductions(replica_);
}

}  // namespace tower
