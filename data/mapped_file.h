// MappedFile: a whole file mapped read-only (mmap) and kept open, under the binary readers
// (.npy, .npz, TFRecord). The mapping serves what is parsed once (headers, a zip directory,
// the pass that indexes a TFRecord file, its pages dropped behind it); rows are read with
// pread (ReadAt) into the caller's buffer, so that the file's pages stay in the kernel's page
// cache and out of the process's resident set: resident memory does not grow with the file,
// however many rows an epoch touches.
#ifndef TOWER_DATA_MAPPED_FILE_H_
#define TOWER_DATA_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "util/statusor.h"

namespace tower::data {

class MappedFile {
 public:
  // NotFound for a missing file; an empty file maps to no bytes (data() null, size() 0).
  static StatusOr<std::shared_ptr<const MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const {
    return std::string_view(reinterpret_cast<const char*>(data_), size_);
  }
  // Copies `bytes` bytes at `offset` into `out` (pread). An I/O error, or a file that has
  // shrunk since Open, is an error naming the file and the offset.
  Status ReadAt(uint64_t offset, size_t bytes, void* out) const;
  // Tells the kernel that the pages of [offset, offset + bytes) are not needed for now
  // (madvise MADV_DONTNEED: they leave this process's resident set, and are read again on
  // the next touch). After a pass over the whole file, so that it does not stay resident.
  void DropPages(size_t offset, size_t bytes) const;

 private:
  MappedFile(std::string path, int fd, const uint8_t* data, size_t size)
      : path_(std::move(path)), fd_(fd), data_(data), size_(size) {}

  std::string path_;
  int fd_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace tower::data

#endif  // TOWER_DATA_MAPPED_FILE_H_
