// Fuzzes the TFRecord framing (data/tfrecord.h) and, over the files it accepts, the
// tf.train.Example source (data/tfrecord_source.h). The file is an in-memory one (memfd),
// opened by its /proc/self/fd path, as TfRecordReader::Open takes a path.
//
// The first input byte picks the mode:
//  - even: the rest of the input is the file, as is;
//  - odd: the rest is [damage, record, byte, then records, each a length byte and up to that
//    many bytes]; the file is those records framed by AppendTfRecord (valid CRCs, which blind
//    mutation rarely gets right), then damaged as the damage byte says (bits 0-2, modulo 6):
//    nothing, the file cut short, or a bit (bits 3-5) flipped in the data (its CRC if it has
//    none), the length, the length's CRC or the data's CRC; of the record and byte (modulo
//    the records, the part's bytes) the next two bytes pick.
//
// Invariants:
//  - an error is InvalidArgument, one line, starting with the path, and for a record's damage
//    "<path>: record <k> (byte <offset>): " naming the damaged record;
//  - an accepted file's records, framed again with AppendTfRecord, are the file, byte for
//    byte; Record and ReadRecords read them back the same; a framed (undamaged) file is
//    accepted with the records it was made of;
//  - after a flipped bit in a record of an opened file, Record and ReadRecords of it fail,
//    naming that record (the file changed since Open);
//  - over an accepted file, TfRecordSource with target 'y' either fails naming the file, or
//    has a row per record, whose targets are the record's 'y' values bit for bit, and reads
//    the same rows all at once and one by one.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/example_proto.h"
#include "data/tfrecord.h"
#include "data/tfrecord_source.h"
#include "util/check.h"

namespace {

using tower::data::TfRecordReader;

// The memfd holding the file, and its path.
struct File {
  int fd = -1;
  std::string path;
};

const File& TheFile() {
  static const File* file = [] {
    auto* f = new File;
    f->fd = memfd_create("fuzz.tfrecord", 0);
    TOWER_CHECK(f->fd >= 0) << "memfd_create";
    f->path = "/proc/self/fd/" + std::to_string(f->fd);
    return f;
  }();
  return *file;
}

void Write(const std::string& bytes) {
  const File& file = TheFile();
  TOWER_CHECK(ftruncate(file.fd, 0) == 0);
  TOWER_CHECK(pwrite(file.fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
}

void FlipBit(uint64_t offset, int bit) {
  const File& file = TheFile();
  char byte = 0;
  TOWER_CHECK(pread(file.fd, &byte, 1, static_cast<off_t>(offset)) == 1);
  byte = static_cast<char>(byte ^ (1 << bit));
  TOWER_CHECK(pwrite(file.fd, &byte, 1, static_cast<off_t>(offset)) == 1);
}

void CheckError(const tower::Status& status, const std::string& prefix) {
  TOWER_CHECK(!status.ok()) << "accepted; want an error starting '" << prefix << "'";
  TOWER_CHECK(status.code() == tower::StatusCode::kInvalidArgument) << status.ToString();
  TOWER_CHECK(status.message().rfind(prefix, 0) == 0)
      << status.ToString() << "\n  does not start with '" << prefix << "'";
  TOWER_CHECK(status.message().find('\n') == std::string::npos) << status.ToString();
}

std::string RecordPrefix(int64_t record, uint64_t offset) {
  return TheFile().path + ": record " + std::to_string(record) + " (byte " +
         std::to_string(offset) + "): ";
}

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// The values of the last feature 'y' of `example` as floats; false if there is none.
bool TargetOf(std::string_view example, std::vector<float>* values) {
  bool found = false;
  tower::data::FeatureList list;
  TOWER_CHECK_OK(tower::data::ForEachFeature(
      example, [&](std::string_view name, std::string_view feature) -> tower::Status {
        if (name != "y") return tower::OkStatus();
        TOWER_RETURN_IF_ERROR(tower::data::DecodeFeature(feature, &list));
        values->clear();
        for (float v : list.floats) values->push_back(v);
        for (int64_t v : list.int64s) values->push_back(static_cast<float>(v));
        found = true;
        return tower::OkStatus();
      }));
  return found;
}

// TfRecordSource over the (accepted) file whose records are `records`.
void CheckSource(const std::vector<std::string>& records) {
  tower::data::TfRecordOptions options;
  options.target_features = {"y"};
  auto source = tower::data::TfRecordSource::Open({TheFile().path}, options);
  if (!source.ok()) {
    CheckError(source.status(), TheFile().path + ": ");
    return;
  }
  const auto& s = **source;
  const int64_t rows = s.num_rows();
  TOWER_CHECK(rows == static_cast<int64_t>(records.size()));
  TOWER_CHECK(s.feature_dim() >= 1 && s.target_dim() >= 1);
  std::vector<int64_t> all(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) all[static_cast<size_t>(r)] = r;
  std::vector<float> features(static_cast<size_t>(rows * s.feature_dim()));
  std::vector<float> targets(static_cast<size_t>(rows * s.target_dim()));
  TOWER_CHECK_OK(s.Read(all.data(), rows, features.data(), targets.data()));
  std::vector<float> row_features(static_cast<size_t>(s.feature_dim()));
  std::vector<float> row_targets(static_cast<size_t>(s.target_dim()));
  std::vector<float> want;
  for (int64_t r = rows - 1; r >= 0; --r) {
    TOWER_CHECK_OK(s.Read(&r, 1, row_features.data(), row_targets.data()));
    TOWER_CHECK(std::memcmp(row_features.data(), &features[r * s.feature_dim()],
                            row_features.size() * sizeof(float)) == 0)
        << "row " << r << " reads differently alone";
    TOWER_CHECK(std::memcmp(row_targets.data(), &targets[r * s.target_dim()],
                            row_targets.size() * sizeof(float)) == 0)
        << "row " << r << "'s targets read differently alone";
    TOWER_CHECK(TargetOf(records[static_cast<size_t>(r)], &want)) << "row " << r << ": no 'y'";
    TOWER_CHECK(static_cast<int64_t>(want.size()) == s.target_dim());
    for (size_t i = 0; i < want.size(); ++i) {
      TOWER_CHECK(Bits(want[i]) == Bits(row_targets[i])) << "row " << r << ": y[" << i << "]";
    }
  }
}

// Opens the file (holding `bytes`); on success checks the records against `bytes` and
// returns them in `records`.
tower::Status OpenAndCheck(const std::string& bytes, std::vector<std::string>* records) {
  records->clear();
  auto reader = TfRecordReader::Open(TheFile().path, [&](int64_t index, std::string_view data) {
    TOWER_CHECK(index == static_cast<int64_t>(records->size()));
    records->emplace_back(data);
    return tower::OkStatus();
  });
  if (!reader.ok()) return reader.status();
  const int64_t n = (*reader)->num_records();
  TOWER_CHECK(n == static_cast<int64_t>(records->size()) && n >= 1);
  std::string framed;
  for (const std::string& record : *records) tower::data::AppendTfRecord(record, &framed);
  TOWER_CHECK(framed == bytes) << "the records framed again are not the file";
  std::string scratch;
  std::vector<std::string_view> read;
  TOWER_CHECK_OK((*reader)->ReadRecords(0, n, &scratch, &read));
  TOWER_CHECK(static_cast<int64_t>(read.size()) == n);
  for (int64_t i = 0; i < n; ++i) {
    TOWER_CHECK(read[static_cast<size_t>(i)] == (*records)[static_cast<size_t>(i)]);
    auto one = (*reader)->Record(i, &scratch);
    TOWER_CHECK_OK(one.status());
    TOWER_CHECK(*one == (*records)[static_cast<size_t>(i)]) << "Record(" << i << ")";
  }
  return tower::OkStatus();
}

// Where record i starts in a file of `records`, and where the last one ends.
std::vector<uint64_t> Offsets(const std::vector<std::string>& records) {
  std::vector<uint64_t> offsets{0};
  for (const std::string& record : records) {
    offsets.push_back(offsets.back() + tower::data::kTfRecordHeaderBytes + record.size() +
                      tower::data::kTfRecordFooterBytes);
  }
  return offsets;
}

void FuzzRaw(std::string_view input) {
  const std::string bytes(input);
  Write(bytes);
  std::vector<std::string> records;
  const tower::Status status = OpenAndCheck(bytes, &records);
  if (!status.ok()) {
    CheckError(status, TheFile().path + ": ");
    return;
  }
  CheckSource(records);
}

// The records of `input`: a length byte, then up to that many bytes, each.
std::vector<std::string> SplitRecords(std::string_view input) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < input.size()) {
    const size_t length = static_cast<uint8_t>(input[at++]);
    records.emplace_back(input.substr(at, length));
    at += records.back().size();
  }
  return records;
}

void FuzzFramed(std::string_view input) {
  if (input.size() < 3) return;
  const uint8_t damage = static_cast<uint8_t>(input[0]);
  const uint8_t which = static_cast<uint8_t>(input[1]);  // which record is damaged
  const uint64_t pick = static_cast<uint8_t>(input[2]);  // which byte of the part damaged
  const std::vector<std::string> records = SplitRecords(input.substr(3));
  if (records.empty()) return;
  std::string bytes;
  for (const std::string& record : records) tower::data::AppendTfRecord(record, &bytes);
  Write(bytes);
  std::vector<std::string> read;
  TOWER_CHECK_OK(OpenAndCheck(bytes, &read));
  TOWER_CHECK(read == records) << "a framed file reads back other records";
  CheckSource(records);

  const std::vector<uint64_t> offsets = Offsets(records);
  const int64_t k = which % static_cast<int64_t>(records.size());
  const uint64_t start = offsets[static_cast<size_t>(k)];
  const uint64_t length = records[static_cast<size_t>(k)].size();
  const int kind = (damage & 7) % 6;
  const int bit = (damage >> 3) & 7;
  switch (kind) {
    case 0:  // undamaged
      return;
    case 1: {  // the file cut short, inside record k or at its start
      const uint64_t cut = start + pick % (offsets[static_cast<size_t>(k) + 1] - start);
      bytes.resize(cut);
      Write(bytes);
      std::vector<std::string> kept;
      const tower::Status status = OpenAndCheck(bytes, &kept);
      if (cut == start && k > 0) {
        TOWER_CHECK_OK(status);
        TOWER_CHECK(kept.size() == static_cast<size_t>(k));
      } else if (cut == 0) {
        CheckError(status, TheFile().path + ": the file is empty");
      } else {
        CheckError(status, RecordPrefix(k, start) + "truncated");
      }
      return;
    }
    case 2: {  // a bit of its data, if any, else of its data CRC; after Open, then before
      const uint64_t at = length > 0 ? start + 12 + pick % length : start + 12 + pick % 4;
      auto reader = TfRecordReader::Open(TheFile().path);
      TOWER_CHECK_OK(reader.status());
      FlipBit(at, bit);
      std::string scratch;
      CheckError((*reader)->Record(k, &scratch).status(), RecordPrefix(k, start));
      std::vector<std::string_view> views;
      CheckError((*reader)->ReadRecords(0, (*reader)->num_records(), &scratch, &views),
                 RecordPrefix(k, start));
      CheckError(TfRecordReader::Open(TheFile().path).status(),
                 RecordPrefix(k, start) + "the data's CRC-32C does not match");
      return;
    }
    default: {                    // a bit of its length (8 bytes), length CRC (4) or data CRC (4)
      const int part = kind - 3;  // 0, 1, 2
      const uint64_t at = part == 0   ? start + pick % 8
                          : part == 1 ? start + 8 + pick % 4
                                      : start + 12 + length + pick % 4;
      auto reader = TfRecordReader::Open(TheFile().path);
      TOWER_CHECK_OK(reader.status());
      FlipBit(at, bit);
      std::string scratch;
      CheckError((*reader)->Record(k, &scratch).status(), RecordPrefix(k, start));
      CheckError(TfRecordReader::Open(TheFile().path).status(),
                 RecordPrefix(k, start) + (part == 2 ? "the data's" : "the length's"));
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    FuzzRaw(input);
  } else {
    FuzzFramed(input);
  }
  return 0;
}
