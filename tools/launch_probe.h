// `tower launch`'s child processes: starting one in a process group of its own (ending the
// group ends what it started too), and probing hosts by running a short command on each, all
// at once, each within a deadline.
#ifndef TOWER_TOOLS_LAUNCH_PROBE_H_
#define TOWER_TOOLS_LAUNCH_PROBE_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tower {

// Forks and runs argv in a process group of its own (so that ending the group ends whatever
// it started here too), its stdout and stderr into fds[1], which is closed here. The child's
// pid, or -1 (errno set) when fork failed.
pid_t StartInItsOwnGroup(const std::vector<std::string>& argv, const int fds[2]);

// What one probe found: `why` is "" when the command exited 0 within the deadline (after
// `seconds`), else why not ("no answer within 5 s", "mpirun exited 1: <its last line>").
struct ProbeResult {
  std::string why;
  double seconds = 0;
};

// Runs every command of `argvs` at once, each in its own process group, and waits for each
// up to `timeout` from the start; a command still running then is ended (SIGTERM to its
// group, SIGKILL 2 s later). Only the exit status counts: a process a command left behind
// may hold its output open. One result per command, in order.
std::vector<ProbeResult> ProbeAll(const std::vector<std::vector<std::string>>& argvs,
                                  std::chrono::milliseconds timeout);

}  // namespace tower

#endif  // TOWER_TOOLS_LAUNCH_PROBE_H_
