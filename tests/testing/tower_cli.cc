#include "tests/testing/tower_cli.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "model/checkpoint/safetensors.h"
#include "util/check.h"

namespace tower::testing {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

ProgramOutput Tower(const std::string& args) { return RunProgram("tools/tower", args); }

std::vector<float> SavedTensor(const std::string& path, const std::string& name) {
  StatusOr<checkpoint::File> file = checkpoint::Load(path);
  TOWER_CHECK_OK(file.status());
  const checkpoint::TensorData* tensor = file->Find(name);
  TOWER_CHECK(tensor != nullptr) << path << " has no tensor " << name;
  return *checkpoint::ToFloats(*tensor);
}

double Figure(const std::string& text, const std::string& name) {
  const size_t at = ("\n" + text).find("\n" + name + "=");
  return at == std::string::npos ? NAN : std::atof(text.c_str() + at + name.size() + 1);
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace tower::testing
