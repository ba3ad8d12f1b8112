#include "tests/testing/netns_hosts.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/testing/run_program.h"

namespace tower::testing {
namespace {

constexpr char kNamespacePrefix[] = "tw";
constexpr char kSubnet[] = "10.231.0";
constexpr char kFakeTime[] = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

std::string Quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

bool WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  {
    std::ofstream file(path, std::ios::trunc);
    file << text;
    if (!file.good()) return false;
  }
  return chmod(path.c_str(), mode) == 0;
}

// Kills every process in the namespaces, removes them and their /etc/netns files.
std::string TeardownScript(const std::vector<std::string>& namespaces) {
  std::string list;
  for (const std::string& ns : namespaces) list += " " + ns;
  return "#!/bin/sh\n"
         "# Removes these test hosts: every process in them, the namespaces, their files.\n"
         "for attempt in $(seq 1 50); do\n"
         "  left=0\n"
         "  for ns in" + list + "; do\n"
         "    pids=$(ip netns pids \"$ns\" 2>/dev/null)\n"
         "    if [ -n \"$pids\" ]; then kill -9 $pids 2>/dev/null; left=1; fi\n"
         "  done\n"
         "  [ $left = 0 ] && break\n"
         "  sleep 0.1\n"
         "done\n"
         "for ns in" + list + "; do\n"
         "  ip netns del \"$ns\" 2>/dev/null\n"
         "  rm -rf \"/etc/netns/$ns\"\n"
         "done\n"
         "exit 0\n";
}

// A namespace of this harness: "tw-<run>-<pid>-sw" (the switch) or "tw-<run>-<pid>-h<k>"
// (host k), <run> the test run's id (TOWER_TEST_RUN, "local" when unset) and <pid> the test
// process that made it.
struct NamespaceName {
  std::string run;
  pid_t owner = -1;
};

// Whether `ns` is one of this harness's namespaces, and whose.
bool ParseNamespace(const std::string& ns, NamespaceName* name) {
  const std::string prefix = std::string(kNamespacePrefix) + "-";
  if (ns.rfind(prefix, 0) != 0) return false;
  const size_t run_end = ns.find('-', prefix.size());
  if (run_end == std::string::npos || run_end == prefix.size()) return false;
  const size_t pid_end = ns.find('-', run_end + 1);
  if (pid_end == std::string::npos || pid_end == run_end + 1) return false;
  for (size_t i = run_end + 1; i < pid_end; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(ns[i]))) return false;
  }
  const std::string role = ns.substr(pid_end + 1);
  if (role != "sw" && !(role.size() == 2 && role[0] == 'h' && std::isdigit(role[1]))) {
    return false;
  }
  name->run = ns.substr(prefix.size(), run_end - prefix.size());
  name->owner = static_cast<pid_t>(std::atol(ns.substr(run_end + 1, pid_end - run_end - 1).c_str()));
  return name->owner > 0;
}

// The test run's id: TOWER_TEST_RUN (letters and digits, as .ci/run sets it, so that its
// leftover check judges only what its own tests made), else "local". Empty if malformed.
std::string RunId() {
  const char* run = std::getenv("TOWER_TEST_RUN");
  if (run == nullptr || run[0] == '\0') return "local";
  const std::string id = run;
  if (id.size() > 32) return "";
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c))) return "";
  }
  return id;
}

}  // namespace

std::vector<std::string> NetnsHosts::AllNamespaces() {
  std::vector<std::string> found;
  DIR* dir = opendir("/var/run/netns");
  if (dir == nullptr) return found;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    NamespaceName parsed;
    if (ParseNamespace(name, &parsed)) found.push_back(name);
  }
  closedir(dir);
  return found;
}

std::vector<std::string> NetnsHosts::NamespacesOfThisProcess() {
  std::vector<std::string> own;
  for (const std::string& ns : AllNamespaces()) {
    NamespaceName parsed;
    if (ParseNamespace(ns, &parsed) && parsed.run == RunId() && parsed.owner == getpid()) {
      own.push_back(ns);
    }
  }
  return own;
}

std::string NetnsHosts::WhyNot() {
  if (geteuid() != 0) {
    return "multi-host tests make network namespaces, which needs root: run them as root (CI "
           "does)";
  }
  return "";
}

StatusOr<std::unique_ptr<NetnsHosts>> NetnsHosts::Create(int count) {
  if (const std::string why = WhyNot(); !why.empty()) return FailedPreconditionError(why);
  if (count < 1 || count > 9) return InvalidArgumentError("1 to 9 hosts");
  const std::string run = RunId();
  if (run.empty()) {
    return InvalidArgumentError(std::string("TOWER_TEST_RUN='") + std::getenv("TOWER_TEST_RUN") +
                                "' names the test run in namespace names: use 1 to 32 letters "
                                "and digits");
  }
  // What an earlier run that was killed outright may have left (its watchdog normally
  // removes it): namespaces, of any run, whose owning test process is gone. Those of live
  // processes are left alone: another run's test may be using them.
  std::vector<std::string> stale;
  for (const std::string& ns : AllNamespaces()) {
    NamespaceName parsed;
    if (!ParseNamespace(ns, &parsed) || parsed.owner == getpid()) continue;
    if (kill(parsed.owner, 0) != 0 && errno == ESRCH) stale.push_back(ns);
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  auto hosts = std::unique_ptr<NetnsHosts>(new NetnsHosts());
  hosts->prefix_ =
      std::string(kNamespacePrefix) + "-" + run + "-" + std::to_string(getpid()) + "-";
  hosts->dir_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + hosts->prefix_ + "hosts";
  mkdir(hosts->dir_.c_str(), 0755);
  if (!stale.empty()) {
    const std::string script = hosts->dir_ + "/stale_teardown.sh";
    WriteFile(script, TeardownScript(stale), 0755);
    RunCommand(script);
  }
  std::vector<std::string> namespaces = {hosts->prefix_ + "sw"};
  for (int k = 1; k <= count; ++k) {
    hosts->names_.push_back("host" + std::to_string(k));
    namespaces.push_back(hosts->prefix_ + "h" + std::to_string(k));
  }
  const std::string teardown = hosts->dir_ + "/teardown.sh";
  if (!WriteFile(teardown, TeardownScript(namespaces), 0755)) {
    return FailedPreconditionError("cannot write " + teardown);
  }
  // The watchdog: its own session (a Bazel timeout kills the test's process group, not it),
  // waiting for the write end of a pipe to close: at the destructor, or when the test
  // process dies however it dies. Then it runs the teardown.
  int fds[2];
  if (pipe(fds) != 0) return FailedPreconditionError("pipe failed");
  const pid_t watchdog = fork();
  if (watchdog < 0) return FailedPreconditionError("fork failed");
  if (watchdog == 0) {
    setsid();
    const int log = open((hosts->dir_ + "/watchdog.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                         0644);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(log, 1);
    dup2(log, 2);
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != fds[0]) close(fd);
    }
    char byte;
    while (read(fds[0], &byte, 1) != 0) {
      if (errno != EINTR) break;
    }
    execl("/bin/sh", "sh", teardown.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[0]);
  fcntl(fds[1], F_SETFD, FD_CLOEXEC);  // programs the test starts must not hold it
  hosts->watchdog_ = watchdog;
  hosts->watchdog_pipe_ = fds[1];

  // The switch, then each host: a veth pair (host side eth0, switch side pK), an address,
  // links up, and an /etc/hosts naming every host.
  const std::string sw = hosts->prefix_ + "sw";
  std::string etc_hosts = "127.0.0.1 localhost\n";
  for (int k = 1; k <= count; ++k) {
    etc_hosts += std::string(kSubnet) + "." + std::to_string(k) + " host" + std::to_string(k) + "\n";
  }
  std::string setup = "set -e\nip netns add " + sw + "\nip -n " + sw +
                      " link add br0 type bridge\nip -n " + sw + " link set br0 up\n";
  for (int k = 1; k <= count; ++k) {
    const std::string ns = namespaces[k];
    const std::string port = "p" + std::to_string(k);
    setup += "ip netns add " + ns + "\n";
    setup += "ip link add eth0 netns " + ns + " type veth peer name " + port + " netns " + sw + "\n";
    setup += "ip -n " + sw + " link set " + port + " master br0\n";
    setup += "ip -n " + sw + " link set " + port + " up\n";
    setup += "ip -n " + ns + " addr add " + kSubnet + "." + std::to_string(k) + "/24 dev eth0\n";
    setup += "ip -n " + ns + " link set eth0 up\n";
    setup += "ip -n " + ns + " link set lo up\n";
    setup += "mkdir -p /etc/netns/" + ns + "\n";
  }
  const std::string setup_path = hosts->dir_ + "/setup.sh";
  WriteFile(setup_path, setup, 0755);
  const ProgramOutput made = RunCommand(setup_path);
  if (made.exit_code != 0) {
    return FailedPreconditionError("setting up the network namespaces failed: " + made.text);
  }
  for (int k = 1; k <= count; ++k) {
    if (!WriteFile("/etc/netns/" + namespaces[k] + "/hosts", etc_hosts)) {
      return FailedPreconditionError("cannot write /etc/netns/" + namespaces[k] + "/hosts");
    }
  }
  WriteFile(hosts->dir_ + "/binds", "");
  WriteFile(hosts->dir_ + "/clocks", "");
  hosts->WriteAgent();
  return hosts;
}

NetnsHosts::~NetnsHosts() {
  if (watchdog_pipe_ >= 0) close(watchdog_pipe_);
  if (watchdog_ > 0) {
    int status = 0;
    waitpid(watchdog_, &status, 0);
  }
}

std::string NetnsHosts::Namespace(const std::string& host) const {
  for (size_t k = 0; k < names_.size(); ++k) {
    if (names_[k] == host) return prefix_ + "h" + std::to_string(k + 1);
  }
  return "";
}

void NetnsHosts::WriteAgent() const {
  // mpirun calls it as `agent HOST COMMAND...` (as it would call ssh); so does OnHost.
  // A host by its name or its address (mpirun is given either, as by `tower launch --hosts`).
  std::string cases;
  for (const std::string& host : names_) {
    cases +=
        "  " + host + "|" + Address(host) + ") ns=" + Namespace(host) + " host=" + host + " ;;\n";
  }
  const std::string agent =
      "#!/bin/sh\n"
      "# Runs a command on one of the test hosts: agent HOST COMMAND...\n"
      "host=\"$1\"; shift\n"
      "case \"$host\" in\n" + cases +
      "  *) echo \"netns agent: no test host '$host'\" >&2; exit 255 ;;\n"
      "esac\n"
      "binds=$(awk -v h=\"$host\" '$1 == h {printf \"mount --bind %s %s && \", $2, $3}' " +
      dir_ + "/binds)\n"
      "offset=$(awk -v h=\"$host\" '$1 == h {print $2}' " + dir_ + "/clocks)\n"
      "if [ -n \"$offset\" ]; then\n"
      "  export LD_PRELOAD=" + kFakeTime + " FAKETIME=\"${offset}\" FAKETIME_DONT_FAKE_MONOTONIC=1\n"
      "fi\n"
      "exec ip netns exec \"$ns\" unshare --uts --mount sh -c \"${binds}hostname $host && exec sh -c \\\"\\$0\\\"\" \"$*\"\n";
  WriteFile(dir_ + "/agent", agent, 0755);
}

std::string NetnsHosts::Address(const std::string& host) const {
  const std::string ns = Namespace(host);
  if (ns.empty()) return "";
  return std::string(kSubnet) + "." + ns.substr(ns.size() - 1);
}

std::string NetnsHosts::OnHost(const std::string& host, const std::string& command) const {
  return dir_ + "/agent " + host + " " + Quote(command);
}

std::string NetnsHosts::MpirunArgs() const {
  return std::string("--oversubscribe --bind-to none --mca plm_rsh_agent ") + dir_ +
         "/agent --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self --mca btl_tcp_if_include " +
         kSubnet + ".0/24 --mca oob_tcp_if_include " + kSubnet + ".0/24";
}

Status NetnsHosts::Run(const std::string& command) const {
  const ProgramOutput out = RunCommand(command);
  if (out.exit_code != 0) return InternalError(command + " failed: " + out.text);
  return OkStatus();
}

Status NetnsHosts::ShowFileOnHost(const std::string& host, const std::string& path,
                                  const std::string& replacement) {
  if (Namespace(host).empty()) return InvalidArgumentError("no test host " + host);
  std::ofstream(dir_ + "/binds", std::ios::app) << host << " " << replacement << " " << path
                                                << "\n";
  return OkStatus();
}

Status NetnsHosts::SetClockOffset(const std::string& host, int64_t seconds) {
  if (Namespace(host).empty()) return InvalidArgumentError("no test host " + host);
  if (access(kFakeTime, R_OK) != 0) {
    return FailedPreconditionError(std::string(kFakeTime) +
                                   " is missing: install Debian's faketime package (./bazelw "
                                   "does)");
  }
  std::ofstream(dir_ + "/clocks", std::ios::app)
      << host << " " << (seconds >= 0 ? "+" : "") << seconds << "\n";
  return OkStatus();
}

Status NetnsHosts::CutLink(const std::string& host) {
  const std::string ns = Namespace(host);
  if (ns.empty()) return InvalidArgumentError("no test host " + host);
  return Run("ip -n " + prefix_ + "sw link set p" + ns.substr(ns.size() - 1) + " down");
}

Status NetnsHosts::RestoreLink(const std::string& host) {
  const std::string ns = Namespace(host);
  if (ns.empty()) return InvalidArgumentError("no test host " + host);
  return Run("ip -n " + prefix_ + "sw link set p" + ns.substr(ns.size() - 1) + " up");
}

Status NetnsHosts::KillHost(const std::string& host) {
  const std::string ns = Namespace(host);
  if (ns.empty()) return InvalidArgumentError("no test host " + host);
  // Until none is left: a daemon may fork while the first ones die.
  return Run("for i in $(seq 1 50); do p=$(ip netns pids " + ns +
             "); [ -z \"$p\" ] && exit 0; kill -9 $p 2>/dev/null; sleep 0.05; done; exit 1");
}

std::vector<std::string> NetnsHosts::Processes(const std::string& host) const {
  std::vector<std::string> lines;
  const std::string ns = Namespace(host);
  if (ns.empty()) return lines;
  const ProgramOutput out = RunCommand("for p in $(ip netns pids " + ns +
                                       "); do tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null; "
                                       "echo; done");
  std::istringstream text(out.text);
  for (std::string line; std::getline(text, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

}  // namespace tower::testing
