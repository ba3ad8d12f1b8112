#include "device/device_name.h"

#include <ostream>
#include <vector>

#include "util/strings.h"

namespace tower {
namespace {

constexpr char kExpectedForms[] =
    "expected a name such as /device:GPU:0, /GPU:0, /cpu:0, "
    "/job:localhost/replica:0/task:0/device:GPU:1 or /physical_device:GPU:0";

Status Malformed(std::string_view text, std::string_view why) {
  std::string message = "Malformed device name '";
  message.append(text.data(), text.size());
  message += "': ";
  message.append(why.data(), why.size());
  message += "; ";
  message += kExpectedForms;
  return InvalidArgumentError(message);
}

// Ids, replica and task numbers: decimal digits only, no sign, fits an int.
std::optional<int> ParseIndex(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  if (text.size() > 1 && text[0] == '0') return std::nullopt;  // "00" is not an id
  return static_cast<int>(*ParseInt64(text));
}

bool IsJobName(std::string_view text) {
  if (text.empty()) return false;
  if (!(text[0] >= 'a' && text[0] <= 'z')) return false;
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

// "CPU"/"cpu"/"Gpu" are normalised to upper case; other types must already be upper case.
std::optional<std::string> ParseType(std::string_view text) {
  const std::string upper = ToUpper(text);
  if (upper == kDeviceTypeCpu || upper == kDeviceTypeGpu) return upper;
  if (text.empty() || !((text[0] >= 'A' && text[0] <= 'Z') || text[0] == '_')) {
    return std::nullopt;
  }
  for (char c : text) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return std::nullopt;
  }
  return std::string(text);
}

// Parses "TYPE:ID" (the part after "device:" or "physical_device:", or a legacy "gpu:0").
Status ParseTypeAndId(std::string_view whole, std::string_view part, DeviceName* name) {
  const size_t colon = part.find(':');
  if (colon == std::string_view::npos) {
    return Malformed(whole, "'" + std::string(part) + "' has no ':ID' after the device type");
  }
  const std::string_view type_text = part.substr(0, colon);
  const std::string_view id_text = part.substr(colon + 1);
  std::optional<std::string> type = ParseType(type_text);
  if (!type) {
    return Malformed(whole, "'" + std::string(type_text) + "' is not a device type");
  }
  std::optional<int> id = ParseIndex(id_text);
  if (!id) {
    return Malformed(whole,
                     "device id '" + std::string(id_text) + "' is not a non-negative integer");
  }
  name->type = std::move(type);
  name->id = id;
  return OkStatus();
}

}  // namespace

StatusOr<DeviceName> DeviceName::Parse(std::string_view text) {
  DeviceName name;
  if (text.empty()) return name;
  std::string_view rest = text;
  if (rest.front() == '/') rest.remove_prefix(1);
  if (rest.empty()) return Malformed(text, "it has no components");

  // Components must come in this order, each at most once.
  enum Stage { kStart, kJob, kReplica, kTask, kDevice };
  Stage stage = kStart;
  for (const std::string& part : Split(rest, '/')) {
    if (part.empty()) return Malformed(text, "it has an empty component ('//' or a trailing '/')");
    if (stage == kDevice) {
      return Malformed(text, "'" + part + "' follows the device component");
    }
    const size_t colon = part.find(':');
    const std::string key = colon == std::string::npos ? part : part.substr(0, colon);
    const std::string value = colon == std::string::npos ? "" : part.substr(colon + 1);
    if (key == "job") {
      if (stage >= kJob) return Malformed(text, "'job' is out of order or repeated");
      if (!IsJobName(value)) {
        return Malformed(text, "job name '" + value + "' is not [a-z][a-z0-9_]*");
      }
      name.job = value;
      stage = kJob;
    } else if (key == "replica" || key == "task") {
      const Stage this_stage = key == "replica" ? kReplica : kTask;
      if (stage >= this_stage) return Malformed(text, "'" + key + "' is out of order or repeated");
      std::optional<int> index = ParseIndex(value);
      if (!index) {
        return Malformed(text, key + " '" + value + "' is not a non-negative integer");
      }
      (key == "replica" ? name.replica : name.task) = index;
      stage = this_stage;
    } else if (key == "device" || key == "physical_device") {
      if (key == "physical_device" && stage != kStart) {
        return Malformed(text, "a physical device name has no job, replica or task");
      }
      TOWER_RETURN_IF_ERROR(ParseTypeAndId(text, value, &name));
      name.physical = key == "physical_device";
      stage = kDevice;
    } else if (colon != std::string::npos && ParseType(key)) {
      // Legacy "/gpu:0", "/CPU:0".
      TOWER_RETURN_IF_ERROR(ParseTypeAndId(text, part, &name));
      stage = kDevice;
    } else {
      return Malformed(text, "unknown component '" + part + "'");
    }
  }
  return name;
}

DeviceName DeviceName::Full(std::string_view job, int replica, int task, std::string_view type,
                            int id) {
  DeviceName name;
  name.job = std::string(job);
  name.replica = replica;
  name.task = task;
  name.type = std::string(type);
  name.id = id;
  return name;
}

DeviceName DeviceName::Physical(std::string_view type, int id) {
  DeviceName name;
  name.type = std::string(type);
  name.id = id;
  name.physical = true;
  return name;
}

std::string DeviceName::ToString() const {
  std::string out;
  if (physical) {
    out = "/physical_device:" + type.value_or("?") + ":" + (id ? std::to_string(*id) : "?");
    return out;
  }
  if (job) out += "/job:" + *job;
  if (replica) out += "/replica:" + std::to_string(*replica);
  if (task) out += "/task:" + std::to_string(*task);
  if (has_device()) out += ShortName();
  return out;
}

std::string DeviceName::ShortName() const {
  TOWER_CHECK(has_device()) << "ShortName() of a name without device: " << ToString();
  return "/device:" + *type + ":" + std::to_string(*id);
}

bool DeviceName::Matches(const DeviceName& name) const {
  if (physical != name.physical) return false;
  if (job && job != name.job) return false;
  if (replica && replica != name.replica) return false;
  if (task && task != name.task) return false;
  if (type && type != name.type) return false;
  if (id && id != name.id) return false;
  return true;
}

std::ostream& operator<<(std::ostream& os, const DeviceName& name) {
  return os << name.ToString();
}

}  // namespace tower
