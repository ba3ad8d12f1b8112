#include "util/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace tower {
namespace {

// Writes through a buffer (a checkpoint may hold thousands of small tensors); large blocks
// go straight to the file.
class Writer {
 public:
  Writer(int fd, std::string what) : fd_(fd), what_(std::move(what)) {
    buffer_.reserve(kBufferSize);
  }

  Status Append(const void* data, size_t size) {
    const char* bytes = static_cast<const char*>(data);
    if (buffer_.size() + size <= kBufferSize) {
      buffer_.append(bytes, size);
      return OkStatus();
    }
    TOWER_RETURN_IF_ERROR(Flush());
    if (size >= kBufferSize) return WriteRaw(bytes, size);
    buffer_.append(bytes, size);
    return OkStatus();
  }

  Status Flush() {
    Status status = WriteRaw(buffer_.data(), buffer_.size());
    buffer_.clear();
    return status;
  }

 private:
  static constexpr size_t kBufferSize = 1 << 20;

  Status WriteRaw(const char* data, size_t size) {
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n < 0) {
        const int error = errno;
        if (error == EINTR) continue;
        return StatusFromErrno(error, what_);
      }
      if (n == 0) return StatusFromErrno(EIO, what_);
      done += static_cast<size_t>(n);
    }
    return OkStatus();
  }

  int fd_;
  std::string what_;
  std::string buffer_;
};

// Writes what `write` appends to `fd`, fsyncs and closes it.
Status WriteContents(ScopedFd fd_owner, const std::string& context, const std::string& temporary,
                     const std::function<Status(const AppendBytes&)>& write) {
  const int fd = fd_owner.get();
  Writer writer(fd, context + ": writing " + temporary);
  TOWER_RETURN_IF_ERROR(
      write([&writer](const void* data, size_t size) { return writer.Append(data, size); }));
  TOWER_RETURN_IF_ERROR(writer.Flush());
  if (::fsync(fd) != 0) {
    const int error = errno;
    return StatusFromErrno(error, context + ": fsync of " + temporary);
  }
  // close() can report a deferred write error (NFS); EINTR still closes on Linux.
  if (::close(fd_owner.release()) != 0) {
    const int error = errno;
    if (error != EINTR) return StatusFromErrno(error, context + ": closing " + temporary);
  }
  return OkStatus();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A suffix that two writers of one path are unlikely to share (O_EXCL settles the rest).
std::string RandomSuffix() {
  static std::atomic<uint64_t> counter{0};
  uint64_t x = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
               (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull) ^
               reinterpret_cast<uintptr_t>(&counter);
  // splitmix64's finaliser.
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, x);
  return text;
}

}  // namespace

Status StatusFromErrno(int error, const std::string& what) {
  const std::string message = what + ": " + std::strerror(error);
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case ENOMEM:
      return ResourceExhaustedError(message);
    case EEXIST:
      return AlreadyExistsError(message);
    case EISDIR:
    case ENAMETOOLONG:
    case ELOOP:
    case EINVAL:
      return InvalidArgumentError(message);
    case EIO:
      return UnavailableError(message);
    default:
      return UnknownError(message);
  }
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

Status WriteFileAtomically(const std::string& path, const std::string& context,
                           const std::function<Status(const AppendBytes& append)>& write) {
  // The temporary sits next to `path`, so the rename stays on one file system.
  std::string temporary;
  int fd = -1;
  int open_error = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    temporary = path + ".tmp." + std::to_string(::getpid()) + "." + RandomSuffix();
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    open_error = errno;
    if (fd >= 0 || open_error != EEXIST) break;
  }
  if (fd < 0) {
    return StatusFromErrno(open_error, context + ": cannot create the temporary file " + temporary);
  }
  Status status = WriteContents(ScopedFd(fd), context, temporary, write);
  if (status.ok() && ::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    status = StatusFromErrno(error, context + ": renaming " + temporary + " over it");
  }
  if (!status.ok()) {
    ::unlink(temporary.c_str());
    return Status(status.code(), status.message() + " (the previous file, if any, is unchanged)");
  }
  // Make the rename durable. Best effort: the new file is complete and in place whatever
  // happens here, and some file systems cannot fsync a directory.
  const int dir = ::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return OkStatus();
}

Status MakeDirectories(const std::string& path) {
  if (path.empty()) return InvalidArgumentError("no directory given");
  // Each prefix ending before a '/', then the whole path.
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string part = path.substr(0, end);
    if (mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) {
      return StatusFromErrno(errno, "creating the directory " + part);
    }
    if (end == std::string::npos) break;
  }
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return FailedPreconditionError(path + " exists and is not a directory");
  }
  return OkStatus();
}

}  // namespace tower
