// Several hosts on one machine, for multi-host tests: a Linux network namespace per host,
// joined by veth links to a bridge in a "switch" namespace of their own. Host k is named
// "hostk" (its own UTS namespace; every host's /etc/hosts lists them all) at 10.231.0.k/24,
// an address that exists only inside these namespaces. Open MPI reaches the hosts through
// a launch agent (mpirun's plm_rsh_agent) that runs a command "on" a host with
// `ip netns exec`, and carries MPI between them over TCP only.
//
//   auto hosts = NetnsHosts::Create(3);           // root only
//   RunCommand(hosts->OnFirstHost("mpirun " + hosts->MpirunArgs() + " -H host1,host2 ..."));
//   hosts->CutLink("host3");                      // its switch port down
//
// Teardown is certain: the destructor removes every namespace and kills every process in
// them; a watchdog process does the same if the test process dies first (a crash, a kill,
// a Bazel timeout); and Create removes what an earlier, killed run may have left.
//
// Namespaces are named "tw-<run>-<pid>-sw" and "tw-<run>-<pid>-h<k>": <run> is the test run's
// id (TOWER_TEST_RUN, which .ci/run sets; "local" otherwise) and <pid> the test process's, so
// several runs on one machine, and .ci/leftovers, each judge only their own.
#ifndef TOWER_TESTS_TESTING_NETNS_HOSTS_H_
#define TOWER_TESTS_TESTING_NETNS_HOSTS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/statusor.h"

namespace tower::testing {

class NetnsHosts {
 public:
  // `count` hosts (1–9). FailedPrecondition when not root or when namespaces cannot be made.
  static StatusOr<std::unique_ptr<NetnsHosts>> Create(int count);
  ~NetnsHosts();
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  // "host1", "host2", ...
  const std::vector<std::string>& names() const { return names_; }
  // "10.231.0.k" for "hostk" ("" for no such host): mpirun and OnHost take either.
  std::string Address(const std::string& host) const;
  // A shell command line that runs `command` (itself a shell command line) on `host` (a name
  // or an address).
  std::string OnHost(const std::string& host, const std::string& command) const;
  // mpirun's arguments for these hosts: the launch agent, TCP only (no shared memory, even
  // between workers of one host) on the hosts' network, no binding, oversubscription.
  std::string MpirunArgs() const;
  // From now on, processes started on `host` see the file `replacement` at `path`.
  Status ShowFileOnHost(const std::string& host, const std::string& path,
                        const std::string& replacement);
  // From now on, processes started on `host` read a wall clock `seconds` ahead (behind when
  // negative) of the machine's: libfaketime (Debian's faketime package) preloaded; their
  // monotonic clock is left alone.
  Status SetClockOffset(const std::string& host, int64_t seconds);
  // The host's switch port down (its cable pulled) or up again.
  Status CutLink(const std::string& host);
  Status RestoreLink(const std::string& host);
  // SIGKILLs every process running on the host (its network stays up: sockets to it close).
  Status KillHost(const std::string& host);
  // The command lines of the processes running on `host`.
  std::vector<std::string> Processes(const std::string& host) const;

  // Whether these tests can run here, and if not why (they need root to make namespaces):
  // "" when they can.
  static std::string WhyNot();
  // Namespaces of this harness, of any run, that exist now.
  static std::vector<std::string> AllNamespaces();
  // Those this process made in this run (TOWER_TEST_RUN): for a test's own leftover check.
  static std::vector<std::string> NamespacesOfThisProcess();

 private:
  NetnsHosts() = default;
  std::string Namespace(const std::string& host) const;
  Status Run(const std::string& command) const;
  void WriteAgent() const;

  std::string prefix_;  // "tw-<run>-<pid>-"
  std::string dir_;     // scripts and files
  std::vector<std::string> names_;
  std::vector<std::string> binds_;  // "host source target"
  pid_t watchdog_ = -1;
  int watchdog_pipe_ = -1;  // write end: closing it tells the watchdog to tear down
};

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_NETNS_HOSTS_H_
