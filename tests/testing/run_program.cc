#include "tests/testing/run_program.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace tower::testing {

std::string Runfile(const std::string& target) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : ".") + "/tower/" + target;
}

ProgramOutput RunProgram(const std::string& target, const std::string& args) {
  return RunCommand(Runfile(target) + " " + args);
}

ProgramOutput RunCommand(const std::string& command_line) {
  const std::string command = "(" + command_line + ") 2>&1";
  ProgramOutput output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.text.append(buffer.data(), n);
  const int status = pclose(pipe);
  output.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

BackgroundProgram::BackgroundProgram(const std::string& target, const std::string& args,
                                     const std::string& log_path)
    : BackgroundProgram(ShellCommand{Runfile(target) + " " + args}, log_path) {}

BackgroundProgram::BackgroundProgram(const ShellCommand& shell, const std::string& log_path) {
  const std::string command = "exec " + shell.line + " > " + log_path + " 2>&1";
  pid_ = fork();
  if (pid_ == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
}

BackgroundProgram::~BackgroundProgram() {
  if (pid_ > 0 && !reaped_) {
    Kill(SIGKILL);
    Wait();
  }
}

bool BackgroundProgram::Running() {
  if (pid_ <= 0 || reaped_) return false;
  if (waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
  return !reaped_;
}

void BackgroundProgram::Kill(int signal) {
  if (pid_ > 0 && !reaped_) kill(pid_, signal);
}

int BackgroundProgram::Wait() {
  if (pid_ <= 0) return -1;
  if (!reaped_) {
    while (waitpid(pid_, &status_, 0) < 0) {
      if (errno != EINTR) return -1;
    }
    reaped_ = true;
  }
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : -WTERMSIG(status_);
}

}  // namespace tower::testing
