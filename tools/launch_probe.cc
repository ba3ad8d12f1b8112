#include "tools/launch_probe.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "util/strings.h"

namespace tower {
namespace {

using Clock = std::chrono::steady_clock;

// One running probe.
struct Probe {
  pid_t pid = -1;
  int fd = -1;         // the read end of its output, -1 once closed
  std::string output;  // its last 4 KiB
  bool exited = false;
  int status = 0;
  double seconds = 0;  // when it exited, from the start
};

Probe Start(const std::vector<std::string>& argv) {
  Probe probe;
  int fds[2];
  if (pipe(fds) != 0) {
    probe.exited = true;
    probe.output = std::string("pipe: ") + std::strerror(errno);
    return probe;
  }
  probe.pid = StartInItsOwnGroup(argv, fds);
  probe.fd = fds[0];
  if (probe.pid < 0) {
    probe.exited = true;
    probe.output = std::string("fork: ") + std::strerror(errno);
    close(probe.fd);
    probe.fd = -1;
  }
  return probe;
}

// Reads what the probes printed, waiting up to 50 ms: none may block on a full pipe.
void ReadOutputs(std::vector<Probe>* probes) {
  std::vector<pollfd> fds;
  std::vector<Probe*> owners;
  for (Probe& probe : *probes) {
    if (probe.fd < 0) continue;
    fds.push_back({probe.fd, POLLIN, 0});
    owners.push_back(&probe);
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return;
  }
  if (poll(fds.data(), fds.size(), 50) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    Probe& probe = *owners[i];
    char buffer[4096];
    const ssize_t n = read(probe.fd, buffer, sizeof(buffer));
    if (n > 0) {
      probe.output.append(buffer, static_cast<size_t>(n));
      if (probe.output.size() > 4096) probe.output.erase(0, probe.output.size() - 4096);
    } else if (!(n < 0 && errno == EINTR)) {
      close(probe.fd);
      probe.fd = -1;
    }
  }
}

std::string LastLine(const std::string& text) {
  std::string last;
  for (const std::string& line : Split(text, '\n')) {
    if (!line.empty()) last = line;
  }
  return last;
}

}  // namespace

// Forks and runs argv in a process group of its own (so that ending the group ends whatever
// it started here too), its stdout and stderr into fds[1], which is closed here. The child's
// pid, or -1 (errno set) when fork failed.
pid_t StartInItsOwnGroup(const std::vector<std::string>& argv, const int fds[2]) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execvp(args[0], args.data());
    std::fprintf(stderr, "error: tower launch: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  const int fork_errno = errno;
  if (pid > 0) setpgid(pid, pid);
  close(fds[1]);
  errno = fork_errno;
  return pid;
}

std::vector<ProbeResult> ProbeAll(const std::vector<std::vector<std::string>>& argvs,
                                  std::chrono::milliseconds timeout) {
  const auto begin = Clock::now();
  std::vector<Probe> probes;
  for (const std::vector<std::string>& argv : argvs) probes.push_back(Start(argv));
  auto running = [&] {
    return std::any_of(probes.begin(), probes.end(), [](const Probe& p) { return !p.exited; });
  };
  while (running() && Clock::now() - begin < timeout) {
    ReadOutputs(&probes);
    for (Probe& probe : probes) {
      if (!probe.exited && waitpid(probe.pid, &probe.status, WNOHANG) == probe.pid) {
        probe.exited = true;
        probe.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
      }
    }
  }
  std::vector<ProbeResult> results(probes.size());
  for (size_t i = 0; i < probes.size(); ++i) {
    Probe& probe = probes[i];
    ProbeResult& result = results[i];
    if (probe.fd >= 0) close(probe.fd);
    if (probe.pid < 0) {
      result.why = "cannot run " + argvs[i][0] + ": " + probe.output;
    } else if (!probe.exited) {
      kill(-probe.pid, SIGTERM);
      for (int wait = 0; waitpid(probe.pid, &probe.status, WNOHANG) != probe.pid; ++wait) {
        if (wait == 20) {
          kill(-probe.pid, SIGKILL);
          waitpid(probe.pid, &probe.status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      std::ostringstream why;
      why << "no answer within " << timeout.count() / 1000.0 << " s";
      result.why = why.str();
    } else if (!WIFEXITED(probe.status) || WEXITSTATUS(probe.status) != 0) {
      const std::string last = LastLine(probe.output);
      result.why = argvs[i][0].substr(argvs[i][0].rfind('/') + 1) + " exited " +
                   std::to_string(WIFEXITED(probe.status) ? WEXITSTATUS(probe.status)
                                                          : -WTERMSIG(probe.status)) +
                   (last.empty() ? "" : ": " + last);
    } else {
      result.seconds = probe.seconds;
    }
  }
  return results;
}

}  // namespace tower
