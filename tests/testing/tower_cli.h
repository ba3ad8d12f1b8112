// What the tests of the `tower` command share: scratch paths, running it, reading what it
// wrote (a model file's tensors, `name=value` figures, lines of a CSV).
#ifndef TOWER_TESTS_TESTING_TOWER_CLI_H_
#define TOWER_TESTS_TESTING_TOWER_CLI_H_

#include <string>
#include <vector>

#include "tests/testing/run_program.h"

namespace tower::testing {

// `name` in the test's scratch directory (TEST_TMPDIR).
std::string TempPath(const std::string& name);
// Runs tools/tower (a data dependency of the test) with `args`.
ProgramOutput Tower(const std::string& args);
// The F32 tensor `name` of a safetensors file; the test dies if it is not there.
std::vector<float> SavedTensor(const std::string& path, const std::string& name);
// The number of the line "name=..." in `text` (tower evaluate's output); NaN when missing.
double Figure(const std::string& text, const std::string& name);
// The lines of a file (none if it cannot be read).
std::vector<std::string> ReadLines(const std::string& path);

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_TOWER_CLI_H_
