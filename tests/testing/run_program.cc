#include "tests/testing/run_program.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>

namespace tower::testing {

ProgramOutput RunProgram(const std::string& target, const std::string& args) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string binary = std::string(srcdir ? srcdir : ".") + "/tower/" + target;
  const std::string command = binary + " " + args + " 2>&1";
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
