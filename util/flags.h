// Command-line flags: --name=value, or --name alone for a boolean (also --name=true|false).
//
//   int64_t replicas = 1;
//   FlagParser flags("tower train");
//   flags.AddInt("replicas", &replicas, "logical devices to train on");
//   Status status = flags.Parse(argc, argv, &positional);
//
// Every mistake is an InvalidArgument that names the flag and what was expected; nothing
// is half-applied (targets change only when the whole command line parses).
#ifndef TOWER_UTIL_FLAGS_H_
#define TOWER_UTIL_FLAGS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/status.h"

namespace tower {

class FlagParser {
 public:
  explicit FlagParser(std::string program) : program_(std::move(program)) {}

  void AddInt(std::string name, int64_t* target, std::string help);
  void AddDouble(std::string name, double* target, std::string help);
  void AddString(std::string name, std::string* target, std::string help);
  void AddBool(std::string name, bool* target, std::string help);

  // Parses argv[first..argc). Arguments that do not start with "--" go to `positional`
  // (an error if `positional` is null). "--help" sets help_requested().
  Status Parse(int argc, const char* const* argv, int first,
               std::vector<std::string>* positional = nullptr);
  Status Parse(const std::vector<std::string>& args,
               std::vector<std::string>* positional = nullptr);

  bool help_requested() const { return help_requested_; }
  // Whether a flag was given on the command line.
  bool WasSet(const std::string& name) const;
  // "usage: <program> [flags]" and one line per flag with its default.
  std::string Usage() const;

 private:
  struct Flag {
    std::string name;
    std::string type;  // "int", "double", "string", "bool"
    std::string help;
    std::string default_text;
    // Parses the value, and stores it when `apply`; an error names what was expected.
    std::function<Status(const std::string& value, bool apply)> set;
  };
  const Flag* Find(const std::string& name) const;

  std::string program_;
  std::vector<Flag> flags_;
  std::vector<std::string> set_;
  bool help_requested_ = false;
};

}  // namespace tower

#endif  // TOWER_UTIL_FLAGS_H_
