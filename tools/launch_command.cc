#include "tools/launch_command.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "strategy/collectives/mpi/worker_report.h"
#include "tools/launch_probe.h"
#include "tools/slurm_environment.h"
#include "util/flags.h"
#include "util/statusor.h"
#include "util/strings.h"

namespace tower {
namespace {

using Clock = std::chrono::steady_clock;

struct LaunchFlags {
  std::string hosts;
  int64_t workers_per_host = 1;
  int64_t min_hosts = 1;
  int64_t max_restarts = 3;
  double grace_s = 10;
  double start_timeout_s = 120;
  std::string mpirun = "mpirun";
  std::string mpirun_args;
  bool readmit = true;  // probe dropped hosts before each relaunch, take back those that answer
  double probe_timeout_s = 10;  // seconds a probe may take
};

// The hosts of the job: every --hosts entry in launch order (this machine's first, where
// mpirun places the first ranks), and those dropped. A relaunch runs on the others, in that
// order: a re-admitted host takes its original place back.
struct HostList {
  std::vector<std::string> all;
  std::set<std::string> dropped;
  std::vector<std::string> Current() const {
    std::vector<std::string> current;
    for (const std::string& host : all) {
      if (dropped.count(host) == 0) current.push_back(host);
    }
    return current;
  }
};

// What one mpirun run ended with.
struct Attempt {
  bool launched = false;               // mpirun could be started
  int exit_code = -1;                 // mpirun's, or -signal
  std::set<int> started;              // ranks that reported "started"
  std::set<int> finished;             // ranks that reported "finished"
  bool worker_error = false;          // a worker printed Tower's "error: ..." line
  bool start_timed_out = false;       // not every worker started within the start timeout
  std::vector<UnreachableWorker> lost;  // ranks workers reported unreachable, first first
};

// Where mpirun puts each rank: `hosts` in -H order, `workers_per_host` ranks on each, rank r
// on hosts[r / workers_per_host] (--map-by slot). mpirun always maps onto its own host first
// when that host is listed, then follows -H (measured, Open MPI 4.1.4, run on host1:
// -H host2:2,host1:2 puts ranks 0-1 on host1; -H host2,host1,host3 puts rank 1 on host2 and
// rank 2 on host3; the same with addresses), so the list is ordered with this machine's entry
// first (LocalFirst): the order is then the one mpirun follows.
struct Placement {
  std::vector<std::string> hosts;
  int64_t workers_per_host = 1;
  int64_t workers() const { return static_cast<int64_t>(hosts.size()) * workers_per_host; }
  // The --hosts entry rank `rank` runs on, as the user wrote it; "" for a rank not placed.
  std::string HostOf(int rank) const {
    if (rank < 0 || rank >= workers()) return "";
    return hosts[static_cast<size_t>(rank / workers_per_host)];
  }
};

int Fail(std::ostream& err, const std::string& message, int code) {
  err << "error: tower launch: " << message << "\n";
  return code;
}

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(word);
  return words;
}

std::string ShortName(const std::string& host) { return host.substr(0, host.find('.')); }

// The addresses of this machine's network interfaces (loopback included), as text.
std::set<std::string> LocalAddresses() {
  std::set<std::string> addresses;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return addresses;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = "";
    const int family = entry->ifa_addr->sa_family;
    if (family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr, text,
                sizeof(text));
    } else if (family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr)->sin6_addr, text,
                sizeof(text));
    }
    if (text[0] != '\0') addresses.insert(text);
  }
  freeifaddrs(list);
  return addresses;
}

// Whether `host` (a --hosts entry: a name or an address) is this machine, as mpirun judges
// it: this machine's name (or its short name), or a name or address that resolves to one of
// its interfaces.
bool IsThisMachine(const std::string& host, const std::set<std::string>& local_addresses) {
  char name[256] = "";
  if (gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
    if (host == name || ShortName(host) == ShortName(name)) return true;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool local = false;
  for (const addrinfo* entry = found; entry != nullptr && !local; entry = entry->ai_next) {
    char text[NI_MAXHOST] = "";
    if (getnameinfo(entry->ai_addr, entry->ai_addrlen, text, sizeof(text), nullptr, 0,
                    NI_NUMERICHOST) == 0) {
      local = local_addresses.count(text) > 0;
    }
  }
  freeaddrinfo(found);
  return local;
}

// `hosts` with this machine's entry first, where mpirun puts it whatever -H says (and where
// mpirun and this command run, so it is never dropped); the others keep their order.
// `*local`: that entry, "" when none is this machine.
std::vector<std::string> LocalFirst(const std::vector<std::string>& hosts, std::string* local,
                                    std::ostream& out) {
  const std::set<std::string> addresses = LocalAddresses();
  *local = "";
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!IsThisMachine(hosts[i], addresses)) continue;
    *local = hosts[i];
    if (i == 0) return hosts;
    std::vector<std::string> ordered = {hosts[i]};
    for (size_t j = 0; j < hosts.size(); ++j) {
      if (j != i) ordered.push_back(hosts[j]);
    }
    out << "tower launch: " << hosts[i] << " is this machine, where mpirun runs: it comes first "
        << "(mpirun places its first ranks there whatever the order)\n";
    return ordered;
  }
  return hosts;
}

std::string SelfPath() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "";
  return std::string(path, static_cast<size_t>(n));
}

// What one line of the job's output tells: a worker's error, its start or finish, or hosts
// it reports unreachable (`*first_report`: when the first such report came).
void TakeLine(const std::string& line, Attempt* attempt,
              std::optional<Clock::time_point>* first_report) {
  if (StartsWith(line, "error: ")) attempt->worker_error = true;
  const WorkerReport report = ParseWorkerReport(line);
  if (report.kind == WorkerReport::Kind::kStarted) {
    attempt->started.insert(report.rank);
  } else if (report.kind == WorkerReport::Kind::kFinished) {
    attempt->finished.insert(report.rank);
  } else if (report.kind == WorkerReport::Kind::kUnreachable) {
    if (!first_report->has_value()) *first_report = Clock::now();
    for (const UnreachableWorker& worker : report.unreachable) {
      if (std::none_of(attempt->lost.begin(), attempt->lost.end(),
                       [&](const UnreachableWorker& lost) { return lost.rank == worker.rank; })) {
        attempt->lost.push_back(worker);
      }
    }
  }
}

// Runs `argv` with its output (stdout and stderr) read line by line: each line is echoed to
// `out` and parsed for worker reports. Ends mpirun `grace` after the first unreachable
// report if it has not ended by itself (it may wait forever on a host it cannot reach), and
// when fewer than `workers` have started after `start_timeout` (a daemon that never came up).
Attempt RunMpirun(const std::vector<std::string>& argv, int64_t workers,
                  std::chrono::milliseconds grace, std::chrono::milliseconds start_timeout,
                  std::ostream& out, std::ostream& err) {
  const auto begin = Clock::now();
  Attempt attempt;
  int fds[2];
  if (pipe(fds) != 0) {
    err << "error: tower launch: pipe: " << std::strerror(errno) << "\n";
    return attempt;
  }
  out << std::flush;
  err << std::flush;
  const pid_t pid = StartInItsOwnGroup(argv, fds);
  if (pid < 0) {
    err << "error: tower launch: fork: " << std::strerror(errno) << "\n";
    close(fds[0]);
    return attempt;
  }
  attempt.launched = true;
  std::string pending;
  bool open = true;
  bool exited = false;
  int status = 0;
  std::optional<Clock::time_point> first_report;
  std::optional<Clock::time_point> exited_at;
  std::optional<Clock::time_point> terminated;  // when mpirun was sent SIGTERM
  bool killed = false;
  while (open) {
    pollfd poll_fd{fds[0], POLLIN, 0};
    const int ready = poll(&poll_fd, 1, 200);
    if (ready > 0) {
      char buffer[4096];
      const ssize_t n = read(fds[0], buffer, sizeof(buffer));
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        open = false;
      } else {
        pending.append(buffer, static_cast<size_t>(n));
      }
    }
    for (size_t end; (end = pending.find('\n')) != std::string::npos;) {
      const std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      out << line << "\n" << std::flush;
      TakeLine(line, &attempt, &first_report);
    }
    if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      exited_at = Clock::now();
    }
    const auto now = Clock::now();
    // Workers that outlive mpirun (an orphaned daemon's) may hold the pipe open: read what
    // is already there, then stop.
    if (exited && now - *exited_at > std::chrono::milliseconds(500)) break;
    if (!exited && !terminated && first_report.has_value() && now - *first_report > grace) {
      out << "tower launch: mpirun still running " << grace.count() / 1000.0
          << " s after a host was reported lost: ending it\n"
          << std::flush;
      kill(-pid, SIGTERM);
      terminated = now;
    }
    if (!exited && !terminated && static_cast<int64_t>(attempt.started.size()) < workers &&
        now - begin > start_timeout) {
      out << "tower launch: " << attempt.started.size() << " of " << workers
          << " workers started within " << start_timeout.count() / 1000.0
          << " s: ending mpirun\n"
          << std::flush;
      kill(-pid, SIGTERM);
      terminated = now;
      attempt.start_timed_out = true;
    }
    if (!exited && terminated && !killed && now - *terminated > std::chrono::seconds(3)) {
      kill(-pid, SIGKILL);
      killed = true;
    }
  }
  if (!pending.empty()) out << pending << "\n";
  close(fds[0]);
  if (!exited) {
    if (!terminated) kill(-pid, SIGTERM);
    for (int i = 0; i < 30 && waitpid(pid, &status, WNOHANG) != pid; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (i == 29) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
      }
    }
  }
  attempt.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return attempt;
}

// mpirun flags that would move ranks away from the placement this command computes.
constexpr char kPlacingMpirunFlags[] =
    "-H -host --host -hostfile --hostfile -machinefile --machinefile -default-hostfile "
    "--default-hostfile -np --np -n -c -map-by --map-by -rf -rankfile --rankfile -npernode "
    "--npernode -N -npersocket --npersocket -ppr --ppr -bynode --bynode -byslot --byslot "
    "-rank-by --rank-by -nolocal --nolocal";

}  // namespace

// The hosts of --hosts, and the train command checked (it must back up; --resume is added so
// that a relaunch resumes). InvalidArgument saying what to give.
Status CheckLaunch(const LaunchFlags& flags, std::vector<std::string>* hosts,
                   std::vector<std::string>* command, std::string* source) {
  std::vector<std::string> given = Split(flags.hosts, ',');
  *source = "--hosts";
  if (flags.hosts.empty()) {
    // Inside a Slurm allocation (sbatch, salloc): its nodes.
    TOWER_ASSIGN_OR_RETURN(std::optional<SlurmAllocation> allocation, HostsFromSlurmEnvironment());
    if (allocation.has_value()) {
      given = allocation->hosts;
      *source = "Slurm job " + allocation->job_id + "'s nodes (SLURM_JOB_NODELIST)";
    }
  }
  for (const std::string& host : given) {
    if (host.empty()) continue;
    if (std::find(hosts->begin(), hosts->end(), host) != hosts->end()) {
      return InvalidArgumentError("--hosts names " + host + " twice (use --workers-per-host)");
    }
    hosts->push_back(host);
  }
  if (hosts->empty()) {
    return InvalidArgumentError(
        "--hosts is required (e.g. --hosts=node1,node2) outside a Slurm "
        "allocation (inside one its nodes are the hosts)");
  }
  if (flags.workers_per_host < 1 || flags.workers_per_host > 1024) {
    return InvalidArgumentError("--workers-per-host must be between 1 and 1024");
  }
  if (flags.min_hosts < 1 || flags.min_hosts > static_cast<int64_t>(hosts->size())) {
    return InvalidArgumentError("--min-hosts must be between 1 and the " +
                                std::to_string(hosts->size()) + " hosts given");
  }
  if (flags.max_restarts < 0) return InvalidArgumentError("--max-restarts must be 0 or more");
  if (!(flags.grace_s > 0 && flags.grace_s <= 3600)) {
    return InvalidArgumentError("--grace must be between 0 and 3600 seconds");
  }
  if (!(flags.start_timeout_s > 0 && flags.start_timeout_s <= 86400)) {
    return InvalidArgumentError("--start-timeout must be between 0 and 86400 seconds");
  }
  if (!(flags.probe_timeout_s > 0 && flags.probe_timeout_s <= 3600)) {
    return InvalidArgumentError("--probe-timeout must be between 0 and 3600 seconds");
  }
  for (const std::string& word : Words(flags.mpirun_args)) {
    const std::string name = word.substr(0, word.find('='));
    for (const std::string& placing : Words(kPlacingMpirunFlags)) {
      if (name == placing) {
        return InvalidArgumentError(
            "--mpirun-args gives " + name +
            ": tower launch places the ranks itself (-H from --hosts and --workers-per-host, "
            "--map-by slot) to know which host a lost rank ran on; remove it");
      }
    }
  }
  if (command->empty() || (*command)[0] != "train") {
    return InvalidArgumentError(
        "give the job after --: `tower launch --hosts=... -- train --data=... "
        "--backup=PATH ...`");
  }
  bool backup = false, resume = false;
  for (const std::string& arg : *command) {
    backup = backup || (StartsWith(arg, "--backup=") && arg.size() > 9);
    resume = resume || arg == "--resume" || StartsWith(arg, "--resume=");
  }
  if (!backup) {
    return InvalidArgumentError(
        "the train command needs --backup=PATH (on a file system every host "
        "sees): a relaunch resumes from it");
  }
  if (resume && std::find(command->begin(), command->end(), "--resume=false") != command->end()) {
    return InvalidArgumentError("--resume=false: a relaunch must resume from the backup");
  }
  if (!resume) command->push_back("--resume");
  return OkStatus();
}

// mpirun's command line for the placement, in recovery mode: mpirun does not end the job the
// moment a host's daemon is lost, so the surviving workers report which ranks they lost (each
// within its collective deadline). --map-by slot: each host's slots filled in -H order.
std::vector<std::string> MpirunArgv(const LaunchFlags& flags, const Placement& placement,
                                    const std::string& self,
                                    const std::vector<std::string>& command) {
  std::vector<std::string> slots;
  for (const std::string& host : placement.hosts) {
    slots.push_back(host + ":" + std::to_string(placement.workers_per_host));
  }
  std::vector<std::string> argv = {flags.mpirun};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.insert(argv.end(),
              {"-H", Join(slots, ","), "-np", std::to_string(placement.workers()), "--map-by",
               "slot", "--enable-recovery", "--mca", "orte_abort_on_non_zero_status", "0", "-x",
               std::string(kWorkerReportEnv) + "=1"});
  for (const std::string& word : Words(flags.mpirun_args)) argv.push_back(word);
  argv.push_back(self);
  for (const std::string& arg : command) argv.push_back(arg);
  return argv;
}

// After a run that lost ranks: the hosts the lost ranks were placed on, in placement order,
// or why the job is not restarted (FailedPrecondition: this machine's host lost, or a rank
// that was not placed). A rank's host is where it was placed; the name its worker calls its
// host by is only shown.
StatusOr<std::vector<std::string>> LostHosts(const Placement& placement, const std::string& local,
                                             const Attempt& attempt, std::ostream& out) {
  std::vector<std::string> lost, lines;
  for (const UnreachableWorker& worker : attempt.lost) {
    const std::string host = placement.HostOf(worker.rank);
    if (host.empty()) {
      return FailedPreconditionError("workers report rank " + std::to_string(worker.rank) +
                                     " (host " + worker.host + ") unreachable, but only ranks 0-" +
                                     std::to_string(placement.workers() - 1) + " were placed (on " +
                                     Join(placement.hosts, ", ") + "); not restarting");
    }
    if (host == local) {
      return FailedPreconditionError(
          "workers report rank " + std::to_string(worker.rank) + " (host " + worker.host +
          ") unreachable, placed on " + host +
          ", this machine: it runs mpirun and this command, and cannot be dropped; not "
          "restarting");
    }
    if (std::find(lost.begin(), lost.end(), host) == lost.end()) lost.push_back(host);
  }
  for (const std::string& host : lost) {
    std::vector<std::string> ranks;
    for (const UnreachableWorker& worker : attempt.lost) {
      if (placement.HostOf(worker.rank) == host) {
        ranks.push_back("rank " + std::to_string(worker.rank) + " (host " + worker.host + ")");
      }
    }
    lines.push_back(host + ", where " + Join(ranks, ", ") + (ranks.size() == 1 ? " was" : " were") +
                    " placed");
  }
  out << "tower launch: lost " << Join(lines, "; ") << " (reported unreachable by the workers)\n";
  return lost;
}

// Before a relaunch (--readmit): probes the hosts dropped at earlier relaunches, all at once,
// and takes back those that answer, each in its original place; a line for each. mpirun runs
// `true` on the host alone, with the job's --mpirun-args: the launch agent and the network a
// relaunch needs there, ssh's or another agent's (a TCP connect to port 22 would miss both an
// agent that is not ssh and the daemon's way back to mpirun). How many came back.
int Readmit(const LaunchFlags& flags, HostList* hosts, std::ostream& out) {
  if (!flags.readmit || hosts->dropped.empty()) return 0;
  std::vector<std::string> probed;
  std::vector<std::vector<std::string>> argvs;
  for (const std::string& host : hosts->all) {
    if (hosts->dropped.count(host) == 0) continue;
    probed.push_back(host);
    argvs.push_back({flags.mpirun});
    if (geteuid() == 0) argvs.back().push_back("--allow-run-as-root");
    argvs.back().insert(argvs.back().end(), {"-H", host + ":1", "-np", "1"});
    for (const std::string& word : Words(flags.mpirun_args)) argvs.back().push_back(word);
    argvs.back().push_back("true");
  }
  out << "tower launch: probing " << Join(probed, ", ") << " (dropped before): mpirun runs `true` "
      << "there, within " << flags.probe_timeout_s << " s\n"
      << std::flush;
  const std::vector<ProbeResult> results = ProbeAll(
      argvs, std::chrono::milliseconds(static_cast<int64_t>(flags.probe_timeout_s * 1000)));
  int back = 0;
  for (size_t i = 0; i < probed.size(); ++i) {
    if (results[i].why.empty()) {
      hosts->dropped.erase(probed[i]);
      ++back;
      out << "tower launch: re-admitting " << probed[i] << ": it answers again (mpirun ran `true` "
          << "there in " << std::lround(results[i].seconds * 10) / 10.0 << " s)\n";
    } else {
      out << "tower launch: " << probed[i] << " is still unreachable (" << results[i].why
          << "): not re-admitted\n";
    }
  }
  return back;
}

// After a run that did not finish: the hosts of the next run (`*hosts` updated), or why there
// is none (FailedPrecondition, its message for the user). `restart`: relaunches so far.
Status PlanRelaunch(const LaunchFlags& flags, const Placement& placement, const std::string& local,
                    const Attempt& attempt, int64_t restart, HostList* hosts, std::ostream& out) {
  const int64_t workers = placement.workers();
  const std::string count = " (restart " + std::to_string(restart + 1) + " of at most " +
                            std::to_string(flags.max_restarts) + ")";
  if (attempt.lost.empty() && static_cast<int64_t>(attempt.started.size()) < workers &&
      !attempt.worker_error) {
    // The job did not come up (a daemon failed to start or to reach mpirun) and no worker
    // failed in Tower's own code: the same hosts again, and those that answer again.
    if (restart >= flags.max_restarts) {
      return FailedPreconditionError(
          std::to_string(attempt.started.size()) + " of " + std::to_string(workers) +
          " workers started, and --max-restarts=" + std::to_string(flags.max_restarts) +
          " is reached; giving up");
    }
    const bool back = Readmit(flags, hosts, out) > 0;
    out << "tower launch: " << attempt.started.size() << " of " << workers << " workers started"
        << (attempt.start_timed_out ? "" : " before mpirun ended") << ": relaunching on "
        << (back ? Join(hosts->Current(), ", ") : std::string("the same hosts")) << count << "\n";
    return OkStatus();
  }
  if (attempt.lost.empty()) {
    return FailedPreconditionError(
        std::to_string(attempt.finished.size()) + " of " + std::to_string(workers) +
        " workers finished and none reported a lost host (mpirun exited " +
        std::to_string(attempt.exit_code) + "): see the errors above; not restarting");
  }
  TOWER_ASSIGN_OR_RETURN(const std::vector<std::string> lost,
                         LostHosts(placement, local, attempt, out));
  if (restart >= flags.max_restarts) {
    return FailedPreconditionError(
        "--max-restarts=" + std::to_string(flags.max_restarts) +
        " reached; giving up (the backup holds the progress: run again to resume)");
  }
  // Hosts lost just now are not probed: they were found unreachable a moment ago.
  Readmit(flags, hosts, out);
  hosts->dropped.insert(lost.begin(), lost.end());
  const std::vector<std::string> rest = hosts->Current();
  if (static_cast<int64_t>(rest.size()) < flags.min_hosts) {
    return FailedPreconditionError(
        std::to_string(rest.size()) + " host" + (rest.size() == 1 ? "" : "s") + " would remain (" +
        Join(rest, ", ") + "), fewer than --min-hosts=" + std::to_string(flags.min_hosts) +
        "; giving up");
  }
  out << "tower launch: relaunching on " << Join(rest, ", ") << " from the backup" << count << "\n";
  return OkStatus();
}

void AddLaunchFlags(FlagParser* parser, LaunchFlags* flags) {
  parser->AddString(
      "hosts", &flags->hosts,
      "hosts to run on, comma-separated names or addresses (as mpirun's -H takes them); this "
      "machine's entry, where mpirun runs, gets the first ranks and is never dropped; unset "
      "inside a Slurm allocation: its nodes (SLURM_JOB_NODELIST)");
  parser->AddInt("workers-per-host", &flags->workers_per_host,
                 "worker processes on each host (each runs the train command's --replicas)");
  parser->AddInt("min-hosts", &flags->min_hosts, "give up when fewer hosts than this would remain");
  parser->AddInt("max-restarts", &flags->max_restarts,
                 "relaunches at most (0: report the lost host and stop)");
  parser->AddDouble(
      "grace", &flags->grace_s,
      "seconds mpirun may take to end after a worker reported a lost host, before it is ended");
  parser->AddDouble("start-timeout", &flags->start_timeout_s,
                    "seconds every worker has to start; if some do not (a daemon that never came "
                    "up), mpirun is ended and the job relaunched on the same hosts");
  parser->AddBool(
      "readmit", &flags->readmit,
      "before each relaunch, probe the hosts dropped earlier (mpirun runs `true` on each) and take "
      "back, in their places, those that answer (--readmit=false: a dropped host stays out)");
  parser->AddDouble("probe-timeout", &flags->probe_timeout_s,
                    "seconds a dropped host has to answer a probe");
  parser->AddString("mpirun", &flags->mpirun, "the mpirun to run");
  parser->AddString(
      "mpirun-args", &flags->mpirun_args,
      "more mpirun arguments, space-separated (e.g. \"--mca btl_tcp_if_include eth0\")");
}

int RunLaunchCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const auto dashes = std::find(args.begin(), args.end(), "--");
  const std::vector<std::string> own(args.begin(), dashes);
  std::vector<std::string> command(dashes == args.end() ? args.end() : dashes + 1, args.end());
  LaunchFlags flags;
  FlagParser parser("tower launch [flags] -- train [train flags]");
  AddLaunchFlags(&parser, &flags);
  Status status = parser.Parse(own);
  if (parser.help_requested()) {
    out << parser.Usage();
    return 0;
  }
  if (!status.ok()) return Fail(err, status.message(), 2);
  std::vector<std::string> listed;
  std::string hosts_from;
  status = CheckLaunch(flags, &listed, &command, &hosts_from);
  if (!status.ok()) return Fail(err, status.message(), 2);
  if (flags.hosts.empty()) {
    out << "tower launch: hosts from " << hosts_from << ": " << Join(listed, ", ") << "\n";
  }
  const std::string self = SelfPath();
  if (self.empty()) return Fail(err, "cannot find this program's path (/proc/self/exe)", 1);

  std::string local;
  HostList hosts;
  hosts.all = LocalFirst(listed, &local, out);
  const std::chrono::milliseconds grace(static_cast<int64_t>(flags.grace_s * 1000));
  const std::chrono::milliseconds start_timeout(static_cast<int64_t>(flags.start_timeout_s * 1000));
  for (int64_t restart = 0;; ++restart) {
    const Placement placement{hosts.Current(), flags.workers_per_host};
    const int64_t workers = placement.workers();
    const size_t count = placement.hosts.size();
    const std::string on = std::to_string(count) + " host" + (count == 1 ? "" : "s") + " (" +
                           Join(placement.hosts, ", ") + ")";
    const std::vector<std::string> argv = MpirunArgv(flags, placement, self, command);
    out << "tower launch: run " << restart + 1 << " on " << on << ", " << workers << " worker"
        << (workers == 1 ? "" : "s") << ": " << Join(argv, " ") << "\n"
        << std::flush;
    const Attempt attempt = RunMpirun(argv, workers, grace, start_timeout, out, err);
    if (!attempt.launched) return 1;
    if (static_cast<int64_t>(attempt.finished.size()) == workers) {
      out << "tower launch: done on " << on << " after " << restart << " restart"
          << (restart == 1 ? "" : "s") << "\n";
      return 0;
    }
    status = PlanRelaunch(flags, placement, local, attempt, restart, &hosts, out);
    if (!status.ok()) return Fail(err, status.message(), 1);
    out << std::flush;
  }
}

}  // namespace tower
