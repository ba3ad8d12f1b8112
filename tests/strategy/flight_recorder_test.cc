// The flight recorder's ring, its dump (read back as JSON), SIGUSR1, and the collective
// fingerprint; the trace's spans, lanes and start/stop.
#include "strategy/collectives/flight_recorder.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/trace.h"

namespace tower {
namespace {

std::string TempDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  const int status = std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
  EXPECT_EQ(status, 0) << "making the empty directory " << dir;
  return dir;
}

CollectiveRecord Record(uint64_t sequence, int64_t step) {
  CollectiveRecord record;
  record.kind = "all-reduce";
  record.sequence = sequence;
  record.step = step;
  record.bytes = 4 * static_cast<int64_t>(sequence);
  record.fingerprint = CollectiveFingerprint("all-reduce", step, "float32", 10, 0);
  return record;
}

TEST(FlightRecorderTest, KeepsTheLastCollectivesOldestFirstAndTheirEnds) {
  FlightRecorder& recorder = FlightRecorder::Get();
  recorder.Clear();
  const size_t total = FlightRecorder::kCapacity + 10;
  std::vector<uint64_t> tickets;
  for (size_t i = 1; i <= total; ++i) tickets.push_back(recorder.Begin(Record(i, 1), "sum " + std::to_string(i)));
  // The oldest were overwritten: ending them changes nothing.
  recorder.End(tickets[0], CollectiveState::kDone);
  recorder.End(tickets[total - 2], CollectiveState::kFailed);
  recorder.End(tickets[total - 1], CollectiveState::kDone);
  const std::vector<CollectiveRecord> records = recorder.Records();
  ASSERT_EQ(records.size(), FlightRecorder::kCapacity);
  EXPECT_EQ(records.front().sequence, 11u);
  EXPECT_EQ(records.back().sequence, total);
  EXPECT_EQ(records.back().state, CollectiveState::kDone);
  EXPECT_GE(records.back().end_unix_ns, records.back().start_unix_ns);
  EXPECT_EQ(records[records.size() - 2].state, CollectiveState::kFailed);
  EXPECT_EQ(records[records.size() - 3].state, CollectiveState::kInFlight);
  EXPECT_STREQ(records.back().what, ("sum " + std::to_string(total)).c_str());
  // A description longer than the record holds is cut, not overflowed.
  recorder.Begin(Record(1, 1), std::string(500, 'x'));
  EXPECT_EQ(std::string(recorder.Records().back().what), std::string(sizeof(CollectiveRecord::what) - 1, 'x'));
}

TEST(FlightRecorderTest, RecordedCollectiveIsFailedUnlessFinishedWell) {
  FlightRecorder& recorder = FlightRecorder::Get();
  recorder.Clear();
  { RecordedCollective left_early(Record(1, 1)); }
  {
    RecordedCollective done(Record(2, 1));
    done.Finish(true);
  }
  const std::vector<CollectiveRecord> records = recorder.Records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].state, CollectiveState::kFailed);
  EXPECT_EQ(records[1].state, CollectiveState::kDone);
}

TEST(FlightRecorderTest, FingerprintsDifferInStepKindDtypeCountAndLayout) {
  const uint64_t base = CollectiveFingerprint("all-reduce", 5, "float32", 100, 7);
  EXPECT_EQ(base, CollectiveFingerprint("all-reduce", 5, "float32", 100, 7));
  EXPECT_NE(base, CollectiveFingerprint("all-reduce", 6, "float32", 100, 7));
  EXPECT_NE(base, CollectiveFingerprint("broadcast", 5, "float32", 100, 7));
  EXPECT_NE(base, CollectiveFingerprint("all-reduce", 5, "bfloat16", 100, 7));
  EXPECT_NE(base, CollectiveFingerprint("all-reduce", 5, "float32", 101, 7));
  EXPECT_NE(base, CollectiveFingerprint("all-reduce", 5, "float32", 100, 8));
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  return nlohmann::json::parse(file);
}

TEST(FlightRecorderTest, DumpsTheRingAsJsonAndOnSigusr1) {
  FlightRecorder& recorder = FlightRecorder::Get();
  recorder.Clear();
  recorder.SetProcess(2, 3, "host-b");
  // No directory yet: nothing is written, and that is no error.
  if (recorder.dump_directory().empty()) EXPECT_TRUE(recorder.Dump("no dir").ok());
  const std::string dir = TempDir("dumps");
  recorder.SetDumpDirectory(dir);
  EXPECT_EQ(recorder.DumpPath(), dir + "/flight_recorder.rank2.json");
  SetCurrentStep(42);
  CollectiveRecord in_flight = Record(7, 42);
  in_flight.bucket = 3;
  in_flight.replica = 1;
  in_flight.scope = "replicas";
  recorder.Begin(in_flight);
  ASSERT_TRUE(recorder.Dump("a test's reason").ok());
  nlohmann::json dump = ReadJson(dir + "/flight_recorder.rank2.json");
  EXPECT_EQ(dump["rank"], 2);
  EXPECT_EQ(dump["world_size"], 3);
  EXPECT_EQ(dump["host"], "host-b");
  EXPECT_EQ(dump["reason"], "a test's reason");
  EXPECT_EQ(dump["current_step"], 42);
  ASSERT_EQ(dump["records"].size(), 1u);
  const nlohmann::json& record = dump["records"][0];
  EXPECT_EQ(record["sequence"], 7);
  EXPECT_EQ(record["step"], 42);
  EXPECT_EQ(record["bucket"], 3);
  EXPECT_EQ(record["replica"], 1);
  EXPECT_EQ(record["scope"], "replicas");
  EXPECT_EQ(record["state"], "in flight");
  char hex[19];
  std::snprintf(hex, sizeof(hex), "0x%016llx",
                static_cast<unsigned long long>(in_flight.fingerprint));
  EXPECT_EQ(record["fingerprint"], hex);

  // SIGUSR1: the watcher thread writes the ring again; the process goes on.
  recorder.Begin(Record(8, 42));
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  bool seen = false;
  for (int i = 0; i < 500 && !seen; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream file(dir + "/flight_recorder.rank2.json");
    std::stringstream text;
    text << file.rdbuf();
    seen = text.str().find("SIGUSR1") != std::string::npos;
  }
  ASSERT_TRUE(seen) << "no dump after SIGUSR1";
  dump = ReadJson(dir + "/flight_recorder.rank2.json");
  EXPECT_EQ(dump["records"].size(), 2u);
  recorder.SetProcess(0, 1, "host-a");
}

TEST(FlightRecorderTest, BucketScopesNest) {
  EXPECT_EQ(CurrentBucket(), -1);
  {
    BucketScope outer(2);
    EXPECT_EQ(CurrentBucket(), 2);
    {
      BucketScope inner(0);
      EXPECT_EQ(CurrentBucket(), 0);
    }
    EXPECT_EQ(CurrentBucket(), 2);
  }
  EXPECT_EQ(CurrentBucket(), -1);
}

TEST(TraceTest, RecordsNothingWhenOffAndEverySpanWhenOn) {
  { trace::Span before("before", trace::Category::kData); }
  trace::Start();
  EXPECT_TRUE(trace::Recording());
  {
    trace::Span outer("outer", trace::Category::kStep, 3);
    trace::LaneScope lane(5);
    trace::Span inner("inner", trace::Category::kForward, 1, 64);
  }
  std::thread other([] {
    trace::LaneScope lane(2);
    trace::Span span("elsewhere", trace::Category::kWait);
  });
  other.join();
  trace::RecordComplete("kernel", trace::Category::kStream, trace::StreamLane(1), -1, -1,
                        trace::StartSteadyNs() + 10, 20);
  std::vector<trace::Event> events = trace::Stop();
  EXPECT_FALSE(trace::Recording());
  { trace::Span after("after", trace::Category::kData); }
  std::map<std::string, trace::Event> by_name;
  for (const trace::Event& event : events) by_name[event.name] = event;
  ASSERT_EQ(by_name.size(), 4u);
  EXPECT_EQ(by_name.count("before") + by_name.count("after"), 0u);
  // The outer span ends after the lane scope: its lane is the main one again.
  EXPECT_EQ(by_name["outer"].lane, trace::kMainLane);
  EXPECT_EQ(by_name["outer"].arg, 3);
  EXPECT_EQ(by_name["inner"].lane, 5);
  EXPECT_EQ(by_name["inner"].bytes, 64);
  EXPECT_LE(by_name["outer"].start_ns, by_name["inner"].start_ns);
  EXPECT_GE(by_name["outer"].start_ns + by_name["outer"].duration_ns,
            by_name["inner"].start_ns + by_name["inner"].duration_ns);
  EXPECT_EQ(by_name["elsewhere"].lane, 2);
  EXPECT_EQ(by_name["kernel"].lane, trace::StreamLane(1));
  EXPECT_EQ(by_name["kernel"].duration_ns, 20);
  // A new trace starts empty.
  trace::Start();
  EXPECT_TRUE(trace::Stop().empty());
  EXPECT_EQ(trace::CurrentLane(), trace::kMainLane);
}

}  // namespace
}  // namespace tower
