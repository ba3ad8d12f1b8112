// Files on disk: a Status from errno, an owned file descriptor, and replacing a file
// atomically (checkpoints, model files, predictions).
#ifndef TOWER_UTIL_FILE_H_
#define TOWER_UTIL_FILE_H_

#include <cstddef>
#include <functional>
#include <string>
#include <utility>

#include "util/status.h"

namespace tower {

// "<what>: <strerror>", with a code that says what kind of failure it was (NotFound for a
// missing file, PermissionDenied, ResourceExhausted for a full disk, ...).
Status StatusFromErrno(int error, const std::string& what);

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Appends bytes to the file being written (buffered; large blocks go straight through).
using AppendBytes = std::function<Status(const void* data, size_t size)>;

// Creates the directory `path` and any missing parents (mkdir -p); OK when it exists. The
// error names the part that could not be made.
Status MakeDirectories(const std::string& path);

// Replaces `path` with what `write` appends, atomically: a temporary
// "<path>.tmp.<pid>.<random>" in the same directory (so the rename cannot cross file
// systems), fsync, rename over `path`, fsync of the directory. On any failure the temporary
// is removed and `path` is untouched; errors start with `context` and end with "(the previous
// file, if any, is unchanged)". If `path` is a symbolic link, the link itself is replaced.
Status WriteFileAtomically(const std::string& path, const std::string& context,
                           const std::function<Status(const AppendBytes& append)>& write);

}  // namespace tower

#endif  // TOWER_UTIL_FILE_H_
