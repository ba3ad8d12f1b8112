#include "tools/output_paths.h"

#include <sys/stat.h>
#include <unistd.h>

namespace tower {

Status CheckWritable(const std::string& flag, const std::string& path) {
  if (path.empty()) return OkStatus();
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgumentError("--" + flag + "=" + path + ": the directory " + dir +
                                " does not exist or is not writable");
  }
  return OkStatus();
}

Status CheckCreatableDirectory(const std::string& flag, const std::string& dir) {
  if (dir.empty()) return OkStatus();
  std::string existing = dir;
  struct stat info;
  while (::stat(existing.c_str(), &info) != 0) {
    const size_t slash = existing.find_last_of('/', existing.size() > 1 ? existing.size() - 2 : 0);
    existing = slash == std::string::npos ? "." : slash == 0 ? "/" : existing.substr(0, slash);
  }
  if (!S_ISDIR(info.st_mode) || ::access(existing.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgumentError("--" + flag + "=" + dir + ": " + existing +
                                (S_ISDIR(info.st_mode) ? " is not writable"
                                                       : " is not a directory") +
                                ", so the directory cannot be created there");
  }
  return OkStatus();
}

}  // namespace tower
