#include "model/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "model/checkpoint/header.h"

// Tensor bytes are little-endian in the file and are copied as they are.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "model/checkpoint assumes a little-endian host");

namespace tower::checkpoint {
namespace {

using internal::ByteSize;
using internal::Entry;
using internal::Header;
using internal::ShapeText;
using internal::TensorLabel;

// The status for a failed system call: the errno text, with a code that says what kind of
// failure it was.
Status ErrnoError(int error, const std::string& what) {
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

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Reads exactly `size` bytes at `offset`.
Status ReadAt(int fd, uint64_t offset, char* data, size_t size, const std::string& where) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, data + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      return ErrnoError(error, where + ": reading");
    }
    if (n == 0) {
      return DataLossError(where + ": truncated while reading: the file ends at byte " +
                           std::to_string(offset + done) + " (was it shrunk meanwhile?)");
    }
    done += static_cast<size_t>(n);
  }
  return OkStatus();
}

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
        return ErrnoError(error, what_);
      }
      if (n == 0) return ErrnoError(EIO, what_);
      done += static_cast<size_t>(n);
    }
    return OkStatus();
  }

  int fd_;
  std::string what_;
  std::string buffer_;
};

// Writes the header and the tensors to `fd`, fsyncs and closes it.
Status WriteContents(ScopedFd fd_owner, const std::string& header, const File& file,
                     const std::string& context, const std::string& temporary) {
  const int fd = fd_owner.get();
  Writer writer(fd, context + ": writing " + temporary);
  TOWER_RETURN_IF_ERROR(writer.Append(header.data(), header.size()));
  for (const TensorData& tensor : file.tensors) {
    TOWER_RETURN_IF_ERROR(writer.Append(tensor.bytes.data(), tensor.bytes.size()));
  }
  TOWER_RETURN_IF_ERROR(writer.Flush());
  if (::fsync(fd) != 0) {
    const int error = errno;
    return ErrnoError(error, context + ": fsync of " + temporary);
  }
  // close() can report a deferred write error (NFS); EINTR still closes on Linux.
  if (::close(fd_owner.release()) != 0) {
    const int error = errno;
    if (error != EINTR) return ErrnoError(error, context + ": closing " + temporary);
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

StatusOr<std::string> Serialize(const File& file) {
  TOWER_ASSIGN_OR_RETURN(std::string out, internal::EncodeHeader(file));
  size_t total = out.size();
  for (const TensorData& tensor : file.tensors) total += tensor.bytes.size();
  out.reserve(total);
  for (const TensorData& tensor : file.tensors) {
    out.append(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
  }
  return out;
}

Status Save(const std::string& path, const File& file) {
  const std::string context = "saving " + path;
  StatusOr<std::string> header = internal::EncodeHeader(file);
  if (!header.ok()) return header.status().WithContext(context);

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
    return ErrnoError(open_error, context + ": cannot create the temporary file " + temporary);
  }
  Status status = WriteContents(ScopedFd(fd), *header, file, context, temporary);
  if (status.ok() && ::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    status = ErrnoError(error, context + ": renaming " + temporary + " over it");
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

StatusOr<File> Load(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not hang (it is rejected below).
  const int raw_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (raw_fd < 0) {
    const int error = errno;
    return ErrnoError(error, path + ": cannot open");
  }
  ScopedFd fd(raw_fd);
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) {
    const int error = errno;
    return ErrnoError(error, path + ": fstat");
  }
  if (S_ISDIR(info.st_mode)) {
    return InvalidArgumentError(path + ": is a directory, not a safetensors file");
  }
  if (!S_ISREG(info.st_mode)) {
    return InvalidArgumentError(path + ": not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(info.st_size);

  char prefix[8] = {};
  const size_t prefix_size = static_cast<size_t>(std::min<uint64_t>(file_size, 8));
  TOWER_RETURN_IF_ERROR(ReadAt(fd.get(), 0, prefix, prefix_size, path));
  TOWER_ASSIGN_OR_RETURN(
      const uint64_t header_length,
      internal::HeaderLength(std::string_view(prefix, prefix_size), file_size, path));
  std::string json(static_cast<size_t>(header_length), '\0');
  TOWER_RETURN_IF_ERROR(ReadAt(fd.get(), 8, json.data(), json.size(), path));
  TOWER_ASSIGN_OR_RETURN(Header header,
                         internal::ParseHeader(json, file_size - 8 - header_length, path));

  // The header's offsets now match the file's real size, so these allocations are bounded
  // by it.
  File file;
  file.metadata = std::move(header.metadata);
  file.tensors.reserve(header.entries.size());
  for (Entry& entry : header.entries) {
    TensorData& tensor = file.tensors.emplace_back(std::move(entry.tensor));
    tensor.bytes.resize(static_cast<size_t>(entry.end - entry.begin));
    TOWER_RETURN_IF_ERROR(ReadAt(fd.get(), 8 + header_length + entry.begin,
                                 reinterpret_cast<char*>(tensor.bytes.data()), tensor.bytes.size(),
                                 path));
  }
  return file;
}

StatusOr<File> Parse(std::string_view bytes, std::string_view source_name) {
  const std::string where(source_name);
  TOWER_ASSIGN_OR_RETURN(const uint64_t header_length,
                         internal::HeaderLength(bytes.substr(0, 8), bytes.size(), where));
  const std::string_view json = bytes.substr(8, static_cast<size_t>(header_length));
  TOWER_ASSIGN_OR_RETURN(Header header,
                         internal::ParseHeader(json, bytes.size() - 8 - header_length, where));
  const std::string_view data = bytes.substr(8 + static_cast<size_t>(header_length));
  File file;
  file.metadata = std::move(header.metadata);
  file.tensors.reserve(header.entries.size());
  for (Entry& entry : header.entries) {
    TensorData& tensor = file.tensors.emplace_back(std::move(entry.tensor));
    const char* begin = data.data() + entry.begin;
    tensor.bytes.assign(begin, begin + (entry.end - entry.begin));
  }
  return file;
}

TensorData FromFloats(std::string name, std::vector<int64_t> shape,
                      const std::vector<float>& values) {
  TensorData tensor;
  tensor.name = std::move(name);
  tensor.dtype = DType::kF32;
  tensor.shape = std::move(shape);
  tensor.bytes.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
  return tensor;
}

StatusOr<std::vector<float>> ToFloats(const TensorData& tensor) {
  const std::string label = TensorLabel(tensor.name);
  if (tensor.dtype != DType::kF32) {
    return InvalidArgumentError(label + " is " + std::string(DTypeName(tensor.dtype)) +
                                ", not F32");
  }
  const std::optional<uint64_t> needed = ByteSize(tensor.shape, sizeof(float));
  if (!needed || *needed != tensor.bytes.size()) {
    return InvalidArgumentError(label + ": " + std::to_string(tensor.bytes.size()) +
                                " bytes of data do not match shape " + ShapeText(tensor.shape) +
                                " of F32");
  }
  std::vector<float> values(tensor.bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), tensor.bytes.data(), tensor.bytes.size());
  return values;
}

}  // namespace tower::checkpoint
