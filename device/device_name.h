// Device names, as TensorFlow writes them.
//
// Accepted forms (components in this order, each at most once, the leading '/' optional):
//   /job:localhost/replica:0/task:0/device:GPU:1   full name (the canonical form)
//   /device:CPU:0                                  device only
//   /GPU:0, /cpu:0                                 legacy short form; case-insensitive type
//   /job:worker/task:1                             partial spec: any device of that task
//   /physical_device:GPU:0                         a physical device (no job/replica/task)
// A spec leaves out what it does not care about; a full name has every component.
//
// Device types are upper case ("CPU", "GPU", or another [A-Z_][A-Z0-9_]* type, which
// parses but matches no device). Ids and replica/task numbers are non-negative integers.
#ifndef TOWER_DEVICE_DEVICE_NAME_H_
#define TOWER_DEVICE_DEVICE_NAME_H_

#include <optional>
#include <string>
#include <string_view>

#include "util/statusor.h"

namespace tower {

inline constexpr char kDeviceTypeCpu[] = "CPU";
inline constexpr char kDeviceTypeGpu[] = "GPU";
inline constexpr char kLocalJob[] = "localhost";

struct DeviceName {
  std::optional<std::string> job;
  std::optional<int> replica;
  std::optional<int> task;
  std::optional<std::string> type;
  std::optional<int> id;
  bool physical = false;  // "/physical_device:TYPE:ID"

  // Parses any accepted form. An empty string is an empty spec (matches every device).
  // Malformed text is InvalidArgument naming the text and what is wrong with it.
  static StatusOr<DeviceName> Parse(std::string_view text);

  // A fully specified logical device name.
  static DeviceName Full(std::string_view job, int replica, int task, std::string_view type,
                         int id);
  static DeviceName Physical(std::string_view type, int id);

  bool has_device() const { return type.has_value() && id.has_value(); }
  bool is_full() const {
    return !physical && job && replica && task && has_device();
  }

  // Canonical text of the components present: "/job:localhost/replica:0/task:0/device:GPU:1",
  // "/device:GPU:1", "/physical_device:GPU:0", "/job:worker/task:1"; "" for an empty spec.
  std::string ToString() const;
  // "/device:GPU:1" (type and id only); requires has_device().
  std::string ShortName() const;

  // Whether every component this spec sets equals that component of `name`.
  bool Matches(const DeviceName& name) const;

  friend bool operator==(const DeviceName& a, const DeviceName& b) {
    return a.job == b.job && a.replica == b.replica && a.task == b.task && a.type == b.type &&
           a.id == b.id && a.physical == b.physical;
  }
  friend bool operator!=(const DeviceName& a, const DeviceName& b) { return !(a == b); }
};

std::ostream& operator<<(std::ostream& os, const DeviceName& name);

}  // namespace tower

#endif  // TOWER_DEVICE_DEVICE_NAME_H_
