// data/tfrecord.h (the framing), data/example_proto.h (tf.train.Example from the wire) and
// data/tfrecord_source.h, on bytes built here: the CRCs against constants computed
// independently (Python's crc32c module), the Examples field by field in the protobuf wire
// format, packed and unpacked; every damaged record gives one error naming file and record.
#include "data/tfrecord.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/example_proto.h"
#include "data/tfrecord_source.h"
#include "tests/data/dataset_testing.h"

namespace tower::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::WriteTempFile;

// --- Protobuf wire format, by hand ---

std::string Varint(uint64_t value) {
  std::string out;
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
  return out;
}
std::string Tag(int field, int wire_type) {
  return Varint(static_cast<uint64_t>(field) << 3 | wire_type);
}
std::string Len(int field, const std::string& bytes) {
  return Tag(field, 2) + Varint(bytes.size()) + bytes;
}
std::string Fixed32(float value) {
  std::string out(4, '\0');
  std::memcpy(&out[0], &value, 4);
  return out;
}
std::string PackedFloats(const std::vector<float>& values) {
  std::string packed;
  for (float v : values) packed += Fixed32(v);
  return Len(2, Len(1, packed));  // Feature.float_list { value: packed }
}
std::string PackedInt64s(const std::vector<int64_t>& values) {
  std::string packed;
  for (int64_t v : values) packed += Varint(static_cast<uint64_t>(v));
  return Len(3, Len(1, packed));  // Feature.int64_list
}
std::string Entry(const std::string& name, const std::string& feature) {
  return Len(1, Len(1, name) + Len(2, feature));  // Features.feature map entry
}
std::string Example(const std::string& entries) { return Len(1, entries); }

std::string Records(const std::vector<std::string>& records) {
  std::string out;
  for (const std::string& record : records) AppendTfRecord(record, &out);
  return out;
}

// --- Framing ---

TEST(TfRecordTest, FramingMatchesTensorFlowsMaskedCrc) {
  std::string out;
  AppendTfRecord("123456789", &out);
  ASSERT_EQ(out.size(), 12u + 9 + 4);
  EXPECT_EQ(out.substr(0, 8), std::string("\x09\0\0\0\0\0\0\0", 8));
  // Masked CRC-32C of the 8 length bytes, then of "123456789" (CRC-32C 0xE3069283).
  EXPECT_EQ(out.substr(8, 4), std::string("\x37\xf9\x71\x39", 4));
  EXPECT_EQ(out.substr(12, 9), "123456789");
  EXPECT_EQ(out.substr(21, 4), std::string("\xe5\xb0\x8a\xc7", 4));
}

TEST(TfRecordTest, ReaderIndexesEveryRecord) {
  const std::string path = WriteTempFile("three.tfrecord", Records({"first", "", "third!"}));
  StatusOr<std::unique_ptr<TfRecordReader>> reader = TfRecordReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ((*reader)->num_records(), 3);
  std::string scratch;
  EXPECT_EQ(*(*reader)->Record(2, &scratch), "third!");
  EXPECT_EQ(*(*reader)->Record(1, &scratch), "");
  EXPECT_EQ(*(*reader)->Record(0, &scratch), "first");
}

std::string OpenError(const std::string& name, const std::string& bytes) {
  StatusOr<std::unique_ptr<TfRecordReader>> reader =
      TfRecordReader::Open(WriteTempFile(name, bytes));
  if (reader.ok()) return "(no error)";
  EXPECT_EQ(reader.status().code(), StatusCode::kInvalidArgument);
  return reader.status().message();
}

TEST(TfRecordTest, DamagedRecordsAreNamed) {
  const std::string good = Records({"aaaa", "bbbb", "cccc"});  // 20 bytes each
  std::string bad_length = good;
  bad_length[20 + 3] ^= 1;
  EXPECT_THAT(OpenError("length.tfrecord", bad_length),
              HasSubstr("length.tfrecord: record 1 (byte 20): the length's CRC-32C does not "
                        "match"));
  std::string bad_data = good;
  bad_data[40 + 13] ^= 1;
  EXPECT_THAT(OpenError("data.tfrecord", bad_data),
              HasSubstr("data.tfrecord: record 2 (byte 40): the data's CRC-32C does not match"));
  EXPECT_THAT(OpenError("cut.tfrecord", good.substr(0, 58)),
              HasSubstr("cut.tfrecord: record 2 (byte 40): truncated: the record holds 4 bytes"));
  EXPECT_THAT(OpenError("cut_header.tfrecord", good.substr(0, 45)),
              HasSubstr("cut_header.tfrecord: record 2 (byte 40): truncated: 5 bytes left"));
  EXPECT_THAT(OpenError("empty.tfrecord", ""), HasSubstr("empty.tfrecord: the file is empty"));
  EXPECT_THAT(OpenError("text.tfrecord", "x,y\n1,2\n3,4\n"),
              HasSubstr("text.tfrecord: record 0 (byte 0): the length's CRC-32C"));
  StatusOr<std::unique_ptr<TfRecordReader>> visited = TfRecordReader::Open(
      WriteTempFile("visited.tfrecord", good), [](int64_t record, std::string_view data) {
        return record == 1 ? InvalidArgumentError("no " + std::string(data)) : OkStatus();
      });
  EXPECT_THAT(visited.status().message(),
              HasSubstr("visited.tfrecord: record 1 (byte 20): no bbbb"));
}

// --- tf.train.Example ---

TEST(ExampleProtoTest, DecodesPackedAndUnpackedListsAndSkipsUnknownFields) {
  const std::string unpacked_floats = Len(2, Tag(1, 5) + Fixed32(0.25f) + Tag(1, 5) + Fixed32(-8));
  const std::string unpacked_ints =
      Len(3, Tag(1, 0) + Varint(static_cast<uint64_t>(int64_t{-3})) + Tag(1, 0) + Varint(7));
  const std::string bytes = Len(1, Len(1, "x") + Len(1, "yz"));
  const std::string example =
      Tag(7, 0) + Varint(99) +  // an unknown field of Example
      Example(Entry("a", PackedFloats({1.5f, -2})) + Entry("b", unpacked_ints) + Entry("c", bytes) +
              Entry("d", unpacked_floats) + Entry("e", PackedInt64s({int64_t{1} << 40, -1})) +
              Entry("empty", ""));
  std::vector<std::string> names;
  std::vector<FeatureList> lists;
  const Status status = ForEachFeature(example, [&](std::string_view name, std::string_view f) {
    names.emplace_back(name);
    lists.emplace_back();
    return DecodeFeature(f, &lists.back());
  });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_THAT(names, ElementsAre("a", "b", "c", "d", "e", "empty"));
  EXPECT_EQ(lists[0].kind, FeatureKind::kFloat);
  EXPECT_THAT(lists[0].floats, ElementsAre(1.5f, -2.0f));
  EXPECT_EQ(lists[1].kind, FeatureKind::kInt64);
  EXPECT_THAT(lists[1].int64s, ElementsAre(-3, 7));
  EXPECT_EQ(lists[2].kind, FeatureKind::kBytes);
  EXPECT_EQ(lists[2].size(), 2);
  EXPECT_THAT(lists[3].floats, ElementsAre(0.25f, -8.0f));
  EXPECT_THAT(lists[4].int64s, ElementsAre(int64_t{1} << 40, -1));
  EXPECT_EQ(lists[5].kind, FeatureKind::kNone);
}

TEST(ExampleProtoTest, MalformedBytesAreErrors) {
  FeatureList list;
  EXPECT_THAT(DecodeFeature(Len(2, Len(1, "12345")), &list).message(),
              HasSubstr("packed floats of 5 bytes"));
  EXPECT_THAT(DecodeFeature(Tag(2, 2) + Varint(10) + "abc", &list).message(),
              HasSubstr("a length runs past the end of the Feature"));
  EXPECT_THAT(DecodeFeature(Len(3, Tag(1, 0) + "\xff"), &list).message(),
              HasSubstr("a varint runs past the end of the Int64List"));
  EXPECT_THAT(
      ForEachFeature(Tag(1, 3), [](std::string_view, std::string_view) { return OkStatus(); })
          .message(),
      HasSubstr("wire type 3 is not valid"));
}

// --- The source ---

std::string Row(float a0, float a1, int64_t label, const std::string& extra = "") {
  return Example(Entry("label", PackedInt64s({label})) + Entry("id", Len(1, Len(1, "r"))) +
                 Entry("a", PackedFloats({a0, a1})) + extra);
}

TEST(TfRecordSourceTest, ReadsNamedFeaturesAcrossFiles) {
  const std::string one = WriteTempFile("one.tfrecord", Records({Row(1, 2, 0), Row(3, 4, 1)}));
  const std::string two = WriteTempFile(
      "two.tfrecord", Records({Row(5, 6, 2, Entry("w", PackedFloats({9}))), Row(7, 8, 3)}));
  TfRecordOptions options;
  options.target_features = {"label"};
  StatusOr<Dataset> dataset = Dataset::FromTfRecords({one, two}, options);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->num_rows(), 4);
  // Default: every numeric feature but the target (the bytes "id" is left out).
  EXPECT_THAT(dataset->schema().feature_names, ElementsAre("a[0]", "a[1]"));
  EXPECT_THAT(dataset->schema().target_names, ElementsAre("label"));
  const int64_t rows[] = {3, 0, 2};
  std::vector<float> features(6), targets(3);
  ASSERT_TRUE(dataset->source()->Read(rows, 3, features.data(), targets.data()).ok());
  EXPECT_THAT(features, ElementsAre(7, 8, 1, 2, 5, 6));
  EXPECT_THAT(targets, ElementsAre(3, 0, 2));
  EXPECT_EQ(dataset->DescribeRow(2), two + ": record 0");
  // A run of consecutive rows across the two files (read a file at a time).
  const int64_t run[] = {0, 1, 2, 3};
  std::vector<float> run_features(8), run_targets(4);
  ASSERT_TRUE(dataset->source()->Read(run, 4, run_features.data(), run_targets.data()).ok());
  EXPECT_THAT(run_features, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_THAT(run_targets, ElementsAre(0, 1, 2, 3));

  // Named features, in the order given; a target of several values.
  options.features = {"label", "a"};
  options.target_features = {"a"};
  EXPECT_THAT(Dataset::FromTfRecords({one}, options).status().message(),
              HasSubstr("feature 'a' is named twice"));
  options.target_features = {"w"};
  EXPECT_THAT(Dataset::FromTfRecords({two, one}, options).status().message(),
              HasSubstr("two.tfrecord: record 1 (byte 81): feature 'w' is missing"));
}

std::string SourceError(const std::vector<std::string>& records, const TfRecordOptions& options) {
  const std::string path = WriteTempFile("bad.tfrecord", Records(records));
  StatusOr<Dataset> dataset = Dataset::FromTfRecords({path}, options);
  if (dataset.ok()) return "(no error)";
  EXPECT_EQ(dataset.status().code(), StatusCode::kInvalidArgument);
  return dataset.status().message();
}

TEST(TfRecordSourceTest, EveryRecordIsCheckedAtOpen) {
  TfRecordOptions options;
  options.target_features = {"label"};
  const std::string missing_a = Example(Entry("label", PackedInt64s({1})));
  EXPECT_THAT(SourceError({Row(1, 2, 0), Row(1, 2, 0), missing_a}, options),
              HasSubstr("bad.tfrecord: record 2 (byte "));
  EXPECT_THAT(SourceError({Row(1, 2, 0), Row(1, 2, 0), missing_a}, options),
              HasSubstr("feature 'a' is missing"));
  const std::string short_a =
      Example(Entry("label", PackedInt64s({1})) + Entry("a", PackedFloats({1})));
  EXPECT_THAT(SourceError({Row(1, 2, 0), short_a}, options),
              HasSubstr("record 1 (byte 66): feature 'a' is a float_list of 1 value(s), the "
                        "first record's a float_list of 2"));
  const std::string int_a =
      Example(Entry("label", PackedInt64s({1})) + Entry("a", PackedInt64s({1, 2})));
  EXPECT_THAT(SourceError({Row(1, 2, 0), int_a}, options),
              HasSubstr("feature 'a' is a int64_list of 2 value(s), the first record's a "
                        "float_list of 2"));
  // A second Features field whose length runs past the end of the record.
  const std::string garbage = Row(1, 2, 0) + Tag(1, 2) + Varint(50) + "abc";
  EXPECT_THAT(SourceError({Row(1, 2, 0), garbage}, options),
              HasSubstr("record 1 (byte 66): not a tf.train.Example"));
  options.target_features = {"id"};
  EXPECT_THAT(SourceError({Row(1, 2, 0)}, options),
              HasSubstr("record 0 (byte 0): feature 'id' is a bytes_list: only float_list and "
                        "int64_list features can be read"));
  options.target_features = {"y"};
  EXPECT_THAT(SourceError({Row(1, 2, 0)}, options),
              HasSubstr("the first record has no feature 'y' (its features: a, id, label)"));
}

TEST(TfRecordSourceTest, ARecordDamagedAfterOpenFailsItsRead) {
  const std::string path =
      WriteTempFile("later.tfrecord", Records({Row(1, 2, 0), Row(3, 4, 1), Row(5, 6, 2)}));
  TfRecordOptions options;
  options.target_features = {"label"};
  StatusOr<Dataset> dataset = Dataset::FromTfRecords({path}, options);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(66 + 12 + 5);  // inside record 1's data
    file.put('\x55');
  }
  StatusOr<std::vector<Batch>> batches = testing::Collect(dataset->Batch(3));
  ASSERT_FALSE(batches.ok());
  EXPECT_THAT(batches.status().message(),
              HasSubstr("later.tfrecord: record 1 (byte 66): the data's CRC-32C does not match"));
}

}  // namespace
}  // namespace tower::data
