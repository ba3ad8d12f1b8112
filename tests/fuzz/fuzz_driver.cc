// A main() for fuzz targets built without libFuzzer: runs LLVMFuzzerTestOneInput once on
// every file named on the command line, and on every file inside each directory named
// (recursively, in name order). This is how `bazel test //...` replays the checked-in
// corpora as regression tests; under --config=fuzz the same targets link libFuzzer instead.
//
//   csv_fuzzer tests/fuzz/corpus/csv            # replay a corpus
//   csv_fuzzer crash-0123abcd                   # replay one input
//
// An invariant a target checks aborts the process (TOWER_CHECK), naming the input first.
// Exits 1 when the arguments name no input at all, so an empty or missing corpus fails.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;

void Collect(const fs::path& path, std::vector<fs::path>* files) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    std::vector<fs::path> inside;
    for (const fs::directory_entry& entry :
         fs::recursive_directory_iterator(path, fs::directory_options::follow_directory_symlink)) {
      if (!entry.is_directory()) inside.push_back(entry.path());
    }
    std::sort(inside.begin(), inside.end());
    files->insert(files->end(), inside.begin(), inside.end());
  } else {
    files->push_back(path);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.size() > 1 && arg[0] == '-') continue;  // libFuzzer flags (-runs=N, ...): ignored
    Collect(arg, &files);
  }
  if (files.empty()) {
    std::fprintf(stderr, "fuzz_driver: no inputs; usage: %s <corpus dir or file>...\n", argv[0]);
    return 1;
  }
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "fuzz_driver: cannot read %s\n", file.c_str());
      return 1;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Named before it runs, so a failed invariant's abort is attributed to its input.
    std::fprintf(stderr, "fuzz_driver: %s (%zu bytes)\n", file.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::fprintf(stderr, "fuzz_driver: %zu inputs passed\n", files.size());
  return 0;
}
