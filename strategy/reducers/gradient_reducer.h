// BucketedGradientReducer: how a strategy sums one replica's gradients during backward, in
// buckets of about `bucket_bytes` (PyTorch DDP's Reducer, 25 MB by default).
//
// The buckets are planned when a step announces its gradient sizes (the plan is kept while
// they stay the same): gradients join the open bucket in backward order, and a bucket is
// summed the moment its last gradient arrives once it holds `bucket_bytes` or more, so the
// all-reduce of late layers overlaps the backward pass of early ones on paths that reduce
// asynchronously. The last bucket waits for Finish, which adds the step's extra tensors (the
// loss): one all-reduce also gives every replica the global loss. Every replica plans the
// same buckets from the same sizes, so the collectives match.
#ifndef TOWER_STRATEGY_REDUCERS_GRADIENT_REDUCER_H_
#define TOWER_STRATEGY_REDUCERS_GRADIENT_REDUCER_H_

#include <cstdint>
#include <vector>

#include "strategy/step/distribution.h"
#include "strategy/step/pass_accumulator.h"
#include "strategy/collectives/cross_device_ops.h"
#include "strategy/reducers/gradient_folding.h"
#include "strategy/collectives/flight_recorder.h"
#include "util/trace.h"

namespace tower {

// Where each bucket ends: for gradients of `gradient_bytes` (in backward order), the index
// one past each bucket's last gradient. The last bucket always ends at the last gradient
// (and is the one Finish sums); no gradients: no buckets.
std::vector<size_t> PlanBuckets(Span<const int64_t> gradient_bytes, int64_t bucket_bytes);

// The bookkeeping both reducers share: the announced sizes and their bucket plan, which
// gradient comes next, and the open bucket's tensors.
// What the flight recorder keeps of replica `replica`'s sum of bucket `bucket`.
CollectiveRecord BucketSumRecord(int replica, int bucket, Span<Tensor* const> tensors);

// Runs `sum` (a replica's all-reduce of gradient bucket `bucket`) as the trace and the flight
// recorder see it: a span on the replica's lane, a flight record, and the bucket known to
// the collectives beneath (the workers' all-reduce records it). A template, so that the
// step stays free of allocations.
template <typename Sum>
Status SumBucketRecorded(int replica, int bucket, Span<Tensor* const> tensors, const Sum& sum) {
  BucketScope in_bucket(bucket);
  const CollectiveRecord record = BucketSumRecord(replica, bucket, tensors);
  RecordedCollective recorded(record);
  trace::Span span("all-reduce bucket", trace::Category::kAllReduce, bucket, record.bytes);
  const Status status = sum();
  recorded.Finish(status.ok());
  return status;
}

class GradientBuckets {
 public:
  explicit GradientBuckets(int64_t bucket_bytes) : bucket_bytes_(bucket_bytes) {}
  // Starts a pass announcing these sizes (re-planning when they changed). With
  // `must_match`, other sizes than the current ones are an error instead.
  Status Start(Span<const int64_t> gradient_bytes, bool must_match);
  // Checks `gradient` against the announcement and counts it.
  Status Next(const Tensor& gradient);
  // Adds the counted gradient to the open bucket; true when that closes a bucket other than
  // the last (which Finish sends, with the extras): send pending() then call Sent().
  bool JoinBucket(Tensor* gradient);
  void Sent();
  // Every announced gradient came.
  Status CheckComplete(const char* what) const;
  // One past the last gradient of the bucket that holds gradient `index`: a replica sends
  // that bucket before it makes the gradients from there on.
  size_t BucketEnd(size_t index) const;

  const std::vector<int64_t>& sizes() const { return sizes_; }
  size_t added() const { return next_; }
  // The open bucket's index (0 first in each pass).
  int bucket() const { return static_cast<int>(bucket_); }
  std::vector<Tensor*>& pending() { return pending_; }
  int64_t bucket_bytes() const { return bucket_bytes_; }

 private:
  const int64_t bucket_bytes_;
  std::vector<int64_t> sizes_;       // the announced gradient sizes, in bytes
  std::vector<size_t> bucket_ends_;  // PlanBuckets(sizes_)
  size_t next_ = 0;                  // gradients added in this pass
  size_t bucket_ = 0;                // the open bucket
  std::vector<Tensor*> pending_;     // the open bucket's tensors so far
};

class BucketedGradientReducer : public GradientReducer {
 public:
  // Sums through `ops` as local replica `replica`. With `folding` (which `ops` can fold for),
  // a step of one pass folds this replica's gradients into its group's
  // (strategy/reducers/gradient_folding.h).
  BucketedGradientReducer(CrossDeviceOps* ops, int replica, int64_t bucket_bytes,
                          GradientFolding* folding = nullptr)
      : ops_(ops), replica_(replica), buckets_(bucket_bytes), folding_(folding) {}

  // Passes before the last (gradient accumulation) are summed locally (PassAccumulator);
  // the last pass's gradients, holding them, are summed across replicas in buckets.
  Status Begin(Span<const int64_t> gradient_bytes, int pass, int passes) override;
  Status Add(Tensor* gradient) override;
  StatusOr<Span<Tensor* const>> RunningSums(size_t first, size_t count) override;
  Status Finish(Span<Tensor* const> extra) override;
  // Where the path can (CrossDeviceOps::Supports AllReduceOptions::handed).
  bool HandOverSums(SummedGradientSink* sink) override;

  int64_t bucket_bytes() const { return buckets_.bucket_bytes(); }

 private:
  // All-reduces the open bucket, whose first `gradients` tensors are gradients.
  Status SumPending(size_t gradients);
  // Folds gradient `index` (`gradient`) into the group's sum: a leader's is the sum; a
  // member's is added into it unless the layer already did, and becomes that sum.
  Status Fold(size_t index, Tensor* gradient);

  CrossDeviceOps* const ops_;
  const int replica_;
  GradientBuckets buckets_;
  PassAccumulator passes_;
  bool started_ = false;
  SummedGradientSink* sink_ = nullptr;
  GradientFolding* const folding_;
  // RunningSums' answer: handles on the sums (they stay valid whatever the group's other
  // fibers do meanwhile), and pointers to them; capacity kept, emptied by Finish.
  std::vector<Tensor> running_sums_;
  std::vector<Tensor*> running_sum_pointers_;
  bool folding_step_ = false;  // this step's gradients are folded
  uint64_t generation_ = 0;    // this step's, GradientFolding::Generation
  uint64_t run_ = 0;           // the run whose passes begins_ counts
  uint64_t begins_ = 0;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_REDUCERS_GRADIENT_REDUCER_H_
