#include "data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "util/file.h"

namespace tower::data {

StatusOr<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return StatusFromErrno(errno, path + ": cannot open");
  ScopedFd owned(fd);
  struct stat info;
  if (::fstat(fd, &info) != 0) return StatusFromErrno(errno, path + ": cannot stat");
  if (!S_ISREG(info.st_mode)) {
    return InvalidArgumentError(path + ": not a regular file (give a file, not a directory)");
  }
  const size_t size = static_cast<size_t>(info.st_size);
  if (size == 0) {
    return std::shared_ptr<const MappedFile>(new MappedFile(path, owned.release(), nullptr, 0));
  }
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) return StatusFromErrno(errno, path + ": cannot map");
  return std::shared_ptr<const MappedFile>(
      new MappedFile(path, owned.release(), static_cast<const uint8_t*>(mapping), size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  ::close(fd_);
}

Status MappedFile::ReadAt(uint64_t offset, size_t bytes, void* out) const {
  auto* to = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, to, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return StatusFromErrno(errno, path_ + ": reading at byte " + std::to_string(offset));
    if (n == 0) {
      return DataLossError(path_ + ": the file ends before byte " + std::to_string(offset) +
                           " (it shrank while being read: write it again)");
    }
    to += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return OkStatus();
}

void MappedFile::DropPages(size_t offset, size_t bytes) const {
  if (data_ == nullptr || offset >= size_) return;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // madvise wants a page-aligned start; whole pages inside the range only.
  const size_t begin = (offset + page - 1) / page * page;
  const size_t end = std::min(size_, offset + bytes);
  if (end <= begin) return;
  ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

}  // namespace tower::data
