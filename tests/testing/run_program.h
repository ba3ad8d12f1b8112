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

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_RUN_PROGRAM_H_
