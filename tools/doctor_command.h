// `tower doctor DIR`: reads the flight recorder files every rank wrote into DIR
// (flight_recorder.rank<R>.json, strategy/collectives/flight_recorder.h) and says, in one paragraph, who
// went astray: the rank whose collective N differs from the others' (its fingerprint, and
// what the collective was: kind, step, bucket, bytes), or the rank that never reached
// collective N; then what every rank was doing when it wrote its file.
#ifndef TOWER_TOOLS_DOCTOR_COMMAND_H_
#define TOWER_TOOLS_DOCTOR_COMMAND_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "util/statusor.h"

namespace tower {

// One flight record as read back.
struct RecordedCollectiveView {
  std::string scope;  // "workers" or "replicas"
  std::string kind;
  uint64_t sequence = 0;
  int64_t step = 0;
  int bucket = -1;
  int replica = -1;
  int64_t bytes = 0;
  std::string dtype;
  std::string fingerprint;
  std::string what;
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  std::string state;  // "done", "in flight", "failed"
};

// One rank's file.
struct RankDump {
  int rank = 0;
  int world_size = 1;
  std::string host;
  std::string reason;
  int64_t dumped_unix_ns = 0;
  std::vector<RecordedCollectiveView> records;
};

StatusOr<RankDump> ParseRankDump(const std::string& json_text, const std::string& path);

struct Diagnosis {
  bool problem = false;    // a divergence or a rank that never arrived was found
  int faulty_rank = -1;
  uint64_t sequence = 0;   // the collective where it happened
  std::string expected_fingerprint;
  std::string actual_fingerprint;  // "" when the faulty rank never reached it
  std::string paragraph;
};

// What the dumps say (they need not be complete: a rank without a file is named).
Diagnosis Diagnose(const std::vector<RankDump>& dumps);

// Returns 0 when no problem was found, 1 when one was named, 2 on bad input.
int RunDoctorCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tower

#endif  // TOWER_TOOLS_DOCTOR_COMMAND_H_
