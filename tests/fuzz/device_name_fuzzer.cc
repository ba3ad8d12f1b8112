// Fuzzes DeviceName::Parse (device/device_name.h) with the whole input as the name.
//
// Invariants:
//  - an error is InvalidArgument and says "Malformed device name";
//  - a parsed name prints (ToString) as text that parses back to the same name, and that
//    text is a fixed point of parse-and-print (the canonical form);
//  - every component ToString prints is one the name has, ids and numbers are non-negative,
//    the type is upper case [A-Z_][A-Z0-9_]*, "CPU"/"GPU" whatever the input's case;
//  - a name matches itself, and the empty spec matches it; a full name's spec parts match it;
//  - ShortName() is the trailing "/device:TYPE:ID" of a non-physical name with a device.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "device/device_name.h"
#include "util/check.h"

namespace {

using tower::DeviceName;

bool IsTypeText(const std::string& type) {
  if (type.empty()) return false;
  if (!((type[0] >= 'A' && type[0] <= 'Z') || type[0] == '_')) return false;
  for (char c : type) {
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tower::StatusOr<DeviceName> parsed = DeviceName::Parse(text);
  if (!parsed.ok()) {
    TOWER_CHECK(parsed.status().code() == tower::StatusCode::kInvalidArgument)
        << parsed.status().ToString();
    TOWER_CHECK(parsed.status().message().find("Malformed device name") != std::string::npos)
        << parsed.status().ToString();
    return 0;
  }
  const DeviceName& name = *parsed;
  if (text.empty()) TOWER_CHECK(name == DeviceName());

  // Components are well formed.
  if (name.replica) TOWER_CHECK(*name.replica >= 0);
  if (name.task) TOWER_CHECK(*name.task >= 0);
  if (name.id) TOWER_CHECK(*name.id >= 0);
  TOWER_CHECK(name.type.has_value() == name.id.has_value()) << "type without id or id without type";
  if (name.type) TOWER_CHECK(IsTypeText(*name.type)) << *name.type;
  if (name.physical) {
    TOWER_CHECK(!name.job && !name.replica && !name.task && name.has_device());
  }

  // Canonical text round trip.
  const std::string canonical = name.ToString();
  tower::StatusOr<DeviceName> again = DeviceName::Parse(canonical);
  TOWER_CHECK(again.ok()) << "'" << canonical << "' does not parse: " << again.status().ToString();
  TOWER_CHECK(*again == name) << "'" << text << "' -> '" << canonical << "' -> '"
                              << again->ToString() << "'";
  TOWER_CHECK(again->ToString() == canonical) << canonical;
  if (text.empty()) TOWER_CHECK(canonical.empty());

  // Matching.
  TOWER_CHECK(name.Matches(name)) << canonical;
  if (!name.physical) TOWER_CHECK(DeviceName().Matches(name)) << canonical;
  if (name.is_full()) {
    DeviceName device_only;
    device_only.type = name.type;
    device_only.id = name.id;
    TOWER_CHECK(device_only.Matches(name)) << canonical;
    DeviceName job_only;
    job_only.job = name.job;
    TOWER_CHECK(job_only.Matches(name)) << canonical;
    DeviceName other_task = name;
    *other_task.task += 1;
    TOWER_CHECK(!other_task.Matches(name)) << canonical;
  }
  if (name.has_device() && !name.physical) {
    const std::string short_name = name.ShortName();
    TOWER_CHECK(canonical.size() >= short_name.size() &&
                canonical.compare(canonical.size() - short_name.size(), std::string::npos,
                                  short_name) == 0)
        << canonical << " vs " << short_name;
  }
  return 0;
}
