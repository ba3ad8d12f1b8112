#include "tests/testing/tower_cli.h"

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include <gtest/gtest.h>

#include "model/checkpoint/safetensors.h"
#include "util/check.h"

namespace tower::testing {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

ProgramOutput Tower(const std::string& args) { return RunProgram("tools/tower", args); }

int CountCards(const std::string& args) {
  const ProgramOutput devices = Tower("devices " + args);
  const std::string line_start = "\n  /physical_device:GPU:";
  int count = 0;
  for (size_t at = devices.text.find(line_start); at != std::string::npos;
       at = devices.text.find(line_start, at + 1)) {
    ++count;
  }
  return count;
}

std::vector<float> SavedTensor(const std::string& path, const std::string& name) {
  StatusOr<checkpoint::File> file = checkpoint::Load(path);
  TOWER_CHECK_OK(file.status());
  const checkpoint::TensorData* tensor = file->Find(name);
  TOWER_CHECK(tensor != nullptr) << path << " has no tensor " << name;
  return *checkpoint::ToFloats(*tensor);
}

double SavedWeightsRelativeDifference(const std::string& a_path, const std::string& b_path) {
  StatusOr<checkpoint::File> a_file = checkpoint::Load(a_path);
  StatusOr<checkpoint::File> b_file = checkpoint::Load(b_path);
  if (!a_file.ok() || !b_file.ok()) return std::nan("");
  double num = 0, den = 0;
  size_t weights = 0;
  for (const checkpoint::TensorData& a_tensor : a_file->tensors) {
    if (a_tensor.name.rfind("layers.", 0) != 0) continue;
    ++weights;
    const checkpoint::TensorData* b_tensor = b_file->Find(a_tensor.name);
    if (b_tensor == nullptr) return std::nan("");
    const std::vector<float> a = *checkpoint::ToFloats(a_tensor);
    const std::vector<float> b = *checkpoint::ToFloats(*b_tensor);
    if (a.size() != b.size()) return std::nan("");
    for (size_t i = 0; i < a.size(); ++i) {
      num += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
      den += double{b[i]} * b[i];
    }
  }
  size_t b_weights = 0;
  for (const checkpoint::TensorData& b_tensor : b_file->tensors) {
    b_weights += b_tensor.name.rfind("layers.", 0) == 0 ? 1 : 0;
  }
  if (weights == 0 || weights != b_weights) return std::nan("");
  return std::sqrt(num / den);
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

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

FileVersion VersionOf(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return {};
  return {true, info.st_ino,
          static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec};
}

FitPosition BackupPosition(const std::string& path) {
  StatusOr<checkpoint::File> file = checkpoint::Load(path);
  EXPECT_TRUE(file.ok()) << "a backup must always be whole: " << file.status();
  if (!file.ok()) return {};
  StatusOr<FitPosition> position = FitPositionFromMetadata(file->metadata, path);
  EXPECT_TRUE(position.ok()) << position.status();
  return position.ok() ? *position : FitPosition{};
}

bool WaitForBackups(BackgroundProgram& run, const std::string& backup, int backups) {
  FileVersion last;
  int seen = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (seen < backups && run.Running() && std::chrono::steady_clock::now() < deadline) {
    const FileVersion now = VersionOf(backup);
    if (now.exists && !(now == last)) {
      last = now;
      ++seen;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return seen == backups;
}

bool KillAfterBackups(BackgroundProgram& run, const std::string& backup, int backups,
                      int extra_ms, int signal) {
  WaitForBackups(run, backup, backups);
  std::this_thread::sleep_for(std::chrono::milliseconds(extra_ms));
  if (!run.Running()) return false;
  run.Kill(signal);
  return true;
}

}  // namespace tower::testing
