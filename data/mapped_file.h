// MappedFile: a whole file mapped read-only (mmap) and kept open, under the binary readers
// (.npy, .npz, TFRecord). The mapping serves what is parsed once (headers, a zip directory,
// the pass that indexes a TFRecord file, its pages dropped behind it), and ReadAt reads rows:
//   - a read that continues the previous one (a pass in order) is copied from a read-ahead
//     buffer that one pread fills with the next kReadAhead bytes, and a read of kReadAhead
//     bytes or more is one pread: mapping the pages of a pass costs more than copying them
//     (a 600 MB file read once in 16 KB pieces, 2026-11-29: pread 3.4 GB/s, memcpy out of a
//     fresh mapping 1.2, the mapping populated ahead with MADV_POPULATE_READ 1.5; pread in
//     1 MiB pieces 4.5; dd 4.9);
//   - any other read (a shuffled row) is copied out of the mapping, no system call: a pread
//     costs ~2 us in this VM, which made a shuffled .npy pass 16 MB/s.
//
// Resident memory does not grow with the file. Every quarter of `resident_window` that reads
// out of the mapping may have mapped (each counts its bytes plus 2 MiB, the largest folio a
// fault maps), the process's mapped-file pages are looked up (/proc/self/statm), and past
// the window this file's pages are dropped from the process (madvise MADV_DONTNEED; they stay
// in the page cache, and the next touch maps them again). The default window is an eighth of
// physical memory (at least 64 MiB), so a file that fits is shuffled at memory speed
// (dropping the pages every 64 MiB made each shuffled row a page fault again: 43 MB/s
// against 550 for a 300 MB .npy, 2026-11-29). The file's size counts against an
// address-space limit (ulimit -v, prlimit --as), not against resident memory.
//
// A file shrunk while mapped, or an I/O error under the mapping, raises SIGBUS on the copy
// that touches it; ReadAt catches it (a SIGBUS handler, installed once, that marks the file
// damaged and maps a page of zeros at the fault so that the copy completes, and passes
// every other SIGBUS on to the handler before it) and returns DataLoss naming the file and
// the offset, as pread's error does; every later read of the file is that error too.
#ifndef TOWER_DATA_MAPPED_FILE_H_
#define TOWER_DATA_MAPPED_FILE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "util/statusor.h"

namespace tower::data {

class MappedFile {
 public:
  static constexpr size_t kReadAhead = size_t{1} << 20;
  // An eighth of physical memory, at least 64 MiB.
  static size_t DefaultResidentWindow();

  // NotFound for a missing file; an empty file maps to no bytes (data() null, size() 0).
  static StatusOr<std::shared_ptr<const MappedFile>> Open(
      const std::string& path, size_t resident_window = DefaultResidentWindow());
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const {
    return std::string_view(reinterpret_cast<const char*>(data_), size_);
  }
  // Copies `bytes` bytes at `offset` into `out`: from the read-ahead buffer when the read
  // continues the last one, else out of the mapping (see above). A range past the end of the
  // file as opened, a file that has shrunk since Open, or an I/O error is DataLoss naming the
  // file and the offset. Safe from several threads at once.
  Status ReadAt(uint64_t offset, size_t bytes, void* out) const;
  // Tells the kernel that the pages of [offset, offset + bytes) are not needed for now
  // (madvise MADV_DONTNEED: they leave this process's resident set, and are read again on
  // the next touch). After a pass over the whole file, so that it does not stay resident.
  void DropPages(size_t offset, size_t bytes) const;

 private:
  MappedFile(std::string path, int fd, const uint8_t* data, size_t size, size_t resident_window)
      : path_(std::move(path)),
        fd_(fd),
        data_(data),
        size_(size),
        resident_window_(resident_window) {}

  // pread of the whole range; a file that ends before it is DataLoss.
  Status Pread(uint64_t offset, size_t bytes, void* out) const;
  // A read in order: copied from the read-ahead buffer, refilled when it does not hold it.
  Status ReadAhead(uint64_t offset, size_t bytes, void* out) const;
  // Counts `bytes` that a read may have mapped; every quarter window of them, drops the
  // mapping's pages if this process's mapped-file pages are past the window.
  void CountResident(size_t bytes) const;

  std::string path_;
  int fd_;
  const uint8_t* data_;
  size_t size_;
  size_t resident_window_;
  // Set when a read out of the mapping met a page the file no longer has.
  mutable std::atomic<bool> damaged_{false};
  // Bytes that reads out of the mapping may have mapped since the resident set was checked.
  mutable std::atomic<size_t> mapped_since_check_{0};
  // Where the last read ended: the next read starting there is a read in order.
  mutable std::atomic<uint64_t> last_end_{0};
  // The read-ahead buffer: bytes [ahead_offset_, ahead_offset_ + ahead_bytes_) of the file.
  mutable std::mutex ahead_mutex_;
  mutable std::unique_ptr<uint8_t[]> ahead_;  // min(kReadAhead, size_) bytes, once needed
  mutable uint64_t ahead_offset_ = 0;
  mutable size_t ahead_bytes_ = 0;
};

}  // namespace tower::data

#endif  // TOWER_DATA_MAPPED_FILE_H_
