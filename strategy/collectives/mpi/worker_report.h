// The lines an MPI worker prints for a supervisor such as `tower launch`, and their parser:
// one owner of the format on both sides. A line may carry a prefix (a log tag, mpirun's
// --tag-output); the report starts at "tower-worker: ".
//
//   tower-worker: unreachable: rank 2 on host3, rank 3 on host3
//       this worker gave up on those workers (they never reached a collective, or stopped
//       answering in one, within the deadline)
//   tower-worker: started: rank 1 of 3
//       this worker joined the job (MPI and its strategy are up)
//   tower-worker: finished: rank 1 of 3
//       this worker ended its command successfully
#ifndef TOWER_STRATEGY_COLLECTIVES_MPI_WORKER_REPORT_H_
#define TOWER_STRATEGY_COLLECTIVES_MPI_WORKER_REPORT_H_

#include <string>
#include <string_view>
#include <vector>

namespace tower {

// Set (to anything) in the workers' environment by a supervisor that wants the "started" and
// "finished" lines; `tower launch` sets it and passes it on with mpirun's -x.
inline constexpr char kWorkerReportEnv[] = "TOWER_WORKER_REPORTS";

struct UnreachableWorker {
  int rank = 0;
  std::string host;
};

std::string UnreachableWorkersLine(const std::vector<UnreachableWorker>& workers);
std::string StartedLine(int rank, int size);
std::string FinishedLine(int rank, int size);

struct WorkerReport {
  enum class Kind { kNone, kUnreachable, kStarted, kFinished };
  Kind kind = Kind::kNone;
  std::vector<UnreachableWorker> unreachable;  // kUnreachable
  int rank = -1;                               // kStarted, kFinished
  int size = 0;
};
// kNone for any other line (or a malformed report).
WorkerReport ParseWorkerReport(std::string_view line);

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_MPI_WORKER_REPORT_H_
