#include "strategy/gradient_reducer.h"

#include <algorithm>
#include <string>

namespace tower {

CollectiveRecord BucketSumRecord(int replica, int bucket, Span<Tensor* const> tensors) {
  CollectiveRecord record;
  record.scope = "replicas";
  record.kind = "all-reduce";
  record.step = CurrentStep();
  record.bucket = bucket;
  record.replica = replica;
  for (const Tensor* t : tensors) record.bytes += static_cast<int64_t>(t->bytes());
  record.layout = TensorLayoutFingerprint(tensors);  // the fingerprint: when read
  return record;
}

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

Status GradientBuckets::Start(Span<const int64_t> gradient_bytes, bool must_match) {
  const bool same =
      std::equal(gradient_bytes.begin(), gradient_bytes.end(), sizes_.begin(), sizes_.end());
  if (!same && must_match) {
    return InvalidArgumentError("gradient reducer: a pass announced other gradient sizes than "
                                "the step's first");
  }
  if (!same) {
    sizes_.assign(gradient_bytes.begin(), gradient_bytes.end());
    bucket_ends_ = PlanBuckets(sizes_, bucket_bytes_);
  }
  next_ = 0;
  bucket_ = 0;
  pending_.clear();
  return OkStatus();
}

Status GradientBuckets::Next(const Tensor& gradient) {
  if (next_ >= sizes_.size()) {
    return InvalidArgumentError("gradient reducer: gradient " + std::to_string(next_ + 1) +
                                " of a pass announced with " + std::to_string(sizes_.size()));
  }
  if (static_cast<int64_t>(gradient.bytes()) != sizes_[next_]) {
    return InvalidArgumentError("gradient reducer: gradient " + std::to_string(next_ + 1) +
                                " has " + std::to_string(gradient.bytes()) +
                                " bytes, announced " + std::to_string(sizes_[next_]));
  }
  ++next_;
  return OkStatus();
}

bool GradientBuckets::JoinBucket(Tensor* gradient) {
  pending_.push_back(gradient);
  return next_ == bucket_ends_[bucket_] && bucket_ + 1 < bucket_ends_.size();
}

void GradientBuckets::Sent() {
  pending_.clear();
  ++bucket_;
}

Status GradientBuckets::CheckComplete(const char* what) const {
  if (next_ == sizes_.size()) return OkStatus();
  return InvalidArgumentError(std::string("gradient reducer: the ") + what + " ended after " +
                              std::to_string(next_) + " of " + std::to_string(sizes_.size()) +
                              " announced gradients");
}

Status BucketedGradientReducer::Begin(Span<const int64_t> gradient_bytes, int pass,
                                      int passes) {
  TOWER_RETURN_IF_ERROR(passes_.Begin(pass, passes));
  // Every pass of a step announces the same gradients.
  TOWER_RETURN_IF_ERROR(buckets_.Start(gradient_bytes, /*must_match=*/pass > 0));
  started_ = true;
  return OkStatus();
}

Status BucketedGradientReducer::Add(Tensor* gradient) {
  if (!started_) return FailedPreconditionError("gradient reducer: Add before Begin");
  TOWER_RETURN_IF_ERROR(buckets_.Next(*gradient));
  // An earlier pass's gradient joins the local partial sum; the last pass's receives it.
  TOWER_RETURN_IF_ERROR(passes_.Add(buckets_.added() - 1, gradient));
  if (!passes_.last_pass()) return OkStatus();
  // A full bucket is summed now, except the last (Finish adds the extras to it).
  if (buckets_.JoinBucket(gradient)) {
    TOWER_RETURN_IF_ERROR(SumPending(buckets_.pending().size()));
    buckets_.Sent();
  }
  return OkStatus();
}

Status BucketedGradientReducer::SumPending(size_t gradients) {
  std::vector<Tensor*>& pending = buckets_.pending();
  return SumBucketRecorded(replica_, buckets_.bucket(), pending, [&]() -> Status {
    if (sink_ == nullptr) return ops_->AllReduceSum(replica_, pending);
    // The bucket's gradients are the last `gradients` counted so far.
    const size_t first = buckets_.added() - gradients;
    return ops_->AllReduceSumHandingOver(replica_, pending, gradients, first, sink_);
  });
}

bool BucketedGradientReducer::HandOverSums(SummedGradientSink* sink) {
  if (sink != nullptr && !ops_->CanHandOverSums()) return false;
  sink_ = sink;
  return sink != nullptr;
}

Status BucketedGradientReducer::Finish(Span<Tensor* const> extra) {
  if (!started_) return FailedPreconditionError("gradient reducer: Finish before Begin");
  started_ = false;
  TOWER_RETURN_IF_ERROR(buckets_.CheckComplete("step"));
  TOWER_RETURN_IF_ERROR(passes_.AddExtras(extra));
  if (!passes_.last_pass()) return OkStatus();
  std::vector<Tensor*>& pending = buckets_.pending();
  const size_t gradients = pending.size();
  for (Tensor* tensor : extra) pending.push_back(tensor);
  if (!pending.empty()) TOWER_RETURN_IF_ERROR(SumPending(gradients));
  pending.clear();
  return ops_->FinishReductions(replica_);
}

}  // namespace tower
