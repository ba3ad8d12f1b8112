#include "tests/testing/run_program.h"

#include <sys/wait.h>

#include <array>
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

}  // namespace tower::testing
