// Runs a program built by Bazel (a data dependency of the test) and captures its output.
#ifndef TOWER_TESTS_TESTING_RUN_PROGRAM_H_
#define TOWER_TESTS_TESTING_RUN_PROGRAM_H_

#include <string>

namespace tower::testing {

struct ProgramOutput {
  int exit_code = -1;  // -1: killed by a signal
  std::string text;    // stdout and stderr, interleaved
};

// `target` is the program's path in the workspace ("tools/tower"); `args` a shell-quoted
// argument string. The environment is the test's own.
ProgramOutput RunProgram(const std::string& target, const std::string& args);
// Any shell command line (stderr joined to stdout).
ProgramOutput RunCommand(const std::string& command);
// The absolute path of a runfile ("tools/tower").
std::string Runfile(const std::string& target);

// A program running in the background (its output to `log_path`), to be killed mid-run by
// fault tests. The destructor kills and reaps it if it is still running.
class BackgroundProgram {
 public:
  BackgroundProgram(const std::string& target, const std::string& args,
                    const std::string& log_path);
  // Any shell command line instead of a runfile (mpirun ...).
  struct ShellCommand {
    std::string line;
  };
  BackgroundProgram(const ShellCommand& command, const std::string& log_path);
  ~BackgroundProgram();
  BackgroundProgram(const BackgroundProgram&) = delete;
  BackgroundProgram& operator=(const BackgroundProgram&) = delete;

  bool started() const { return pid_ > 0; }
  // Whether it is still running (reaps it if it has ended).
  bool Running();
  void Kill(int signal);
  // Waits for it; the exit code, or -signal when a signal ended it.
  int Wait();

 private:
  int pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
};

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_RUN_PROGRAM_H_
