// TFRecord files: the one place that knows the framing, for the TensorBoard event writer
// (model/tensorboard) and the readers of tf.train.Example files (data/tfrecord_source.h).
// Each record is
//
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   `length` bytes of data        | uint32 masked CRC-32C of those bytes
//
// (util/crc32c.h: the CRC and TFRecord's mask of it). Files are uncompressed (TensorFlow's
// compression_type=""); a GZIP or ZLIB file fails its first length CRC.
#ifndef TOWER_DATA_TFRECORD_H_
#define TOWER_DATA_TFRECORD_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/mapped_file.h"
#include "util/statusor.h"

namespace tower::data {

// Bytes around each record's data: the length and its CRC before, the data's CRC after.
inline constexpr size_t kTfRecordHeaderBytes = 12;
inline constexpr size_t kTfRecordFooterBytes = 4;

// Appends one record holding `data` to `out`.
void AppendTfRecord(std::string_view data, std::string* out);

// A TFRecord file, indexed: 8 bytes per record, no record data held. The indexing pass reads
// through a mapping (MappedFile), letting go of its pages behind it; records are read with
// MappedFile::ReadAt (a pass in order through its read-ahead buffer, others out of the
// mapping).
class TfRecordReader {
 public:
  // Called on each record's data during Open's pass, with its 0-based index: a caller's check
  // of the contents, whose error Open returns (with the file and record added).
  using Visitor = std::function<Status(int64_t record, std::string_view data)>;

  // Maps `path` and walks every record once: each length CRC and data CRC is checked, and a
  // record cut short by the end of the file is an error. Errors are InvalidArgument (NotFound
  // for a missing file) and name the file, the 0-based record and its byte offset:
  //   "train.tfrecord: record 3 (byte 420): the data's CRC-32C does not match ...".
  static StatusOr<std::unique_ptr<TfRecordReader>> Open(const std::string& path,
                                                        const Visitor& visit = nullptr);

  const std::string& path() const { return file_->path(); }
  int64_t num_records() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  // Record `index`'s data, read (MappedFile::ReadAt) into `scratch` (the view points into it), its CRCs
  // checked again (the file may have changed since Open). Safe from several threads with a
  // scratch each.
  StatusOr<std::string_view> Record(int64_t index, std::string* scratch) const;
  // Records [first, first + count) in one read into `scratch`, each checked as Record checks
  // it; `records` gets their data (views into `scratch`).
  Status ReadRecords(int64_t first, int64_t count, std::string* scratch,
                     std::vector<std::string_view>* records) const;
  // "train.tfrecord: record 3", for messages.
  std::string DescribeRecord(int64_t index) const;

 private:
  TfRecordReader() = default;

  std::shared_ptr<const MappedFile> file_;
  // Where each record's header starts, then where the last one ends: record i is
  // [offsets_[i], offsets_[i + 1]).
  std::vector<uint64_t> offsets_;
};

}  // namespace tower::data

#endif  // TOWER_DATA_TFRECORD_H_
