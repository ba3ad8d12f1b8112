// ReplicaStepLog: after the first training step, one line per local replica saying what it
// did: its device, the rows of the global batch that were its shard, and the sums it took
// part in (how many in-process all-reduce calls, how many bytes), read from the flight
// recorder's records of that step. `tower train --verbose=2` adds it, so that a run on N
// logical CPUs shows N replicas each computing its shard and summing with the others, as N
// GPUs would; with batched replica rows (MirroredStrategyOptions::batch_replica_rows) it shows
// which replica computed whose rows instead.
#ifndef TOWER_MODEL_REPLICA_STEP_LOG_H_
#define TOWER_MODEL_REPLICA_STEP_LOG_H_

#include <cstdint>

#include "model/callback.h"

namespace tower {

class ReplicaStepLog : public Callback {
 public:
  // `global_batch`: the rows of each global batch (for each replica's shard).
  explicit ReplicaStepLog(int64_t global_batch) : global_batch_(global_batch) {}

  Status OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) override;

 private:
  int64_t global_batch_;
  bool logged_ = false;
};

}  // namespace tower

#endif  // TOWER_MODEL_REPLICA_STEP_LOG_H_
