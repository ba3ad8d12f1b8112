// The NCCL emulation across processes of one host: nccl_worker processes (started here, or
// under mpirun) meet by a unique id made in this process and compute closed-form results; a
// killed or stalled process ends in an asynchronous error on its peers that names it, never
// in a hang. The target sets CUDAEMU_GPUS=4. Every child runs under a deadline.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/cudaemu/nccl/nccl_test_util.h"

extern char** environ;

namespace tower::nccl_test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::string Worker() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/tower/tests/cudaemu/nccl/nccl_worker";
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// A child process whose stdout and stderr go to a file; killed if still running when the
// object ends.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
    static int serial = 0;
    log_ =
        TempDir() + "/child-" + std::to_string(getpid()) + "-" + std::to_string(++serial) + ".log";
    std::map<std::string, std::string> merged;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const size_t eq = entry.find('=');
      if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    for (const auto& [name, value] : env) merged[name] = value;
    std::vector<std::string> env_strings;
    for (const auto& [name, value] : merged) env_strings.push_back(name + "=" + value);
    std::vector<char*> envp, args;
    for (auto& s : env_strings) envp.push_back(&s[0]);
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (auto& s : argv_copy) args.push_back(&s[0]);
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) Wait(0ms);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // The exit code (or -signal); when `limit` passes first, ends the child (SIGTERM, which
  // mpirun passes on to its processes, then SIGKILL) and returns 124.
  int Wait(std::chrono::milliseconds limit) {
    if (pid_ <= 0) return -1000;
    if (reaped_) return code_;
    auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    int signals_sent = 0;
    while (true) {
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) break;
      if (done < 0) return -1000;
      if (signals_sent < 2 && std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, signals_sent == 0 ? SIGTERM : SIGKILL);
        ++signals_sent;
        deadline = std::chrono::steady_clock::now() + 5s;
      }
      std::this_thread::sleep_for(2ms);
    }
    const bool killed = signals_sent > 0;
    reaped_ = true;
    code_ = killed ? 124 : WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return code_;
  }
  std::string Output() const {
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int code_ = 0;
};

// Files named cudaemu-nccl-* in /tmp and $TMPDIR changed at or after `since`: the rendezvous
// sockets are abstract (no file), so a killed hub must leave none behind.
std::vector<std::string> SocketFilesSince(std::filesystem::file_time_type since) {
  std::vector<std::string> found;
  std::vector<std::string> dirs = {"/tmp"};
  if (const char* tmpdir = std::getenv("TMPDIR"); tmpdir != nullptr && dirs[0] != tmpdir) {
    dirs.push_back(tmpdir);
  }
  for (const std::string& dir : dirs) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
      const std::string name = entry.path().filename().string();
      std::error_code time_error;
      const auto changed = entry.last_write_time(time_error);
      if (name.rfind("cudaemu-nccl-", 0) == 0 && !time_error && changed >= since) {
        found.push_back(entry.path().string());
      }
    }
  }
  return found;
}

std::string NewId() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  return Hex(id);
}

std::vector<std::string> WorkerArgs(const std::string& id, int nranks, int first_rank, int local,
                                    const std::string& mode, int deadline_ms = 10000) {
  return {Worker(),
          "--id=" + id,
          "--nranks=" + std::to_string(nranks),
          "--first_rank=" + std::to_string(first_rank),
          "--local=" + std::to_string(local),
          "--mode=" + mode,
          "--deadline_ms=" + std::to_string(deadline_ms)};
}

class NcclProcessTest : public ::testing::Test {
 protected:
  NcclProcessTest()
      : watchdog_(120s, ::testing::UnitTest::GetInstance()->current_test_info()->name()) {}
  Watchdog watchdog_;
};

TEST_F(NcclProcessTest, CollectivesAcrossProcesses) {
  // (processes, ranks per process): 2x1, 3x1, 2x2 (ranks 0,1 in one process: as Tower's
  // workers with two local GPUs each).
  for (const auto& [processes, local] : std::vector<std::pair<int, int>>{{2, 1}, {3, 1}, {2, 2}}) {
    SCOPED_TRACE(std::to_string(processes) + "x" + std::to_string(local));
    const std::string id = NewId();
    const int n = processes * local;
    std::vector<std::unique_ptr<Child>> children;
    // The last process first: the others wait for rank 0's hub.
    for (int p = processes - 1; p >= 0; --p) {
      children.push_back(std::make_unique<Child>(WorkerArgs(id, n, p * local, local, "collectives"),
                                                 std::map<std::string, std::string>{}));
      ASSERT_GT(children.back()->pid(), 0);
      std::this_thread::sleep_for(30ms);
    }
    std::string all;
    for (auto& child : children) {
      EXPECT_EQ(child->Wait(60s), 0) << child->Output();
      all += child->Output();
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_THAT(all, HasSubstr("rank " + std::to_string(r) + ": collectives OK (" +
                                 std::to_string(n) + " ranks"));
    }
  }
}

// Rank 1's process is SIGKILLed at its first collective (CUDAEMU_NCCL_DIE): rank 0 gets an
// asynchronous error naming rank 1 and its pid within a second or so, and its stream moves on.
TEST_F(NcclProcessTest, AKilledPeerIsReportedWithinSeconds) {
  const std::string id = NewId();
  Child rank1(WorkerArgs(id, 2, 1, 1, "survive"), {{"CUDAEMU_NCCL_DIE", "1:collective:1"}});
  Child rank0(WorkerArgs(id, 2, 0, 1, "survive", 20000), {{"CUDAEMU_NCCL_DIE", "1:collective:1"}});
  EXPECT_EQ(rank1.Wait(60s), -SIGKILL) << rank1.Output();
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(rank0.Wait(60s), 0) << rank0.Output();
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 5s);
  const std::string out = rank0.Output();
  EXPECT_THAT(out, HasSubstr("rank 0: async error"));
  EXPECT_THAT(out, HasSubstr("remote process exited"));
  EXPECT_THAT(out,
              HasSubstr("rank 1 (pid " + std::to_string(rank1.pid()) + ") closed its connection"));
  EXPECT_THAT(out, HasSubstr("rank 0: stream released"));
  EXPECT_THAT(rank1.Output(), HasSubstr("CUDAEMU_NCCL_DIE: rank 1 kills its process"));
}

// The hub's process (rank 0) dies: the others learn it from the closed connection; with three
// processes, rank 2's death reaches rank 1 through the hub.
TEST_F(NcclProcessTest, TheHubOrAThirdProcessDying) {
  // A second back: file times can be coarser than the clock.
  const auto start = std::filesystem::file_time_type::clock::now() - 1s;
  {
    const std::string id = NewId();
    Child rank0(WorkerArgs(id, 2, 0, 1, "survive"), {{"CUDAEMU_NCCL_DIE", "0:collective:1"}});
    Child rank1(WorkerArgs(id, 2, 1, 1, "survive", 20000), {});
    EXPECT_EQ(rank0.Wait(60s), -SIGKILL) << rank0.Output();
    EXPECT_EQ(rank1.Wait(60s), 0) << rank1.Output();
    EXPECT_THAT(rank1.Output(), HasSubstr("rank 0 (pid " + std::to_string(rank0.pid()) +
                                          ") closed its connection"));
    EXPECT_THAT(rank1.Output(), HasSubstr("rank 1: stream released"));
  }
  {
    const std::string id = NewId();
    const std::map<std::string, std::string> env = {{"CUDAEMU_NCCL_DIE", "2:collective:1"}};
    Child rank0(WorkerArgs(id, 3, 0, 1, "survive", 20000), env);
    Child rank1(WorkerArgs(id, 3, 1, 1, "survive", 20000), env);
    Child rank2(WorkerArgs(id, 3, 2, 1, "survive"), env);
    EXPECT_EQ(rank2.Wait(60s), -SIGKILL) << rank2.Output();
    EXPECT_EQ(rank0.Wait(60s), 0) << rank0.Output();
    EXPECT_EQ(rank1.Wait(60s), 0) << rank1.Output();
    const std::string named =
        "rank 2 (pid " + std::to_string(rank2.pid()) + ") closed its connection";
    EXPECT_THAT(rank0.Output(), HasSubstr(named));
    EXPECT_THAT(rank1.Output(), HasSubstr(named));
  }
  EXPECT_THAT(SocketFilesSince(start), ::testing::IsEmpty());
}

// Rank 1 stalls (CUDAEMU_NCCL_STALL): rank 0's deadline passes and it aborts; rank 1 then sees
// the abort as an asynchronous error naming rank 0, aborts too, and its stalled stream is
// released.
TEST_F(NcclProcessTest, AStalledPeerIsAbortedAfterADeadline) {
  const std::string id = NewId();
  const std::map<std::string, std::string> env = {{"CUDAEMU_NCCL_STALL", "1"}};
  Child rank0(WorkerArgs(id, 2, 0, 1, "survive", 500), env);
  Child rank1(WorkerArgs(id, 2, 1, 1, "survive", 30000), env);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(rank0.Wait(60s), 0) << rank0.Output();
  EXPECT_EQ(rank1.Wait(60s), 0) << rank1.Output();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  EXPECT_THAT(rank0.Output(), HasSubstr("rank 0: deadline passed: aborting"));
  EXPECT_THAT(rank0.Output(), HasSubstr("rank 0: stream released"));
  EXPECT_THAT(rank1.Output(), HasSubstr("rank 0 (pid " + std::to_string(rank0.pid()) +
                                        ") aborted its communicator"));
  EXPECT_THAT(rank1.Output(), HasSubstr("rank 1: stream released"));
}

// Two processes on the same GPU are refused, as NCCL does.
TEST_F(NcclProcessTest, TwoProcessesOnOneGpuAreRefused) {
  const std::string id = NewId();
  // Rank 1 would use device 1 % gpus: with one GPU, both are on device 0.
  Child rank0(WorkerArgs(id, 2, 0, 1, "collectives"), {{"CUDAEMU_GPUS", "1"}});
  Child rank1(WorkerArgs(id, 2, 1, 1, "collectives"), {{"CUDAEMU_GPUS", "1"}});
  EXPECT_EQ(rank0.Wait(60s), 1);
  EXPECT_EQ(rank1.Wait(60s), 1);
  for (Child* child : {&rank0, &rank1}) {
    EXPECT_THAT(child->Output(),
                HasSubstr("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 0"));
  }
}

// Under Open MPI's mpirun (as Tower's multi-worker strategy runs): 2 processes x 1 rank and
// 2 processes x 2 ranks.
TEST_F(NcclProcessTest, UnderMpirun) {
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
  for (int local : {1, 2}) {
    const std::string id = NewId();
    std::vector<std::string> argv = {"mpirun",
                                     "--allow-run-as-root",
                                     "--oversubscribe",
                                     "--bind-to",
                                     "none",
                                     "-np",
                                     "2",
                                     Worker(),
                                     "--mpi",
                                     "--id=" + id,
                                     "--nranks=" + std::to_string(2 * local),
                                     "--local=" + std::to_string(local),
                                     "--size=1001"};
    Child mpirun(argv, {});
    ASSERT_GT(mpirun.pid(), 0);
    EXPECT_EQ(mpirun.Wait(90s), 0) << mpirun.Output();
    for (int r = 0; r < 2 * local; ++r) {
      EXPECT_THAT(mpirun.Output(), HasSubstr("rank " + std::to_string(r) + ": collectives OK (" +
                                             std::to_string(2 * local) + " ranks"));
    }
  }
}

}  // namespace
}  // namespace tower::nccl_test
