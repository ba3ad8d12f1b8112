// `tower devices`: the platforms, physical devices and logical devices this process sees,
// after applying the device flags (device/device_flags.h). --json for scripts.
#ifndef TOWER_TOOLS_DEVICES_COMMAND_H_
#define TOWER_TOOLS_DEVICES_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "device/context.h"

namespace tower {

// Returns the process exit code: 0 listed, 1 the devices could not be initialised,
// 2 bad flags. Output goes to `out`, errors (one line each) to `err`.
int RunDevicesCommand(const std::vector<std::string>& args, Context& context,
                      std::ostream& out, std::ostream& err);

}  // namespace tower

#endif  // TOWER_TOOLS_DEVICES_COMMAND_H_
