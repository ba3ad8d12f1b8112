// What the tests of the `tower` command share: scratch paths, running it, reading what it
// wrote (a model file's tensors, `name=value` figures, lines of a CSV).
#ifndef TOWER_TESTS_TESTING_TOWER_CLI_H_
#define TOWER_TESTS_TESTING_TOWER_CLI_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/fit_position.h"
#include "tests/testing/run_program.h"

namespace tower::testing {

// `name` in the test's scratch directory (TEST_TMPDIR).
std::string TempPath(const std::string& name);
// Runs tools/tower (a data dependency of the test) with `args`.
ProgramOutput Tower(const std::string& args);
// The cards (physical GPUs) `tower devices ARGS` lists: the lines of its "Physical devices"
// section (each logical device's line names its card too, so a mere search for the name
// counts those as well).
int CountCards(const std::string& args = "");
// The F32 tensor `name` of a safetensors file; the test dies if it is not there.
std::vector<float> SavedTensor(const std::string& path, const std::string& name);
// ‖a − b‖ / ‖b‖ over the model weights (the tensors named layers.*) of two saved files, taken
// together: NaN when a file cannot be read, when their weights differ in names or sizes, or
// when any value is NaN (so `EXPECT_LE(..., bound)` fails on it).
double SavedWeightsRelativeDifference(const std::string& a_path, const std::string& b_path);
// The number of the line "name=..." in `text` (tower evaluate's output); NaN when missing.
double Figure(const std::string& text, const std::string& name);
// The lines of a file (none if it cannot be read).
std::vector<std::string> ReadLines(const std::string& path);
// A file's bytes (empty if it cannot be read).
std::string ReadBytes(const std::string& path);

// Which version of a file is in place: each backup is a new file renamed over the last
// (the inode alone could be reused at once, so the modification time counts too).
struct FileVersion {
  bool exists = false;
  ino_t inode = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileVersion& other) const {
    return exists == other.exists && inode == other.inode && mtime_ns == other.mtime_ns;
  }
};
FileVersion VersionOf(const std::string& path);
// Where the backup at `path` stands (a failed expectation, and a zero position, if it is
// not whole).
FitPosition BackupPosition(const std::string& path);
// Waits until `run` has written `backups` new versions of `backup`; false if it ended first
// or 120 s passed.
bool WaitForBackups(BackgroundProgram& run, const std::string& backup, int backups);
// Waits until `run` has written `backups` new versions of `backup` (or 120 s pass), waits
// `extra_ms` more, and kills it with `signal`. False when the run ended first.
bool KillAfterBackups(BackgroundProgram& run, const std::string& backup, int backups,
                      int extra_ms, int signal);

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_TOWER_CLI_H_
