#include "tests/fuzz/train_flags.h"

#include <cstdio>
#include <cstring>
#include <sstream>

#include "tools/train_command.h"
#include "util/strings.h"

namespace tower::fuzz {

StatusOr<std::vector<FlagSpec>> TrainFlagSpecs() {
  std::ostringstream out, err;
  const int rc = RunTrainCommand({"--help"}, out, err);
  if (rc != 0) return InternalError("tower train --help exited " + std::to_string(rc) + ": " + err.str());
  // "  --global-batch=<int>            rows per step, split across replicas (default 32)"
  std::vector<FlagSpec> specs;
  for (const std::string& line : Split(out.str(), '\n')) {
    if (!StartsWith(line, "  --")) continue;
    const size_t open = line.find("=<");
    const size_t close = line.find('>', open);
    const size_t help_begin = line.find_first_not_of(' ', close + 1);
    const size_t default_at = line.rfind(" (default ");
    if (open == std::string::npos || close == std::string::npos ||
        help_begin == std::string::npos || default_at == std::string::npos ||
        line.back() != ')' || default_at < help_begin) {
      return InternalError("cannot read the usage line '" + line + "'");
    }
    FlagSpec spec;
    spec.name = line.substr(4, open - 4);
    const std::string type = line.substr(open + 2, close - open - 2);
    if (type == "int") {
      spec.kind = FlagSpec::kInt;
    } else if (type == "double") {
      spec.kind = FlagSpec::kDouble;
    } else if (type == "string") {
      spec.kind = FlagSpec::kString;
    } else if (type == "bool") {
      spec.kind = FlagSpec::kBool;
    } else {
      return InternalError("unknown flag type in '" + line + "'");
    }
    spec.help = line.substr(help_begin, default_at - help_begin);
    spec.default_text = line.substr(default_at + 10, line.size() - default_at - 11);
    specs.push_back(std::move(spec));
  }
  if (specs.empty()) return InternalError("tower train --help lists no flags: " + out.str());
  return specs;
}

TrainFlags::TrainFlags(const std::vector<FlagSpec>& specs)
    : specs_(specs), slots_(new Slot[specs.size()]), parser_("tower train") {
  for (size_t i = 0; i < specs_.size(); ++i) {
    const FlagSpec& spec = specs_[i];
    Slot& slot = slots_[i];
    const std::string& text = spec.default_text;
    switch (spec.kind) {
      case FlagSpec::kInt:
        slot.i = ParseInt64(text).value_or(0);
        parser_.AddInt(spec.name, &slot.i, spec.help);
        break;
      case FlagSpec::kDouble:
        slot.d = ParseDouble(text).value_or(0);
        parser_.AddDouble(spec.name, &slot.d, spec.help);
        break;
      case FlagSpec::kString:
        slot.s = text.size() >= 2 ? text.substr(1, text.size() - 2) : text;  // unquoted
        parser_.AddString(spec.name, &slot.s, spec.help);
        break;
      case FlagSpec::kBool:
        slot.b = text == "true";
        parser_.AddBool(spec.name, &slot.b, spec.help);
        break;
    }
  }
}

int TrainFlags::Find(const std::string& name) const {
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string TrainFlags::ValueText(size_t i) const {
  switch (specs_[i].kind) {
    case FlagSpec::kInt:
      return std::to_string(slots_[i].i);
    case FlagSpec::kDouble: {
      char text[64];
      std::snprintf(text, sizeof(text), "%.17g", slots_[i].d);
      return text;
    }
    case FlagSpec::kString:
      return slots_[i].s;
    case FlagSpec::kBool:
      return slots_[i].b ? "true" : "false";
  }
  return "";
}

bool TrainFlags::SameValue(size_t i, const TrainFlags& other) const {
  const Slot& a = slots_[i];
  const Slot& b = other.slots_[i];
  switch (specs_[i].kind) {
    case FlagSpec::kInt:
      return a.i == b.i;
    case FlagSpec::kDouble:
      return std::memcmp(&a.d, &b.d, sizeof(double)) == 0;
    case FlagSpec::kString:
      return a.s == b.s;
    case FlagSpec::kBool:
      return a.b == b.b;
  }
  return false;
}

std::vector<std::string> SplitArgs(const uint8_t* data, size_t size, size_t max_args) {
  std::vector<std::string> args;
  const char* text = reinterpret_cast<const char*>(data);
  size_t start = 0;
  while (start < size && args.size() < max_args) {
    size_t end = start;
    while (end < size && text[end] != '\n') ++end;
    args.emplace_back(text + start, end - start);
    start = end + 1;
  }
  return args;
}

}  // namespace tower::fuzz
