#include "model/replica_step_log.h"

#include <cstring>
#include <string>
#include <vector>

#include "strategy/step/distribution.h"
#include "model/sequential.h"
#include "strategy/collectives/flight_recorder.h"
#include "util/logging.h"

namespace tower {

Status ReplicaStepLog::OnBatchEnd(Sequential& model, int64_t step, const Logs&) {
  if (logged_) return OkStatus();
  logged_ = true;
  Distribution* dist = model.distribution();
  const int local = dist->num_local_replicas();
  const int in_sync = dist->num_replicas_in_sync();
  const int batches = dist->batched_groups();
  // Each local replica's in-process sums of this step (the flight recorder numbers a
  // replica's sums per replica; the process's own collectives have replica -1).
  std::vector<int64_t> calls(local, 0), bytes(local, 0);
  for (const CollectiveRecord& record : FlightRecorder::Get().Records()) {
    if (std::strcmp(record.scope, "replicas") != 0 || record.step != step) continue;
    if (record.replica < 0 || record.replica >= local) continue;
    ++calls[record.replica];
    bytes[record.replica] += record.bytes;
  }
  for (int r = 0; r < local; ++r) {
    const int global = dist->first_global_replica() + r;
    const RowRange rows = ReplicaRows(global_batch_, in_sync, global);
    std::string line = "Step " + std::to_string(step) + ": replica " + std::to_string(global) +
                       " (" + dist->replica_device(r)->full_name() + "), its shard rows " +
                       std::to_string(rows.first) + "-" + std::to_string(rows.end() - 1) +
                       " of " + std::to_string(global_batch_) + ": ";
    if (in_sync == 1) {
      line += "the only replica, no all-reduce";
    } else if (batches > 0 && r >= batches) {
      line += "computed by replica " + std::to_string(dist->first_global_replica() + r % batches) +
              " in its batch (batched replica rows), no work or all-reduce of its own";
    } else if (batches > 0) {
      line += Distribution::DescribeBatch(local, batches, r) + " as one batch, " +
              std::to_string(calls[r]) + " all-reduce call(s) among the " +
              std::to_string(batches) + " batch(es), " + std::to_string(bytes[r]) + " bytes";
    } else {
      line += std::to_string(calls[r]) + " all-reduce call(s) with the other " +
              std::to_string(in_sync - 1) + " replica(s), " + std::to_string(bytes[r]) +
              " bytes";
    }
    TOWER_LOG(INFO) << line;
  }
  return OkStatus();
}

}  // namespace tower
