// `tower train`'s flag set, for fuzzing its command-line parsing without training.
//
// tools/train_command.h exposes only RunTrainCommand; the flags are declared inside it. But
// `tower train <args> --help` parses the real flag set and stops there (exit 0 and the
// usage, or 2 and the error) before it reads, configures or trains anything. So the fuzzer
// (1) learns the flag set — names, types, defaults, help — from that usage text and builds
// an equal FlagParser whose values it can inspect, and (2) runs the real command with
// `--help` appended on every input, requiring the same verdict and message from both.
// Nothing here is a copy that could drift from tools/train_command.cc.
#ifndef TOWER_TESTS_FUZZ_TRAIN_FLAGS_H_
#define TOWER_TESTS_FUZZ_TRAIN_FLAGS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/flags.h"
#include "util/statusor.h"

namespace tower::fuzz {

struct FlagSpec {
  std::string name;
  enum Kind { kInt, kDouble, kString, kBool } kind;
  std::string help;
  std::string default_text;  // as the usage prints it: 32, 0.5, "mse", false
};

// The flags `tower train --help` lists, in its order.
StatusOr<std::vector<FlagSpec>> TrainFlagSpecs();

// A FlagParser over `specs` with a value slot for each flag, set to its default.
class TrainFlags {
 public:
  explicit TrainFlags(const std::vector<FlagSpec>& specs);
  TrainFlags(const TrainFlags&) = delete;
  TrainFlags& operator=(const TrainFlags&) = delete;

  FlagParser& parser() { return parser_; }
  const std::vector<FlagSpec>& specs() const { return specs_; }
  size_t size() const { return specs_.size(); }
  // Index of the flag `name`, or -1.
  int Find(const std::string& name) const;

  int64_t int_value(size_t i) const { return slots_[i].i; }
  double double_value(size_t i) const { return slots_[i].d; }
  const std::string& string_value(size_t i) const { return slots_[i].s; }
  bool bool_value(size_t i) const { return slots_[i].b; }
  // Flag i's value as --name=<text> would give it back exactly (%.17g for doubles).
  std::string ValueText(size_t i) const;
  // Whether flag i holds the same value here and in `other` (doubles bit for bit).
  bool SameValue(size_t i, const TrainFlags& other) const;

 private:
  struct Slot {
    int64_t i = 0;
    double d = 0;
    std::string s;
    bool b = false;
  };
  std::vector<FlagSpec> specs_;
  std::unique_ptr<Slot[]> slots_;
  FlagParser parser_;
};

// The fuzz input as arguments: one per line ('\n'), at most `max_args`.
std::vector<std::string> SplitArgs(const uint8_t* data, size_t size, size_t max_args = 64);

}  // namespace tower::fuzz

#endif  // TOWER_TESTS_FUZZ_TRAIN_FLAGS_H_
