// MappedFile: a whole file mapped read-only (mmap), under the binary readers (.npy, .npz,
// TFRecord). Pages are read from disk on first touch and, being clean file pages, the kernel
// can drop them again at any time: a reader's resident memory does not grow with the file.
#ifndef TOWER_DATA_MAPPED_FILE_H_
#define TOWER_DATA_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

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
  // Tells the kernel that the pages of [offset, offset + bytes) are not needed for now
  // (madvise MADV_DONTNEED: they leave this process's resident set, and are read again on
  // the next touch). After a pass over the whole file, so that it does not stay resident.
  void DropPages(size_t offset, size_t bytes) const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace tower::data

#endif  // TOWER_DATA_MAPPED_FILE_H_
