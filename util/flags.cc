#include "util/flags.h"

#include <cmath>
#include <sstream>
#include <utility>

#include "util/strings.h"

namespace tower {
namespace {

std::string FormatDouble(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

void FlagParser::AddInt(std::string name, int64_t* target, std::string help) {
  const std::string flag = name;
  flags_.push_back(Flag{std::move(name), "int", std::move(help), std::to_string(*target),
                        [target, flag](const std::string& value, bool apply) -> Status {
                          std::optional<int64_t> parsed = ParseInt64(value);
                          if (!parsed) {
                            return InvalidArgumentError("--" + flag + "='" + value +
                                                        "' is not an integer");
                          }
                          if (apply) *target = *parsed;
                          return OkStatus();
                        }});
}

void FlagParser::AddDouble(std::string name, double* target, std::string help) {
  const std::string flag = name;
  flags_.push_back(Flag{std::move(name), "double", std::move(help), FormatDouble(*target),
                        [target, flag](const std::string& value, bool apply) -> Status {
                          std::optional<double> parsed = ParseDouble(value);
                          if (!parsed || !std::isfinite(*parsed)) {
                            return InvalidArgumentError("--" + flag + "='" + value +
                                                        "' is not a finite number");
                          }
                          if (apply) *target = *parsed;
                          return OkStatus();
                        }});
}

void FlagParser::AddString(std::string name, std::string* target, std::string help) {
  flags_.push_back(Flag{std::move(name), "string", std::move(help), "\"" + *target + "\"",
                        [target](const std::string& value, bool apply) -> Status {
                          if (apply) *target = value;
                          return OkStatus();
                        }});
}

void FlagParser::AddBool(std::string name, bool* target, std::string help) {
  const std::string flag = name;
  flags_.push_back(Flag{std::move(name), "bool", std::move(help), *target ? "true" : "false",
                        [target, flag](const std::string& value, bool apply) -> Status {
                          const std::string lower = ToLower(value);
                          if (lower == "true" || lower == "1") {
                            if (apply) *target = true;
                          } else if (lower == "false" || lower == "0") {
                            if (apply) *target = false;
                          } else {
                            return InvalidArgumentError("--" + flag + "='" + value +
                                                        "' is not true or false");
                          }
                          return OkStatus();
                        }});
}

const FlagParser::Flag* FlagParser::Find(const std::string& name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

bool FlagParser::WasSet(const std::string& name) const {
  for (const std::string& set : set_) {
    if (set == name) return true;
  }
  return false;
}

Status FlagParser::Parse(int argc, const char* const* argv, int first,
                         std::vector<std::string>* positional) {
  std::vector<std::string> args;
  for (int i = first; i < argc; ++i) args.emplace_back(argv[i]);
  return Parse(args, positional);
}

Status FlagParser::Parse(const std::vector<std::string>& args,
                         std::vector<std::string>* positional) {
  std::vector<std::pair<const Flag*, std::string>> assignments;
  std::vector<std::string> names;
  std::vector<std::string> rest;
  for (const std::string& arg : args) {
    if (!StartsWith(arg, "--")) {
      if (positional == nullptr) {
        return InvalidArgumentError(program_ + ": unexpected argument '" + arg +
                                    "'; flags look like --name=value (see --help)");
      }
      rest.push_back(arg);
      continue;
    }
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos
                                                                       : equals - 2);
    if (name == "help" || name == "h") {
      help_requested_ = true;
      continue;
    }
    const Flag* flag = Find(name);
    if (flag == nullptr) {
      return InvalidArgumentError(program_ + ": unknown flag --" + name +
                                  " (run with --help for the list)");
    }
    std::string value;
    if (equals == std::string::npos) {
      if (flag->type != "bool") {
        return InvalidArgumentError(program_ + ": --" + name + " needs a value: --" + name +
                                    "=<" + flag->type + ">");
      }
      value = "true";
    } else {
      value = arg.substr(equals + 1);
    }
    for (const std::string& seen : names) {
      if (seen == name) {
        return InvalidArgumentError(program_ + ": --" + name + " is given more than once");
      }
    }
    names.push_back(name);
    assignments.emplace_back(flag, value);
  }
  // Check every value before writing any: a bad flag leaves all targets untouched.
  for (const auto& [flag, value] : assignments) TOWER_RETURN_IF_ERROR(flag->set(value, false));
  for (const auto& [flag, value] : assignments) TOWER_RETURN_IF_ERROR(flag->set(value, true));
  set_.insert(set_.end(), names.begin(), names.end());
  if (positional != nullptr) positional->insert(positional->end(), rest.begin(), rest.end());
  return OkStatus();
}

std::string FlagParser::Usage() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [flags]\n";
  size_t width = 0;
  for (const Flag& flag : flags_) width = std::max(width, flag.name.size() + flag.type.size());
  for (const Flag& flag : flags_) {
    std::string left = "  --" + flag.name + "=<" + flag.type + ">";
    left.resize(std::max(left.size(), width + 8), ' ');
    out << left << "  " << flag.help << " (default " << flag.default_text << ")\n";
  }
  return out.str();
}

}  // namespace tower
