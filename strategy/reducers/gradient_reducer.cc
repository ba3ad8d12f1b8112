#include "strategy/reducers/gradient_reducer.h"

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

size_t GradientBuckets::BucketEnd(size_t index) const {
  const auto end = std::upper_bound(bucket_ends_.begin(), bucket_ends_.end(), index);
  return end == bucket_ends_.end() ? sizes_.size() : *end;
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
  if (folding_ != nullptr) {
    // Every replica begins the same passes in a run; a step of several passes (gradient
    // accumulation) keeps each replica's own gradients.
    if (folding_->run() != run_) {
      run_ = folding_->run();
      begins_ = 0;
    }
    generation_ = folding_->Generation(begins_++);
    for (Tensor& sum : running_sums_) sum = Tensor();  // a failed step's, if any
    folding_step_ = GradientFolding::FoldsStep(gradient_bytes.size(), passes);
  }
  return OkStatus();
}

StatusOr<Span<Tensor* const>> BucketedGradientReducer::RunningSums(size_t first, size_t count) {
  if (!started_ || !folding_step_ || folding_->leads(replica_)) return Span<Tensor* const>();
  // The replica before this one sends the bucket of gradient `first` before it makes the
  // gradients after that bucket, and the bucket waits for this replica too: so only the sums
  // up to the bucket's end are waited for, the others are null (the layer makes those
  // gradients new, and Fold adds them). The first is always there, so which gradients are
  // added in place depends on the layers alone, not on the buckets or the timing.
  const size_t ready = std::min(count, buckets_.BucketEnd(first) - first);
  TOWER_ASSIGN_OR_RETURN(Span<Tensor* const> sums,
                         folding_->WaitForSums(replica_, generation_, first, ready));
  running_sums_.resize(count);
  running_sum_pointers_.resize(count);
  for (size_t k = 0; k < count; ++k) {
    running_sums_[k] = k < ready ? *sums[k] : Tensor();
    running_sum_pointers_[k] = k < ready ? &running_sums_[k] : nullptr;
  }
  return Span<Tensor* const>(running_sum_pointers_.data(), count);
}

Status BucketedGradientReducer::Fold(size_t index, Tensor* gradient) {
  if (folding_->leads(replica_)) {
    folding_->Publish(replica_, generation_, index, gradient);
    return OkStatus();
  }
  TOWER_ASSIGN_OR_RETURN(Span<Tensor* const> sums,
                         folding_->WaitForSums(replica_, generation_, index, 1));
  const Tensor sum = *sums[0];  // a handle: see WaitForSums
  if (gradient->raw_data() != sum.raw_data()) {
    // A layer that made a new gradient: added here, on the host (folding is for host
    // replicas), in the group's order.
    if (gradient->dtype() != DType::kFloat32 || sum.dtype() != DType::kFloat32 ||
        gradient->num_elements() != sum.num_elements() ||
        !gradient->device()->stream().host_addressable() ||
        !sum.device()->stream().host_addressable()) {
      return InvalidArgumentError("gradient folding: gradient " + std::to_string(index + 1) +
                                  " of replica " + std::to_string(replica_) +
                                  " is not a float32 host tensor of its group sum's size");
    }
    float* to = sum.data<float>();
    const float* from = gradient->data<float>();
    const int64_t n = sum.num_elements();
    for (int64_t i = 0; i < n; ++i) to[i] += from[i];
    *gradient = sum;
  }
  folding_->Publish(replica_, generation_, index, nullptr);
  return OkStatus();
}

Status BucketedGradientReducer::Add(Tensor* gradient) {
  if (!started_) return FailedPreconditionError("gradient reducer: Add before Begin");
  TOWER_RETURN_IF_ERROR(buckets_.Next(*gradient));
  // An earlier pass's gradient joins the local partial sum; the last pass's receives it.
  TOWER_RETURN_IF_ERROR(passes_.Add(buckets_.added() - 1, gradient));
  if (!passes_.last_pass()) return OkStatus();
  if (folding_step_) TOWER_RETURN_IF_ERROR(Fold(buckets_.added() - 1, gradient));
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
    // The bucket's gradients are the last `gradients` counted so far.
    const size_t first = buckets_.added() - gradients;
    AllReduceOptions options;
    if (folding_step_) {
      options.folded = gradients;
      options.fold_groups = folding_->groups();
    }
    if (sink_ != nullptr) {
      options.handed = gradients;
      options.first_gradient = first;
      options.sink = sink_;
    }
    return ops_->AllReduce(replica_, pending, options);
  });
}

bool BucketedGradientReducer::HandOverSums(SummedGradientSink* sink) {
  if (sink != nullptr && !ops_->Supports(AllReduceOptions::HandOver(1, 0, sink))) return false;
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
  folding_step_ = false;
  for (Tensor& sum : running_sums_) sum = Tensor();
  return ops_->FinishReductions(replica_);
}

}  // namespace tower
