// Checks of a command's output paths, made before any work, so a typo costs seconds, not a
// training run. Nothing is created or written by them.
#ifndef TOWER_TOOLS_OUTPUT_PATHS_H_
#define TOWER_TOOLS_OUTPUT_PATHS_H_

#include <string>

#include "util/status.h"

namespace tower {

// `path` (given as --`flag`; "" passes) can be created: its directory exists and is writable.
Status CheckWritable(const std::string& flag, const std::string& path);

// A directory that will be created if needed (--tensorboard): its nearest existing ancestor
// must be a directory this process can write to.
Status CheckCreatableDirectory(const std::string& flag, const std::string& dir);

}  // namespace tower

#endif  // TOWER_TOOLS_OUTPUT_PATHS_H_
