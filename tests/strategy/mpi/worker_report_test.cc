// The report lines between MPI workers and `tower launch`: what a worker prints is what the
// supervisor reads back, and nothing else is taken for a report.
#include "strategy/collectives/mpi/worker_report.h"

#include <gtest/gtest.h>

namespace tower {
namespace {

TEST(WorkerReportTest, UnreachableWorkersRoundTrip) {
  const std::string line = UnreachableWorkersLine({{2, "host3"}, {5, "node7.cluster"}});
  EXPECT_EQ(line, "tower-worker: unreachable: rank 2 on host3, rank 5 on node7.cluster");
  // With a log prefix and mpirun's line end.
  const WorkerReport report = ParseWorkerReport("[1,0]<stderr>:" + line + "\r\n");
  ASSERT_EQ(report.kind, WorkerReport::Kind::kUnreachable);
  ASSERT_EQ(report.unreachable.size(), 2u);
  EXPECT_EQ(report.unreachable[0].rank, 2);
  EXPECT_EQ(report.unreachable[0].host, "host3");
  EXPECT_EQ(report.unreachable[1].rank, 5);
  EXPECT_EQ(report.unreachable[1].host, "node7.cluster");
}

TEST(WorkerReportTest, StartedRoundTrip) {
  EXPECT_EQ(StartedLine(0, 2), "tower-worker: started: rank 0 of 2");
  const WorkerReport report = ParseWorkerReport("[rank 0] " + StartedLine(0, 2));
  ASSERT_EQ(report.kind, WorkerReport::Kind::kStarted);
  EXPECT_EQ(report.rank, 0);
  EXPECT_EQ(report.size, 2);
}

TEST(WorkerReportTest, FinishedRoundTrip) {
  EXPECT_EQ(FinishedLine(1, 3), "tower-worker: finished: rank 1 of 3");
  const WorkerReport report = ParseWorkerReport(FinishedLine(1, 3));
  ASSERT_EQ(report.kind, WorkerReport::Kind::kFinished);
  EXPECT_EQ(report.rank, 1);
  EXPECT_EQ(report.size, 3);
}

TEST(WorkerReportTest, OtherAndMalformedLinesAreNoReports) {
  for (const char* line : {
           "",
           "error: rank 2 (host host3) never reached collective 4",
           "tower-worker: unreachable: ",
           "tower-worker: unreachable: rank x on host3",
           "tower-worker: unreachable: rank 2 host3",
           "tower-worker: unreachable: rank -1 on host3",
           "tower-worker: unreachable: rank 2 on two words",
           "tower-worker: finished: rank 3 of 3",
           "tower-worker: finished: rank 1 of",
           "tower-worker: finished: rank 1 of 3 extra",
           "tower-worker: started: rank 1 of 0",
           "tower-worker: stopped: rank 1 of 3",
       }) {
    EXPECT_EQ(ParseWorkerReport(line).kind, WorkerReport::Kind::kNone) << "'" << line << "'";
  }
}

}  // namespace
}  // namespace tower
