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

constexpr char kDataCrcMismatch[] =
    "the data's CRC-32C does not match (a damaged file: write it again)";
// The indexing pass lets go of the pages behind it every this many bytes.
constexpr uint64_t kDropEvery = uint64_t{8} << 20;

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
  uint64_t offset = 0, dropped = 0;
  while (offset < file.size()) {
    const int64_t index = static_cast<int64_t>(reader->offsets_.size());
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
    const uint8_t* data = header + kTfRecordHeaderBytes;
    if (MaskedCrc32c(data, length) != static_cast<uint32_t>(LoadLittleEndian(data + length, 4))) {
      return InvalidArgumentError(where + kDataCrcMismatch);
    }
    if (visit) {
      const Status visited =
          visit(index, std::string_view(reinterpret_cast<const char*>(data), length));
      if (!visited.ok()) return Status(visited.code(), where + visited.message());
    }
    reader->offsets_.push_back(offset);
    offset += kTfRecordHeaderBytes + length + kTfRecordFooterBytes;
    // The pages behind the pass are not needed any more: resident memory stays at about
    // kDropEvery however large the file.
    if (offset - dropped >= kDropEvery) {
      file.DropPages(dropped, offset - dropped);
      dropped = offset / kDropEvery * kDropEvery;
    }
  }
  file.DropPages(0, file.size());
  reader->offsets_.push_back(offset);  // the end of the last record
  return reader;
}

Status TfRecordReader::ReadRecords(int64_t first, int64_t count, std::string* scratch,
                                   std::vector<std::string_view>* records) const {
  const uint64_t start = offsets_[static_cast<size_t>(first)];
  const size_t bytes = static_cast<size_t>(offsets_[static_cast<size_t>(first + count)] - start);
  scratch->resize(bytes);
  TOWER_RETURN_IF_ERROR(file_->ReadAt(start, bytes, scratch->data()));
  records->clear();
  for (int64_t index = first; index < first + count; ++index) {
    // Checked again: the file may have changed since Open.
    const uint64_t offset = offsets_[static_cast<size_t>(index)];
    const uint64_t length = offsets_[static_cast<size_t>(index) + 1] - offset -
                            kTfRecordHeaderBytes - kTfRecordFooterBytes;
    const auto* record = reinterpret_cast<const uint8_t*>(scratch->data()) + (offset - start);
    const uint8_t* data = record + kTfRecordHeaderBytes;
    if (LoadLittleEndian(record, 8) != length ||
        MaskedCrc32c(record, 8) != static_cast<uint32_t>(LoadLittleEndian(record + 8, 4))) {
      return InvalidArgumentError(DescribeRecord(index) + " (byte " + std::to_string(offset) +
                                  "): the length or its CRC-32C has changed since the file was "
                                  "opened (a file rewritten during training?)");
    }
    if (MaskedCrc32c(data, length) != static_cast<uint32_t>(LoadLittleEndian(data + length, 4))) {
      return InvalidArgumentError(DescribeRecord(index) + " (byte " + std::to_string(offset) +
                                  "): " + kDataCrcMismatch);
    }
    records->emplace_back(reinterpret_cast<const char*>(data), length);
  }
  return OkStatus();
}

StatusOr<std::string_view> TfRecordReader::Record(int64_t index, std::string* scratch) const {
  std::vector<std::string_view> records;
  TOWER_RETURN_IF_ERROR(ReadRecords(index, 1, scratch, &records));
  return records.front();
}

}  // namespace tower::data
