#include "data/tfrecord.h"

#include <cstring>

#include "util/crc32c.h"

namespace tower::data {
namespace {

void AppendLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

uint64_t LoadLittleEndian(const uint8_t* bytes, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i) value |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  return value;
}

}  // namespace

void AppendTfRecord(std::string_view data, std::string* out) {
  const size_t start = out->size();
  AppendLittleEndian(data.size(), 8, out);
  const uint32_t length_crc = MaskedCrc32c(out->data() + start, 8);
  AppendLittleEndian(length_crc, 4, out);
  out->append(data.data(), data.size());
  AppendLittleEndian(MaskedCrc32c(data.data(), data.size()), 4, out);
}

std::string TfRecordReader::DescribeRecord(int64_t index) const {
  return path() + ": record " + std::to_string(index);
}

StatusOr<std::unique_ptr<TfRecordReader>> TfRecordReader::Open(const std::string& path,
                                                               const Visitor& visit) {
  std::unique_ptr<TfRecordReader> reader(new TfRecordReader());
  TOWER_ASSIGN_OR_RETURN(reader->file_, MappedFile::Open(path));
  const MappedFile& file = *reader->file_;
  if (file.size() == 0) {
    return InvalidArgumentError(path + ": the file is empty: no TFRecord records in it");
  }
  uint64_t offset = 0;
  while (offset < file.size()) {
    const int64_t index = reader->num_records();
    const std::string where =
        path + ": record " + std::to_string(index) + " (byte " + std::to_string(offset) + "): ";
    const uint64_t left = file.size() - offset;
    if (left < kTfRecordHeaderBytes) {
      return InvalidArgumentError(where + "truncated: " + std::to_string(left) +
                                  " bytes left, a record header has 12 (the file was cut "
                                  "short; write it again)");
    }
    const uint8_t* header = file.data() + offset;
    const uint64_t length = LoadLittleEndian(header, 8);
    if (MaskedCrc32c(header, 8) != static_cast<uint32_t>(LoadLittleEndian(header + 8, 4))) {
      return InvalidArgumentError(where +
                                  "the length's CRC-32C does not match (not an "
                                  "uncompressed TFRecord file, or a damaged one)");
    }
    if (length > left - kTfRecordHeaderBytes ||
        left - kTfRecordHeaderBytes - length < kTfRecordFooterBytes) {
      return InvalidArgumentError(where + "truncated: the record holds " + std::to_string(length) +
                                  " bytes, the file ends " + std::to_string(left) +
                                  " bytes after its start (the file "
                                  "was cut short; write it again)");
    }
    reader->offsets_.push_back(offset);
    StatusOr<std::string_view> data = reader->Record(index);
    if (!data.ok()) return data.status();
    if (visit) {
      const Status visited = visit(index, *data);
      if (!visited.ok()) return Status(visited.code(), where + visited.message());
    }
    offset += kTfRecordHeaderBytes + length + kTfRecordFooterBytes;
  }
  // The pass touched every page: let them go (they come back when a record is read).
  file.DropPages(0, file.size());
  return reader;
}

StatusOr<std::string_view> TfRecordReader::Record(int64_t index) const {
  const uint64_t offset = offsets_[static_cast<size_t>(index)];
  const uint8_t* header = file_->data() + offset;
  const uint64_t length = LoadLittleEndian(header, 8);
  const uint8_t* data = header + kTfRecordHeaderBytes;
  if (MaskedCrc32c(data, length) != static_cast<uint32_t>(LoadLittleEndian(data + length, 4))) {
    return InvalidArgumentError(DescribeRecord(index) + " (byte " + std::to_string(offset) +
                                "): the data's CRC-32C does not match (a damaged file: write "
                                "it again)");
  }
  return std::string_view(reinterpret_cast<const char*>(data), length);
}

}  // namespace tower::data
