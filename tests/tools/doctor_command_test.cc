// `tower doctor`'s reading of flight recorder files, on dumps made by hand: a minority
// fingerprint, a tie, a rank that never arrived, a ring that went round, a missing file,
// healthy files, and bad input.
#include "tools/doctor_command.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tower {
namespace {

using ::testing::HasSubstr;

RecordedCollectiveView Collective(uint64_t sequence, int64_t step, const std::string& fingerprint,
                                  int64_t bytes = 400, const std::string& state = "done") {
  RecordedCollectiveView record;
  record.scope = "workers";
  record.kind = "all-reduce";
  record.sequence = sequence;
  record.step = step;
  record.bucket = 0;
  record.bytes = bytes;
  record.dtype = "float32";
  record.fingerprint = fingerprint;
  record.what = "all-reduce of 2 tensors (100 floats)";
  record.start_unix_ns = 1000;
  record.end_unix_ns = state == "in flight" ? 0 : 2000;
  record.state = state;
  return record;
}

RankDump Rank(int rank, int world, std::vector<RecordedCollectiveView> records) {
  RankDump dump;
  dump.rank = rank;
  dump.world_size = world;
  dump.host = "h" + std::to_string(rank);
  dump.reason = "rank " + std::to_string(rank) + " (host h" + std::to_string(rank) + "): a test";
  dump.dumped_unix_ns = 5000;
  dump.records = std::move(records);
  return dump;
}

TEST(DoctorTest, NamesTheRankWhoseFingerprintDiffersFromTheMajority) {
  std::vector<RankDump> dumps;
  for (int r = 0; r < 3; ++r) {
    dumps.push_back(Rank(r, 3, {Collective(1, 0, "0xa"), Collective(2, 5, r == 2 ? "0xbad" : "0xb",
                                                                     r == 2 ? 404 : 400, "failed")}));
  }
  const Diagnosis diagnosis = Diagnose(dumps);
  EXPECT_TRUE(diagnosis.problem);
  EXPECT_EQ(diagnosis.faulty_rank, 2);
  EXPECT_EQ(diagnosis.sequence, 2u);
  EXPECT_EQ(diagnosis.expected_fingerprint, "0xb");
  EXPECT_EQ(diagnosis.actual_fingerprint, "0xbad");
  EXPECT_THAT(diagnosis.paragraph, HasSubstr("rank 2 (host h2) diverged at collective 2"));
  EXPECT_THAT(diagnosis.paragraph, HasSubstr("(expected 0xb, actual 0xbad)"));
  EXPECT_THAT(diagnosis.paragraph, HasSubstr("it sends 404 bytes where the others send 400"));
  // What each rank was doing, its own name not repeated in its reason.
  EXPECT_THAT(diagnosis.paragraph, HasSubstr("rank 0 (host h0) wrote its file on \"a test\""));
}

TEST(DoctorTest, SaysWhenNoFingerprintHasAMajority) {
  const Diagnosis diagnosis =
      Diagnose({Rank(0, 2, {Collective(4, 1, "0xa")}), Rank(1, 2, {Collective(4, 2, "0xb")})});
  EXPECT_TRUE(diagnosis.problem);
  EXPECT_EQ(diagnosis.faulty_rank, -1);
  EXPECT_THAT(diagnosis.paragraph, HasSubstr("no fingerprint has a majority"));
}

TEST(DoctorTest, NamesTheRankThatNeverReachedACollective) {
  const Diagnosis diagnosis =
      Diagnose({Rank(0, 3, {Collective(6, 2, "0xa"), Collective(7, 3, "0xc", 400, "in flight")}),
                Rank(1, 3, {Collective(6, 2, "0xa")}),
                Rank(2, 3, {Collective(6, 2, "0xa"), Collective(7, 3, "0xc", 400, "failed")})});
  EXPECT_TRUE(diagnosis.problem);
  EXPECT_EQ(diagnosis.faulty_rank, 1);
  EXPECT_EQ(diagnosis.sequence, 7u);
  EXPECT_EQ(diagnosis.expected_fingerprint, "0xc");
  EXPECT_THAT(diagnosis.paragraph, HasSubstr("rank 1 (host h1) never reached collective 7"));
  EXPECT_THAT(diagnosis.paragraph, HasSubstr("rank 1 (host h1)'s last was collective 6"));
  EXPECT_THAT(diagnosis.paragraph, HasSubstr("in flight for"));
}

TEST(DoctorTest, ARingThatWentRoundIsNotANeverReached) {
  // Rank 1's ring no longer holds collective 1: it did reach it.
  const Diagnosis diagnosis =
      Diagnose({Rank(0, 2, {Collective(1, 1, "0xa"), Collective(2, 1, "0xb")}),
                Rank(1, 2, {Collective(2, 1, "0xb")})});
  EXPECT_FALSE(diagnosis.problem) << diagnosis.paragraph;
  EXPECT_THAT(diagnosis.paragraph, HasSubstr("No divergence: all 2 ranks agree"));
}

TEST(DoctorTest, NamesTheRankWithoutAFileWhereTheOthersWereStuck) {
  const Diagnosis diagnosis =
      Diagnose({Rank(0, 3, {Collective(6, 2, "0xa"), Collective(7, 3, "0xc", 400, "failed")}),
                Rank(2, 3, {Collective(6, 2, "0xa"), Collective(7, 3, "0xc", 400, "in flight")})});
  EXPECT_TRUE(diagnosis.problem);
  EXPECT_EQ(diagnosis.faulty_rank, 1);
  EXPECT_EQ(diagnosis.sequence, 7u);
  EXPECT_THAT(diagnosis.paragraph, HasSubstr("rank 1 wrote no file, and rank 0 (host h0) and "
                                             "rank 2 (host h2) never saw collective 7"));
}

TEST(DoctorTest, NamesARankWithoutAFile) {
  const Diagnosis diagnosis = Diagnose({Rank(0, 2, {Collective(1, 1, "0xa")})});
  EXPECT_TRUE(diagnosis.problem);
  EXPECT_EQ(diagnosis.faulty_rank, 1);
  EXPECT_THAT(diagnosis.paragraph, HasSubstr("rank 1 wrote none"));
}

std::string Directory(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
  return dir;
}

TEST(DoctorTest, CommandReadsTheFilesAndRefusesBadInput) {
  std::ostringstream out, err;
  EXPECT_EQ(RunDoctorCommand({}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("tower doctor DIR"));
  err.str("");
  EXPECT_EQ(RunDoctorCommand({"/no/such/dir"}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("cannot read the directory /no/such/dir"));

  const std::string dir = Directory("doctor");
  err.str("");
  EXPECT_EQ(RunDoctorCommand({dir}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("no flight recorder files"));

  std::ofstream(dir + "/flight_recorder.rank0.json") << "{\"rank\": 0, \"world_size\": 1, "
      "\"host\": \"a\", \"reason\": \"SIGUSR1\", \"records\": [{\"scope\": \"workers\", "
      "\"kind\": \"all-reduce\", \"sequence\": 3, \"fingerprint\": \"0x1\"}]}";
  out.str("");
  EXPECT_EQ(RunDoctorCommand({dir}, out, err), 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("No divergence: all 1 ranks agree"));

  std::ofstream(dir + "/flight_recorder.rank1.json") << "{\"rank\": 1, \"records\": [";
  err.str("");
  EXPECT_EQ(RunDoctorCommand({dir}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("flight_recorder.rank1.json is not a flight recorder file"));
}

}  // namespace
}  // namespace tower
