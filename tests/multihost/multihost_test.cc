// Several hosts for real: each a network namespace with its own address and name, MPI
// between them over TCP only (tests/testing/netns_hosts.h), workers started by mpirun
// through a launch agent as ssh would start them. Needs root: as another user every case
// skips, saying so (CI runs these as root, with TOWER_REQUIRE_ROOT=1 making a skip a failure).
//
//   - training across 2 and 3 hosts (1–2 workers a host, 1–2 replicas a worker) saves the
//     bytes one device saves (--deterministic);
//   - a host's link cut mid-run, and a host killed: every surviving worker exits within the
//     collective deadline (+ the probe and a few seconds), naming the lost worker and its
//     host in Tower's own words; the last backup is whole;
//   - a host that reads other data is refused before the first step, both sides named;
//   - a host whose wall clock is a day off is named in a warning (training unchanged), and
//     refused with --max-clock-skew;
//   - `tower launch`: a host cut at a random step is dropped, the job finishes on the other
//     two with the bytes of an uninterrupted run (4 rounds, random cut points; 1 in a reduced
//     round); the same over 2 hosts given by address, and mixed (a name and an address, this
//     machine's last): the lost rank mapped to the host it was placed on;
//   - `tower launch`, hosts coming and going: host2 cut and dropped, its link back, host3 cut:
//     host2 is probed, re-admitted in its place, and the job ends with the uninterrupted run's
//     bytes;
//   - plain mpirun, a host's link cut: every survivor gone within the deadline + 5 s (mpirun
//     itself, which waits on the lost daemon, only measured).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/env_flag.h"
#include "tests/testing/netns_hosts.h"
#include "tests/testing/reduced_round.h"
#include "tests/testing/tower_cli.h"
#include "util/strings.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::BackgroundProgram;
using testing::BackupPosition;
using testing::NetnsHosts;
using testing::ProgramOutput;
using testing::ReadBytes;
using testing::RunCommand;
using testing::Runfile;
using testing::TempPath;
using testing::Tower;
using testing::WaitForBackups;
using Clock = std::chrono::steady_clock;

// 600 rows in batches of 48: every epoch ends on a batch of 24.
const char kTrain[] =
    "train --data=synthetic:mlp:rows=600:seed=3 --layers=64:relu,1 --global-batch=48 "
    "--shuffle --seed=1 --optimizer=adam --lr=0.001 --deterministic --verbose=1";
constexpr int kDeadlineS = 2;  // --collective-timeout in the failure tests

std::string ReadText(const std::string& path) { return ReadBytes(path); }

class MultiHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = NetnsHosts::WhyNot(); !why.empty()) {
      // CI runs as root and sets TOWER_REQUIRE_ROOT=1: there a skip would hide these tests.
      if (testing::EnvFlag("TOWER_REQUIRE_ROOT")) FAIL() << why << " (TOWER_REQUIRE_ROOT=1)";
      GTEST_SKIP() << why;
    }
    auto hosts = NetnsHosts::Create(3);
    ASSERT_TRUE(hosts.ok()) << hosts.status();
    hosts_ = std::move(*hosts);
  }
  void TearDown() override {
    hosts_.reset();
    // This test's own namespaces only: another run on the machine may have its own.
    for (const std::string& ns : NetnsHosts::NamespacesOfThisProcess()) {
      ADD_FAILURE() << "namespace " << ns << " left behind";
    }
  }

  // mpirun on host1 over `slots` ("host1:2,host2:2"), bounded in time.
  std::string Mpirun(const std::string& slots, int workers, const std::string& args) const {
    return hosts_->OnHost("host1", "timeout -k 5 120 mpirun --allow-run-as-root " +
                                       hosts_->MpirunArgs() + " -H " + slots + " -np " +
                                       std::to_string(workers) + " " + Runfile("tools/tower") +
                                       " " + args);
  }
  // tower launch on host1 over `hosts` (names or addresses), bounded in time.
  std::string Launch(const std::string& flags, const std::string& train,
                     const std::string& hosts = "host1,host2,host3") const {
    return hosts_->OnHost("host1", "timeout -k 5 150 " + Runfile("tools/tower") +
                                       " launch --hosts=" + hosts + " --mpirun-args=\"" +
                                       hosts_->MpirunArgs() + "\" " + flags + " -- " + train);
  }
  // Whether a `tower train` worker runs on any of `hosts`: a process whose program is
  // .../tower and whose command is train (not mpirun or tower launch, whose command lines
  // hold the train command too).
  bool WorkersRunOn(const std::vector<std::string>& hosts) const {
    for (const std::string& host : hosts) {
      for (const std::string& process : hosts_->Processes(host)) {
        const size_t space = process.find(' ');
        const std::string program = process.substr(0, space);
        if ((program == "tower" || EndsWith(program, "/tower")) &&
            process.compare(space + 1, 6, "train ") == 0) {
          return true;
        }
      }
    }
    return false;
  }

  // Starts a long run under `tower launch --max-restarts=0`, waits for 2 backups, applies
  // `fault` to host3, and checks what every survivor says and when it exits.
  void ExpectSurvivorsNameHost3(const std::string& launch,
                                const std::function<void()>& fault, const std::string& backup,
                                const std::string& log, const std::string& fault_name) {
    BackgroundProgram run(BackgroundProgram::ShellCommand{launch}, log);
    ASSERT_TRUE(run.started());
    ASSERT_TRUE(WaitForBackups(run, backup, 2)) << ReadText(log);
    const auto at = Clock::now();
    fault();
    // Every surviving worker (host1, host2) ends after the deadline, the probe that names the
    // silent peer (1 s at most) and the wait that lets the other survivors record the failed
    // collective (1 s): measured 4.1-4.2 s, plain and under ASan (2026-11-29). What shows that
    // they ended by the deadline is each survivor's own words below; the bound, 5 times that
    // sum, only tells an exit from a hang (the default deadline is 300 s) on a loaded machine.
    const auto limit = std::chrono::seconds(5 * (kDeadlineS + 1 + 1) + 1);
    while (Clock::now() - at < limit && WorkersRunOn({"host1", "host2"})) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const double took = std::chrono::duration<double>(Clock::now() - at).count();
    EXPECT_FALSE(WorkersRunOn({"host1", "host2"}))
        << fault_name << ": survivors still running " << took << " s later";
    std::printf("%s: the survivors were gone %.1f s after the fault\n", fault_name.c_str(), took);
    EXPECT_EQ(run.Wait(), 1) << ReadText(log);
    const std::string text = ReadText(log);
    // Tower's own words, from each survivor: who is lost, on which host, and who gives up.
    EXPECT_THAT(text, HasSubstr("rank 2 (host host3)")) << fault_name << "\n" << text;
    EXPECT_THAT(text, HasSubstr("rank 0 (host host1) gives up")) << fault_name << "\n" << text;
    EXPECT_THAT(text, HasSubstr("rank 1 (host host2) gives up")) << fault_name << "\n" << text;
    EXPECT_THAT(text, HasSubstr("tower-worker: unreachable: rank 2 on host3")) << text;
    EXPECT_THAT(text, HasSubstr("tower launch: lost host3")) << text;
    EXPECT_THAT(text, HasSubstr("--max-restarts=0 reached")) << text;
    std::printf("%s: survivors exited %.2f s after the fault (deadline %d s)\n", fault_name.c_str(),
                took, kDeadlineS);
    // The last backup is whole, and past the two we waited for.
    EXPECT_GT(BackupPosition(backup).total_steps, 0);
  }

  // `tower launch --hosts=<hosts>` (names or addresses) of `train` with a backup every 10
  // steps; `cut`'s link is cut after `backups` backups and `extra_ms` more: the job must be
  // relaunched without it and save `expected` (an uninterrupted run's bytes). Its log's text.
  std::string CutAndFinish(const std::string& hosts, int min_hosts, const std::string& cut,
                           int backups, int extra_ms, const std::string& train,
                           const std::string& expected, const std::string& name) {
    const std::string backup = TempPath(name + ".backup");
    const std::string saved = TempPath(name + ".safetensors");
    const std::string log = TempPath(name + ".log");
    std::remove(backup.c_str());
    std::remove(saved.c_str());
    {
      BackgroundProgram run(
          BackgroundProgram::ShellCommand{
              Launch("--min-hosts=" + std::to_string(min_hosts) +
                         " --max-restarts=3 --grace=1 --start-timeout=10",
                     train + " --backup=" + backup + " --backup-every=10 --save=" + saved, hosts)},
          log);
      EXPECT_TRUE(run.started());
      if (!run.started()) return "";
      if (!WaitForBackups(run, backup, backups)) {
        ADD_FAILURE() << "no " << backups << " backups\n" << ReadText(log);
        return ReadText(log);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(extra_ms));
      EXPECT_TRUE(hosts_->CutLink(cut).ok());
      EXPECT_EQ(run.Wait(), 0) << ReadText(log);
    }
    const std::string text = ReadText(log);
    EXPECT_TRUE(ReadBytes(saved) == expected) << "the job ended with other bytes\n" << text;
    return text;
  }

  std::unique_ptr<NetnsHosts> hosts_;
};

TEST_F(MultiHostTest, TrainingAcrossTwoAndThreeHostsSavesTheBytesOfOneDevice) {
  const std::string train = std::string(kTrain) + " --epochs=3";
  const std::string reference = TempPath("one_device.safetensors");
  const ProgramOutput one = Tower(train + " --save=" + reference);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  const std::string expected = ReadBytes(reference);
  ASSERT_FALSE(expected.empty());
  struct Layout {
    std::string name, slots;
    int workers;
    std::string flags;
    std::string last_worker;  // the log line that shows where the last worker ran
  };
  const std::vector<Layout> layouts = {
      {"2 hosts x 2 workers x 1 replica", "host1:2,host2:2", 4, "--replicas=1",
       "Worker rank 3 (host host2) of 4: 4 replicas in sync"},
      {"3 hosts x 1 worker x 2 replicas", "host1,host2,host3", 3, "--replicas=2",
       "Worker rank 2 (host host3) of 3: 6 replicas in sync"},
      {"3 hosts x 2 workers x 1 replica, 1 KB buckets", "host1:2,host2:2,host3:2", 6,
       "--replicas=1 --bucket-mb=0.0009765625",
       "Worker rank 5 (host host3) of 6: 6 replicas in sync"},
  };
  int file = 0;
  for (const Layout& layout : layouts) {
    // A reduced round (TOWER_REDUCED_ROUND=1: CI's sanitizer stages) keeps the last layout:
    // 3 hosts, 2 workers on each, many buckets.
    if (testing::ReducedRound() && &layout != &layouts.back()) continue;
    const std::string saved = TempPath("hosts" + std::to_string(file++) + ".safetensors");
    const ProgramOutput run =
        RunCommand(Mpirun(layout.slots, layout.workers, train + " " + layout.flags + " --save=" + saved));
    ASSERT_EQ(run.exit_code, 0) << layout.name << "\n" << run.text;
    EXPECT_THAT(run.text, HasSubstr(layout.last_worker)) << layout.name;
    EXPECT_TRUE(ReadBytes(saved) == expected) << layout.name << " saved other bytes than one device";
  }
}

TEST_F(MultiHostTest, ACutLinkIsNamedByEverySurvivorWithinTheDeadline) {
  const std::string backup = TempPath("cut.backup");
  const std::string train = std::string(kTrain) + " --epochs=100000 --collective-timeout=" +
                            std::to_string(kDeadlineS) + " --backup=" + backup +
                            " --backup-every=20";
  ExpectSurvivorsNameHost3(
      Launch("--max-restarts=0 --grace=2", train),
      [&] { ASSERT_TRUE(hosts_->CutLink("host3").ok()); }, backup, TempPath("cut.log"),
      "link cut");
}

TEST_F(MultiHostTest, AKilledHostIsNamedByEverySurvivorWithinTheDeadline) {
  const std::string backup = TempPath("kill.backup");
  const std::string train = std::string(kTrain) + " --epochs=100000 --collective-timeout=" +
                            std::to_string(kDeadlineS) + " --backup=" + backup +
                            " --backup-every=20";
  ExpectSurvivorsNameHost3(
      Launch("--max-restarts=0 --grace=2", train),
      [&] { ASSERT_TRUE(hosts_->KillHost("host3").ok()); }, backup, TempPath("kill.log"),
      "host killed");
}

TEST_F(MultiHostTest, AHostReadingOtherDataIsRefusedBeforeTheFirstStep) {
  const std::string data = TempPath("data.csv");
  const std::string other = TempPath("other.csv");
  {
    std::ofstream a(data), b(other);
    a << "x0,x1,y\n";
    b << "x0,x1,y\n";
    for (int r = 0; r < 100; ++r) {
      a << r * 0.5 << "," << (r % 7) << "," << r * 0.25 << "\n";
      // One value differs: a stale copy.
      b << r * 0.5 << "," << (r == 57 ? 8 : r % 7) << "," << r * 0.25 << "\n";
    }
  }
  const std::string backup = TempPath("data.backup");
  const std::string train = "train --data=" + data + " --target=y --layers=4:relu,1 --epochs=2 "
                            "--global-batch=10 --backup=" + backup + " --backup-every=1";
  // The same data everywhere: it trains.
  const ProgramOutput same = RunCommand(Mpirun("host1,host2,host3", 3, train));
  ASSERT_EQ(same.exit_code, 0) << same.text;
  std::remove(backup.c_str());
  // host3 reads another file at the same path.
  ASSERT_TRUE(hosts_->ShowFileOnHost("host3", data, other).ok());
  const ProgramOutput refused = RunCommand(Mpirun("host1,host2,host3", 3, train));
  EXPECT_NE(refused.exit_code, 0) << refused.text;
  EXPECT_THAT(refused.text, HasSubstr("workers disagree before the first step: rank 0 (host "
                                      "host1) has ' data 100 rows of 2 features (x0..x1) and 1 "
                                      "target (y), content fnv1a64 "))
      << refused.text;
  EXPECT_THAT(refused.text, HasSubstr("rank 2 (host host3) has ' data 100 rows")) << refused.text;
  EXPECT_THAT(refused.text, HasSubstr("--data=" + data)) << refused.text;
  EXPECT_THAT(refused.text, Not(HasSubstr("Epoch 1/2"))) << "no step may run";
  EXPECT_FALSE(std::ifstream(backup).good()) << "nothing may be written";
}

// libfaketime cannot be preloaded into an AddressSanitizer build (ASan's runtime must come
// first, and the two hang on clock_gettime): under ASan this case skips, saying so.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TOWER_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TOWER_UNDER_ASAN 1
#endif

TEST_F(MultiHostTest, AHostWithAnotherClockIsNamedAndRefusedBeyondTheAllowedSkew) {
#ifdef TOWER_UNDER_ASAN
  GTEST_SKIP() << "libfaketime and AddressSanitizer cannot share a process; the plain run "
                  "covers this case";
#endif
  const std::string train = std::string(kTrain) + " --epochs=2";
  const std::string reference = TempPath("clock_reference.safetensors");
  const ProgramOutput one = Tower(train + " --save=" + reference);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  // host3's wall clock a day ahead (its monotonic clock, which deadlines use, unchanged).
  ASSERT_TRUE(hosts_->SetClockOffset("host3", 86400).ok());
  const std::string skew = "the clock of rank 2 (host host3) is 8640";
  // By default: a warning naming both hosts, and training as if nothing differed.
  const std::string saved = TempPath("clock.safetensors");
  const ProgramOutput warned =
      RunCommand(Mpirun("host1,host2,host3", 3, train + " --save=" + saved));
  ASSERT_EQ(warned.exit_code, 0) << warned.text;
  EXPECT_THAT(warned.text, HasSubstr(skew)) << warned.text;
  EXPECT_THAT(warned.text, HasSubstr("s ahead of rank 0 (host host1)'s: logs and file times"))
      << warned.text;
  EXPECT_TRUE(ReadBytes(saved) == ReadBytes(reference)) << "the skew changed the training";
  // With a limit: refused before the first step, both sides named, nothing written.
  const std::string refused_file = TempPath("clock_refused.safetensors");
  const ProgramOutput refused = RunCommand(Mpirun(
      "host1,host2,host3", 3, train + " --max-clock-skew=60 --save=" + refused_file));
  EXPECT_NE(refused.exit_code, 0) << refused.text;
  EXPECT_THAT(refused.text, HasSubstr("workers disagree before the first step: " + skew))
      << refused.text;
  EXPECT_THAT(refused.text, HasSubstr("more than the 60 s allowed")) << refused.text;
  EXPECT_THAT(refused.text, Not(HasSubstr("Epoch 1/2"))) << "no step may run";
  EXPECT_FALSE(std::ifstream(refused_file).good()) << "nothing may be written";
}

TEST_F(MultiHostTest, ALostHostIsDroppedAndTheJobEndsWithTheBytesOfAnUninterruptedRun) {
  const std::string train = std::string(kTrain) + " --epochs=20 --collective-timeout=" +
                            std::to_string(kDeadlineS);
  const std::string reference = TempPath("uninterrupted.safetensors");
  const ProgramOutput one = Tower(train + " --save=" + reference);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  const std::string expected = ReadBytes(reference);
  ASSERT_FALSE(expected.empty());
  const char* seed_text = std::getenv("TOWER_MULTIHOST_SEED");
  const unsigned seed = seed_text != nullptr ? static_cast<unsigned>(std::atol(seed_text))
                                             : std::random_device()();
  std::printf("cut points from seed %u (TOWER_MULTIHOST_SEED=%u replays them)\n", seed, seed);
  std::mt19937 random(seed);
  // 4 rounds (about 11 s each, alone on the machine: the test is exclusive); 1 in a reduced
  // round (TOWER_REDUCED_ROUND=1: CI's sanitizer stages). Each run draws new cut points, so
  // CI's runs add up; TOWER_MULTIHOST_ROUNDS=N soaks longer.
  const char* rounds_text = std::getenv("TOWER_MULTIHOST_ROUNDS");
  const int rounds = rounds_text != nullptr ? std::max(1, std::atoi(rounds_text))
                                            : (testing::ReducedRound() ? 1 : 4);
  for (int round = 0; round < rounds; ++round) {
    const std::string host = random() % 2 == 0 ? "host2" : "host3";
    const int backups = 1 + static_cast<int>(random() % 4);
    const int extra_ms = static_cast<int>(random() % 200);
    SCOPED_TRACE("round " + std::to_string(round) + ": " + host + " cut after " +
                 std::to_string(backups) + " backups + " + std::to_string(extra_ms) + " ms");
    const auto started = Clock::now();
    const std::string text = CutAndFinish("host1,host2,host3", 2, host, backups, extra_ms, train,
                                          expected, "restart" + std::to_string(round));
    int same_hosts = 0;  // relaunches after an Open MPI daemon failed to come up
    for (size_t at = text.find("relaunching on the same hosts"); at != std::string::npos;
         at = text.find("relaunching on the same hosts", at + 1)) {
      ++same_hosts;
    }
    std::printf("round %d: %s cut after %d backups + %d ms; the job took %.1f s (%d relaunch%s "
                "on the same hosts)\n",
                round, host.c_str(), backups, extra_ms,
                std::chrono::duration<double>(Clock::now() - started).count(), same_hosts,
                same_hosts == 1 ? "" : "es");
    EXPECT_THAT(text, HasSubstr("tower launch: lost " + host + ", where rank ")) << text;
    EXPECT_THAT(text, HasSubstr("tower launch: done on 2 hosts")) << text;
    // The cut host again as new for the next round.
    ASSERT_TRUE(hosts_->KillHost(host).ok());
    ASSERT_TRUE(hosts_->RestoreLink(host).ok());
    // A job started at once hung at daemon start-up in 2 to 7 rounds of 10 (measured
    // 2026-11-26; no process was left on any host), costing --start-timeout and a relaunch
    // on the same hosts each time; with this pause, before or after the link comes back, 0 of
    // 10 in two runs. The cause is inside Open MPI's start-up and was not found; tower
    // launch's relaunch (launch_command_test) covers it where it happens.
    if (HasFailure()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
}

// Hosts given as addresses, as `mpirun -H 10.0.0.1,10.0.0.2` users give them, then mixed with
// this machine's entry last: the lost rank is mapped to the entry it was placed on (its worker
// calls its host host2: shown, not matched), and the job ends on the one host left with the
// bytes of an uninterrupted run.
TEST_F(MultiHostTest, HostsGivenByAddressLoseOneAndTheJobEndsWithTheBytesOfAnUninterruptedRun) {
  const std::string train =
      std::string(kTrain) + " --epochs=20 --collective-timeout=" + std::to_string(kDeadlineS);
  const std::string reference = TempPath("address_uninterrupted.safetensors");
  const ProgramOutput one = Tower(train + " --save=" + reference);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  const std::string expected = ReadBytes(reference);
  ASSERT_FALSE(expected.empty());
  const std::string first = hosts_->Address("host1"), second = hosts_->Address("host2");
  const struct {
    std::string hosts, lost;
  } runs[] = {
      {first + "," + second, second},
      // mpirun places its first ranks on its own host (host1) whatever the order.
      {"host2," + first, "host2"},
  };
  for (const auto& r : runs) {
    SCOPED_TRACE("--hosts=" + r.hosts);
    const auto started = Clock::now();
    const std::string text = CutAndFinish(r.hosts, 1, "host2", 2, 0, train, expected,
                                          "address" + std::to_string(&r - runs));
    std::printf("--hosts=%s: host2 cut after 2 backups; the job took %.1f s\n", r.hosts.c_str(),
                std::chrono::duration<double>(Clock::now() - started).count());
    EXPECT_THAT(text, HasSubstr("tower launch: lost " + r.lost +
                                ", where rank 1 (host host2) "
                                "was placed (reported unreachable by the workers)"))
        << text;
    EXPECT_THAT(text, HasSubstr("tower launch: relaunching on " + first + " from the backup"))
        << text;
    EXPECT_THAT(text, HasSubstr("tower launch: done on 1 host (" + first + ") after 1 restart"))
        << text;
    if (HasFailure()) break;
    // host2 again as new for the next run (see the pause in the test above).
    ASSERT_TRUE(hosts_->KillHost("host2").ok());
    ASSERT_TRUE(hosts_->RestoreLink("host2").ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
}

// Elastic both ways: host2's link is cut (the job relaunched on host1 and host3), comes back
// while that run trains, then host3's is cut. Before that relaunch tower launch probes host2,
// which answers and takes its place back (rank 1 runs there again), and the job ends on host1
// and host2 with the bytes of an uninterrupted run: 3, then 2, then 2 workers, one global
// batch.
TEST_F(MultiHostTest, ADroppedHostThatAnswersAgainIsReadmittedAndTheJobEndsWithTheSameBytes) {
  const std::string train =
      std::string(kTrain) + " --epochs=20 --collective-timeout=" + std::to_string(kDeadlineS);
  const std::string reference = TempPath("readmit_uninterrupted.safetensors");
  const ProgramOutput one = Tower(train + " --save=" + reference);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  const std::string expected = ReadBytes(reference);
  ASSERT_FALSE(expected.empty());
  const std::string backup = TempPath("readmit.backup");
  const std::string saved = TempPath("readmit.safetensors");
  const std::string log = TempPath("readmit.log");
  const auto started = Clock::now();
  BackgroundProgram run(
      BackgroundProgram::ShellCommand{
          Launch("--min-hosts=2 --max-restarts=3 --grace=1 --start-timeout=10 --probe-timeout=5",
                 train + " --backup=" + backup + " --backup-every=10 --save=" + saved)},
      log);
  ASSERT_TRUE(run.started());
  // Until the log says `text` (false if the job ended first or 60 s passed).
  auto wait_for = [&](const std::string& text) {
    for (const auto begin = Clock::now(); Clock::now() - begin < std::chrono::seconds(60);) {
      if (ReadText(log).find(text) != std::string::npos) return true;
      if (!run.Running()) return ReadText(log).find(text) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  ASSERT_TRUE(WaitForBackups(run, backup, 2)) << ReadText(log);
  ASSERT_TRUE(hosts_->CutLink("host2").ok());
  ASSERT_TRUE(wait_for("tower launch: run 2 on 2 hosts (host1, host3)")) << ReadText(log);
  // WaitForBackups counts the backup that is there as the first: 2 is one new backup, written
  // by run 2.
  ASSERT_TRUE(WaitForBackups(run, backup, 2)) << ReadText(log);
  ASSERT_TRUE(hosts_->RestoreLink("host2").ok());
  ASSERT_TRUE(WaitForBackups(run, backup, 2)) << ReadText(log);
  ASSERT_TRUE(hosts_->CutLink("host3").ok());
  EXPECT_EQ(run.Wait(), 0) << ReadText(log);
  std::printf("host2 cut, back, host3 cut: the job took %.1f s\n",
              std::chrono::duration<double>(Clock::now() - started).count());
  const std::string text = ReadText(log);
  EXPECT_THAT(text, HasSubstr("tower launch: lost host2, where rank 1 (host host2) was placed"))
      << text;
  EXPECT_THAT(text, HasSubstr("tower launch: lost host3, where rank 1 (host host3) was placed"))
      << text;
  EXPECT_THAT(text, HasSubstr("tower launch: re-admitting host2: it answers again")) << text;
  EXPECT_THAT(text, HasSubstr("tower launch: relaunching on host1, host2 from the backup "
                              "(restart 2 of at most 3)"))
      << text;
  // Rank 1 ran on host2 again, one of 2 workers (it was one of 3 before the cut).
  EXPECT_THAT(text, HasSubstr("Worker rank 1 (host host2) of 2: 2 replicas in sync")) << text;
  EXPECT_THAT(text, HasSubstr("tower launch: done on 2 hosts (host1, host2) after 2 restarts"))
      << text;
  for (const std::string& line : Split(text, '\n')) {
    if (line.find("re-admitting") != std::string::npos) std::printf("%s\n", line.c_str());
  }
  EXPECT_TRUE(ReadBytes(saved) == expected) << "the job ended with other bytes\n" << text;
}

// Plain mpirun, no `tower launch`: once the survivors name the cut-off worker (their
// deadline), each of them exits, non-zero, within the deadline + 5 s (the bound issue 58
// sets: a function, not a speed figure). mpirun itself is only measured: it waits on the
// unreachable host's daemon (README "Several processes, several machines").
TEST_F(MultiHostTest, UnderPlainMpirunEverySurvivorExitsWithinTheDeadlinePlusFiveSeconds) {
  const std::string backup = TempPath("plain.backup");
  const std::string log = TempPath("plain.log");
  const std::string train = std::string(kTrain) +
                            " --epochs=100000 --collective-timeout=" + std::to_string(kDeadlineS) +
                            " --backup=" + backup + " --backup-every=20";
  // 2 workers on host1 (the survivors), 1 on host2 (cut off).
  BackgroundProgram run(BackgroundProgram::ShellCommand{Mpirun("host1:2,host2:1", 3, train)}, log);
  ASSERT_TRUE(run.started());
  ASSERT_TRUE(WaitForBackups(run, backup, 2)) << ReadText(log);
  ASSERT_TRUE(WorkersRunOn({"host1"}));
  const auto cut = Clock::now();
  ASSERT_TRUE(hosts_->CutLink("host2").ok());
  const auto limit = std::chrono::seconds(kDeadlineS + 5);
  while (Clock::now() - cut < limit && WorkersRunOn({"host1"})) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double gone = std::chrono::duration<double>(Clock::now() - cut).count();
  const bool running = WorkersRunOn({"host1"});
  EXPECT_FALSE(running) << "survivors still running " << gone << " s after the cut";
  std::printf("plain mpirun: the survivors on host1 %s %.2f s after the cut (deadline %d s)\n",
              running ? "still ran" : "were gone", gone, kDeadlineS);
  // mpirun: measured for 10 s more, then ended here (the hosts' teardown ends what is left).
  while (Clock::now() - cut < limit + std::chrono::seconds(10) && run.Running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("plain mpirun: mpirun %s %.1f s after the cut\n",
              run.Running() ? "still running" : "ended",
              std::chrono::duration<double>(Clock::now() - cut).count());
  run.Kill(SIGKILL);
  const std::string text = ReadText(log);
  // Each survivor names the lost worker and gives up, and ends through MPI_Abort (exit code 1).
  EXPECT_THAT(text, HasSubstr("rank 0 (host host1) gives up")) << text;
  EXPECT_THAT(text, HasSubstr("rank 1 (host host1) gives up")) << text;
  EXPECT_THAT(text, HasSubstr("tower-worker: unreachable: rank 2 on host2")) << text;
  EXPECT_THAT(text, HasSubstr("with errorcode 1.")) << text;
}

}  // namespace
}  // namespace tower
