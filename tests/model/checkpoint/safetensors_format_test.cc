// The safetensors format: bytes as the spec prescribes them, round trips, and every way a
// damaged or hostile file is rejected (with its reason), through Parse and through Load.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/checkpoint/safetensors.h"

namespace tower::checkpoint {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A file: the 8-byte little-endian length of `json`, `json`, then `data`.
std::string WithHeader(const std::string& json, const std::string& data = "") {
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + json + data;
}

std::string LengthPrefix(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out;
}

TensorData Raw(std::string name, DType dtype, std::vector<int64_t> shape,
               std::vector<uint8_t> bytes) {
  TensorData tensor;
  tensor.name = std::move(name);
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.bytes = std::move(bytes);
  return tensor;
}

std::vector<uint8_t> BytesOf(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  return std::vector<uint8_t>(p, p + size);
}

// Every dtype, scalars, empty tensors, awkward floats and names, in an order that is not
// sorted by name (the file keeps the order given).
File Sample() {
  File file;
  uint32_t nan_bits = 0x7FC00123;  // a NaN with a payload: must survive bit for bit
  float nan;
  std::memcpy(&nan, &nan_bits, 4);
  file.tensors.push_back(FromFloats("z.layers.0.kernel", {2, 3}, {1, -2, 3.5f, 0, -0.0f, 1e-45f}));
  file.tensors.push_back(FromFloats("scalar", {}, {nan}));
  file.tensors.push_back(Raw("half", DType::kF16, {2}, {0x00, 0x3C, 0x00, 0xC0}));
  file.tensors.push_back(Raw("brain", DType::kBF16, {3}, {0x80, 0x3F, 0x00, 0x40, 0xC0, 0x7F}));
  file.tensors.push_back(FromFloats("empty", {0, 4}, {}));
  const int32_t ints[] = {-1, 2, INT32_MIN, INT32_MAX};
  file.tensors.push_back(Raw("ints", DType::kI32, {2, 2}, BytesOf(ints, sizeof(ints))));
  const int64_t step = 0x0102030405060708;
  file.tensors.push_back(Raw("optimizer.iterations", DType::kI64, {}, BytesOf(&step, 8)));
  file.tensors.push_back(Raw("bytes", DType::kU8, {5}, {0, 1, 127, 128, 255}));
  file.tensors.push_back(Raw("empty.u8", DType::kU8, {3, 0}, {}));
  const double doubles[] = {3.141592653589793, -1e300};
  file.tensors.push_back(Raw("doubles", DType::kF64, {1, 2}, BytesOf(doubles, sizeof(doubles))));
  file.tensors.push_back(
      FromFloats("a \"quoted\" \\ name\twith\ncontrol \x01 and ünïcödé ✓", {1}, {42}));
  file.metadata["format"] = "tower";
  file.metadata["empty"] = "";
  file.metadata["json-ish"] = "{\"not\": [\"parsed\"]}\n\ttab \x1f";
  file.metadata["ключ"] = "значение";
  return file;
}

void ExpectSameFile(const File& expected, const File& actual) {
  ASSERT_EQ(expected.tensors.size(), actual.tensors.size());
  for (size_t i = 0; i < expected.tensors.size(); ++i) {
    SCOPED_TRACE(expected.tensors[i].name);
    EXPECT_EQ(expected.tensors[i].name, actual.tensors[i].name);
    EXPECT_EQ(expected.tensors[i].dtype, actual.tensors[i].dtype);
    EXPECT_EQ(expected.tensors[i].shape, actual.tensors[i].shape);
    EXPECT_EQ(expected.tensors[i].bytes, actual.tensors[i].bytes);
  }
  EXPECT_EQ(expected.metadata, actual.metadata);
}

TEST(SafetensorsFormatTest, DTypeNamesAndSizes) {
  const std::pair<DType, std::pair<const char*, size_t>> table[] = {
      {DType::kF32, {"F32", 4}}, {DType::kF16, {"F16", 2}}, {DType::kBF16, {"BF16", 2}},
      {DType::kI32, {"I32", 4}}, {DType::kI64, {"I64", 8}}, {DType::kU8, {"U8", 1}},
      {DType::kF64, {"F64", 8}},
  };
  for (const auto& [dtype, expected] : table) {
    EXPECT_EQ(DTypeName(dtype), expected.first);
    EXPECT_EQ(ElementSize(dtype), expected.second);
    EXPECT_EQ(ParseDType(expected.first), dtype);
  }
  EXPECT_EQ(ParseDType("f32"), std::nullopt);
  EXPECT_EQ(ParseDType("I8"), std::nullopt);
}

TEST(SafetensorsFormatTest, RoundTripInMemoryIsBitExact) {
  StatusOr<std::string> bytes = Serialize(Sample());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  StatusOr<File> parsed = Parse(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSameFile(Sample(), *parsed);
  // Writing what was read gives the same bytes again.
  StatusOr<std::string> again = Serialize(*parsed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *bytes);
}

TEST(SafetensorsFormatTest, RoundTripThroughAFileIsBitExact) {
  const std::string path = TempPath("roundtrip.safetensors");
  ASSERT_TRUE(Save(path, Sample()).ok());
  StatusOr<File> loaded = Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameFile(Sample(), *loaded);

  std::ifstream in(path, std::ios::binary);
  const std::string on_disk((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(on_disk, *Serialize(Sample()));

  const TensorData* kernel = loaded->Find("z.layers.0.kernel");
  ASSERT_NE(kernel, nullptr);
  StatusOr<std::vector<float>> values = ToFloats(*kernel);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<float>{1, -2, 3.5f, 0, -0.0f, 1e-45f}));
  EXPECT_TRUE(std::signbit((*values)[4]));
  EXPECT_EQ(loaded->Find("missing"), nullptr);
}

TEST(SafetensorsFormatTest, EmptyFileHasAnEmptyObjectHeader) {
  const std::string expected = LengthPrefix(8) + "{}      ";
  StatusOr<std::string> bytes = Serialize(File());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, expected);
  StatusOr<File> parsed = Parse(expected);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->tensors.empty());
  EXPECT_TRUE(parsed->metadata.empty());
}

// The bytes the spec prescribes for one F32 tensor "a" of shape [2] holding 1, 2, built by
// hand: the length (56 = 0x38), the compact JSON the reference writer emits, two spaces of
// padding to a multiple of 8, then 1.0f and 2.0f little-endian.
TEST(SafetensorsFormatTest, KnownAnswerOneTensor) {
  const std::string json = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_EQ(json.size(), 54u);
  const std::string expected = std::string("\x38\0\0\0\0\0\0\0", 8) + json + "  " +
                               std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
  File file;
  file.tensors.push_back(FromFloats("a", {2}, {1, 2}));
  StatusOr<std::string> bytes = Serialize(file);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, expected);

  const std::string path = TempPath("known.safetensors");
  ASSERT_TRUE(Save(path, file).ok());
  std::ifstream in(path, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), expected);

  StatusOr<File> parsed = Parse(expected);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->tensors.size(), 1u);
  EXPECT_EQ(parsed->tensors[0].name, "a");
  EXPECT_EQ(parsed->tensors[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(*ToFloats(parsed->tensors[0]), (std::vector<float>{1, 2}));
}

// Metadata comes first (as the reference writer puts it), a scalar has shape [], an empty
// tensor has equal offsets; 140 bytes of JSON get 4 spaces.
TEST(SafetensorsFormatTest, KnownAnswerMetadataScalarAndEmpty) {
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"s":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
      R"("empty":{"dtype":"U8","shape":[0],"data_offsets":[8,8]}})";
  ASSERT_EQ(json.size(), 140u);
  const std::string expected =
      std::string("\x90\0\0\0\0\0\0\0", 8) + json + "    " + std::string("\x07\0\0\0\0\0\0\0", 8);
  File file;
  file.metadata["format"] = "pt";
  file.tensors.push_back(Raw("s", DType::kI64, {}, {7, 0, 0, 0, 0, 0, 0, 0}));
  file.tensors.push_back(Raw("empty", DType::kU8, {0}, {}));
  StatusOr<std::string> bytes = Serialize(file);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, expected);
  StatusOr<File> parsed = Parse(expected);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSameFile(file, *parsed);
}

// The example in the reference implementation's documentation: no padding, and its
// length written as '<' (60).
TEST(SafetensorsFormatTest, ReadsTheReferenceDocumentationExample) {
  const std::string bytes = std::string("<\0\0\0\0\0\0\0", 8) +
                            R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})" +
                            std::string(16, '\0');
  StatusOr<File> parsed = Parse(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->tensors.size(), 1u);
  EXPECT_EQ(parsed->tensors[0].name, "test");
  EXPECT_EQ(parsed->tensors[0].dtype, DType::kI32);
  EXPECT_EQ(parsed->tensors[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(parsed->tensors[0].bytes, std::vector<uint8_t>(16, 0));
}

// Other writers order the header differently (Python sorts by dtype and name); the file's
// data order is what counts, whatever the key order, whitespace or extra fields.
TEST(SafetensorsFormatTest, ReadsOtherWritersLayouts) {
  const std::string json = R"( {
      "b": {"shape": [1], "data_offsets": [4, 8], "dtype": "F32", "comment": {"x": [1, [2]]}},
      "__metadata__": {"k": "v"},
      "a": {"data_offsets": [0, 4], "dtype": "F32", "shape": [1]},
      "c": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}
    }   )";
  const float values[] = {1, 2};
  StatusOr<File> parsed =
      Parse(WithHeader(json, std::string(reinterpret_cast<const char*>(values), 8)));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->tensors.size(), 3u);
  EXPECT_EQ(parsed->tensors[0].name, "a");
  EXPECT_EQ(parsed->tensors[1].name, "b");
  EXPECT_EQ(parsed->tensors[2].name, "c");
  EXPECT_EQ(*ToFloats(parsed->tensors[0]), std::vector<float>{1});
  EXPECT_EQ(*ToFloats(parsed->tensors[1]), std::vector<float>{2});
  EXPECT_EQ(parsed->metadata.at("k"), "v");
}

// Fields the format does not define are skipped however deep they nest, without recursion
// or a JSON tree; nesting where the format has no place for it fails at once.
TEST(SafetensorsFormatTest, DeepNestingNeitherCrashesNorIsKept) {
  const int depth = 1'000'000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  StatusOr<File> skipped = Parse(WithHeader(
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":)" + deep + "}}", "x"));
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->tensors[0].bytes, std::vector<uint8_t>{'x'});

  StatusOr<File> root = Parse(WithHeader(deep));
  EXPECT_THAT(root.status().message(), HasSubstr("the header is an array, not a JSON object"));
  StatusOr<File> shape = Parse(WithHeader(R"({"a":{"dtype":"U8","shape":)" + deep + "}}"));
  EXPECT_THAT(shape.status().message(), HasSubstr("tensor 'a': shape holds an array"));
  StatusOr<File> unclosed = Parse(WithHeader(std::string(depth, '{')));
  EXPECT_THAT(unclosed.status().message(), HasSubstr("not valid JSON"));
}

struct Corruption {
  const char* what;
  std::string bytes;
  std::string message;  // after "<source>: "
};

std::vector<Corruption> Corruptions() {
  File two;
  two.tensors.push_back(FromFloats("a", {2}, {1, 2}));
  two.tensors.push_back(Raw("b", DType::kI32, {1}, {5, 0, 0, 0}));
  const std::string good = *Serialize(two);  // 8 + 104 header bytes + 12 data bytes
  const uint64_t header = good.size() - 8 - 12;
  const std::string F32_1 = R"("dtype":"F32","shape":[1])";
  auto tensor = [](const std::string& name, const std::string& fields) {
    return "\"" + name + "\":{" + fields + "}";
  };
  const std::string four(4, 'x');
  return {
      {"empty file", "", "the file is 0 bytes, too short for a safetensors file"},
      {"7 bytes", good.substr(0, 7), "the file is 7 bytes, too short for a safetensors file"},
      {"length only", good.substr(0, 8),
       "truncated: the header length is " + std::to_string(header) +
           " bytes but only 0 bytes follow it"},
      {"cut in the header", good.substr(0, 30),
       "truncated: the header length is " + std::to_string(header) +
           " bytes but only 22 bytes follow it"},
      {"cut before the data", good.substr(0, 8 + header),
       "truncated: the header promises 12 bytes of data, the file has 0 (tensor 'a' [0, 8] "
       "ends past it)"},
      {"cut in the last tensor", good.substr(0, good.size() - 1),
       "truncated: the header promises 12 bytes of data, the file has 11 (tensor 'b' [8, 12] "
       "ends past it)"},
      {"stray bytes after the data", good + "xyz",
       "the header's tensors cover 12 bytes of data but the file has 15: 3 stray bytes at the "
       "end"},
      {"absurd header length", LengthPrefix(UINT64_MAX) + "{}",
       "header length 18446744073709551615 is over the limit of 100000000 bytes"},
      {"header length just over the limit", LengthPrefix(100'000'001) + "{}",
       "header length 100000001 is over the limit of 100000000 bytes"},
      {"zero header length", LengthPrefix(0), "the header is not valid JSON"},
      {"not JSON", WithHeader("{not json}"),
       "the header is not valid JSON: parse error at line 1, column 3: syntax error while "
       "parsing object key"},
      {"JSON then garbage", WithHeader("{} {}"), "the header is not valid JSON"},
      {"not UTF-8", WithHeader("{\"\xff\":{}}"), "the header is not valid UTF-8"},
      {"NUL padding", WithHeader(std::string("{}\0\0", 4)),
       "the header is not valid JSON: a NUL byte at byte 2 of the header"},
      {"NUL then anything", WithHeader(std::string("{}\0{\"a\":[", 8)),
       "the header is not valid JSON: a NUL byte at byte 2 of the header"},
      {"array header", WithHeader("[1, 2]"), "the header is an array, not a JSON object"},
      {"string header", WithHeader("\"a\""), "the header is a string, not a JSON object"},
      {"entry not an object", WithHeader(R"({"a": 5})"),
       "tensor 'a' is a number, not an object {\"dtype\", \"shape\", \"data_offsets\"}"},
      {"no dtype", WithHeader("{" + tensor("a", R"("shape":[1],"data_offsets":[0,4])") + "}", four),
       "tensor 'a': missing \"dtype\""},
      {"only dtype", WithHeader("{" + tensor("a", R"("dtype":"F32")") + "}", four),
       "tensor 'a': missing \"shape\", \"data_offsets\""},
      {"dtype not a string",
       WithHeader("{" + tensor("a", R"("dtype":4,"shape":[1],"data_offsets":[0,4])") + "}", four),
       "tensor 'a': dtype is a number, not a string"},
      {"unknown dtype",
       WithHeader("{" + tensor("a", R"("dtype":"Q7","shape":[1],"data_offsets":[0,4])") + "}",
                  four),
       "tensor 'a': unknown dtype 'Q7' (Tower reads F32, F16, BF16, I32, I64, U8, F64)"},
      {"dtype of the spec that Tower does not read",
       WithHeader("{" + tensor("a", R"("dtype":"I8","shape":[4],"data_offsets":[0,4])") + "}",
                  four),
       "tensor 'a': unknown dtype 'I8'"},
      {"dtype twice",
       WithHeader("{" + tensor("a", F32_1 + R"(,"dtype":"F16","data_offsets":[0,4])") + "}", four),
       "tensor 'a': \"dtype\" appears twice"},
      {"shape not an array",
       WithHeader("{" + tensor("a", R"("dtype":"F32","shape":"1","data_offsets":[0,4])") + "}",
                  four),
       "tensor 'a': shape is a string, not an array of integers"},
      {"negative dimension",
       WithHeader("{" + tensor("a", R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])") + "}",
                  four),
       "tensor 'a': shape has a negative dimension -1"},
      {"fractional dimension",
       WithHeader("{" + tensor("a", R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])") + "}",
                  four),
       "tensor 'a': shape dimension 1.5 is not an integer"},
      {"string dimension",
       WithHeader("{" + tensor("a", R"("dtype":"F32","shape":["1"],"data_offsets":[0,4])") + "}",
                  four),
       "tensor 'a': shape holds a string, not only integers"},
      {"dimension over int64",
       WithHeader(
           "{" +
               tensor("a", R"("dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4])") +
               "}",
           four),
       "tensor 'a': shape dimension 9223372036854775808 is too large"},
      {"dimension over uint64",
       WithHeader(
           "{" +
               tensor("a", R"("dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4])") +
               "}",
           four),
       "tensor 'a': shape dimension 18446744073709551616 is not an integer"},
      {"overflowing shape",
       WithHeader(
           "{" +
               tensor("a",
                      R"("dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4])") +
               "}",
           four),
       "tensor 'a': shape [4611686018427387904, 4] of F32 is too large (its byte size "
       "overflows 64 bits)"},
      {"offsets not an array",
       WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":"0-4")") + "}", four),
       "tensor 'a': data_offsets is a string, not an array [begin, end]"},
      {"one offset", WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":[4])") + "}", four),
       "tensor 'a': data_offsets has 1 entry; it must be [begin, end]"},
      {"three offsets",
       WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":[0,4,8])") + "}", four),
       "tensor 'a': data_offsets has more than 2 entries"},
      {"negative offset",
       WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":[-4,0])") + "}", four),
       "tensor 'a': data_offsets has a negative offset -4"},
      {"null offset",
       WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":[0,null])") + "}", four),
       "tensor 'a': data_offsets holds null, not only integers"},
      {"reversed offsets",
       WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":[4,0])") + "}", four),
       "tensor 'a': data_offsets [4, 0] are reversed (begin > end)"},
      {"size does not match the shape",
       WithHeader(R"({"layers.0.kernel":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12]}})",
                  std::string(12, 'x')),
       "tensor 'layers.0.kernel': data_offsets [0, 12] hold 12 bytes but shape [2, 3] of F32 "
       "needs 24"},
      {"overlapping tensors",
       WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":[0,4])") + "," +
                      tensor("b", F32_1 + R"(,"data_offsets":[2,6])") + "}",
                  std::string(6, 'x')),
       "tensor 'b': data_offsets [2, 6] overlap tensor 'a' [0, 4]"},
      {"one tensor twice over the same bytes",
       WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":[0,4])") + "," +
                      tensor("b", F32_1 + R"(,"data_offsets":[0,4])") + "}",
                  four),
       "tensor 'b': data_offsets [0, 4] overlap tensor 'a' [0, 4]"},
      {"gap at the start",
       WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":[4,8])") + "}", four + four),
       "tensor 'a': data_offsets [4, 8] leave a gap of 4 bytes at the start of the data section"},
      {"gap between tensors",
       WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":[0,4])") + "," +
                      tensor("b", F32_1 + R"(,"data_offsets":[8,12])") + "}",
                  std::string(12, 'x')),
       "tensor 'b': data_offsets [8, 12] leave a gap of 4 bytes after tensor 'a' (which ends at "
       "4)"},
      {"offsets past the data section",
       WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":[0,4])") + "," +
                      tensor("b", F32_1 + R"(,"data_offsets":[4,8])") + "}",
                  four),
       "truncated: the header promises 8 bytes of data, the file has 4 (tensor 'b' [4, 8] ends "
       "past it)"},
      {"a 4 TB tensor claimed by a tiny file (nothing is allocated for it)",
       WithHeader(
           R"({"a":{"dtype":"F32","shape":[1073741824,1024],"data_offsets":[0,4398046511104]}})"),
       "truncated: the header promises 4398046511104 bytes of data, the file has 0"},
      {"duplicate names",
       WithHeader("{" + tensor("a", F32_1 + R"(,"data_offsets":[0,4])") + "," +
                      tensor("a", F32_1 + R"(,"data_offsets":[4,8])") + "}",
                  four + four),
       "the header names tensor 'a' twice"},
      {"metadata not an object", WithHeader(R"({"__metadata__":["k","v"]})"),
       "__metadata__ is an array, not an object of strings"},
      {"metadata value not a string", WithHeader(R"({"__metadata__":{"k":1}})"),
       "__metadata__: the value of 'k' is a number, not a string"},
      {"metadata value an object", WithHeader(R"({"__metadata__":{"k":{"nested":"v"}}})"),
       "__metadata__: the value of 'k' is an object, not a string"},
      {"metadata key twice", WithHeader(R"({"__metadata__":{"k":"1","k":"2"}})"),
       "__metadata__ has the key 'k' twice"},
      {"metadata twice", WithHeader(R"({"__metadata__":{},"__metadata__":{}})"),
       "the header has two __metadata__ entries"},
  };
}

TEST(SafetensorsFormatTest, CorruptedInputsAreRejectedWithTheirReason) {
  const std::vector<Corruption> cases = Corruptions();
  ASSERT_GE(cases.size(), 15u);
  for (const Corruption& c : cases) {
    SCOPED_TRACE(c.what);
    StatusOr<File> parsed = Parse(c.bytes, "bad.safetensors");
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kDataLoss) << parsed.status();
    EXPECT_THAT(parsed.status().message(), StartsWith("bad.safetensors: " + c.message));
  }
}

// Load reads the file piece by piece (length, header, each tensor), not through Parse: the
// same faults give the same messages, naming the path.
TEST(SafetensorsFormatTest, LoadRejectsTheSameCorruptionsWithThePath) {
  const std::string path = TempPath("corrupt.safetensors");
  for (const Corruption& c : Corruptions()) {
    SCOPED_TRACE(c.what);
    WriteBytes(path, c.bytes);
    StatusOr<File> loaded = Load(path);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss) << loaded.status();
    EXPECT_THAT(loaded.status().message(), StartsWith(path + ": " + c.message));
  }
}

TEST(SafetensorsFormatTest, HugeNamesAreCutShortInMessages) {
  const std::string name(100'000, 'n');
  StatusOr<File> parsed = Parse(WithHeader("{\"" + name + "\": 1}"));
  ASSERT_FALSE(parsed.ok());
  EXPECT_LT(parsed.status().message().size(), 400u);
  EXPECT_THAT(parsed.status().message(), HasSubstr("...' (100000 bytes) is a number"));
}

TEST(SafetensorsFormatTest, EveryTruncationIsRejected) {
  const std::string good = *Serialize(Sample());
  const std::string path = TempPath("truncated.safetensors");
  for (size_t n = 0; n < good.size(); ++n) {
    const std::string cut = good.substr(0, n);
    StatusOr<File> parsed = Parse(cut);
    ASSERT_FALSE(parsed.ok()) << "accepted the first " << n << " bytes";
    EXPECT_EQ(parsed.status().code(), StatusCode::kDataLoss);
    if (n % 37 == 0) {
      WriteBytes(path, cut);
      EXPECT_EQ(Load(path).status(),
                Status(parsed.status().code(), path + parsed.status().message().substr(8)));
    }
  }
  EXPECT_TRUE(Parse(good).ok());
}

// Random damage never crashes the reader; whatever it accepts is a consistent file (it
// writes back and reads again the same).
TEST(SafetensorsFormatTest, RandomDamageNeverCrashes) {
  const std::string good = *Serialize(Sample());
  std::mt19937 random(12345);
  int accepted = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::string bytes = good;
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits; ++e) {
      // Mostly inside the length and the header, where the structure is.
      const size_t limit = random() % 4 == 0 ? bytes.size() : std::min<size_t>(bytes.size(), 400);
      const size_t at = random() % limit;
      switch (random() % 3) {
        case 0:
          bytes[at] = static_cast<char>(random());
          break;
        case 1:
          bytes[at] = "{}[]\":,0123456789-.eE \\"[random() % 23];
          break;
        case 2:
          bytes.erase(at, 1 + random() % 3);
          break;
      }
    }
    StatusOr<File> parsed = Parse(bytes);
    if (!parsed.ok()) {
      EXPECT_THAT(parsed.status().message(), StartsWith("<memory>: "));
      continue;
    }
    ++accepted;
    StatusOr<std::string> again = Serialize(*parsed);
    ASSERT_TRUE(again.ok()) << again.status();
    StatusOr<File> reparsed = Parse(*again);
    ASSERT_TRUE(reparsed.ok()) << reparsed.status();
    ExpectSameFile(*parsed, *reparsed);
  }
  EXPECT_GT(accepted, 0);  // some edits only touch tensor data
}

TEST(SafetensorsFormatTest, SerializeRejectsInconsistentFiles) {
  auto message = [](const File& file) {
    StatusOr<std::string> bytes = Serialize(file);
    EXPECT_FALSE(bytes.ok());
    EXPECT_TRUE(IsInvalidArgument(bytes.status())) << bytes.status();
    return bytes.ok() ? std::string() : bytes.status().message();
  };
  File duplicate;
  duplicate.tensors = {FromFloats("x", {1}, {1}), FromFloats("x", {1}, {2})};
  EXPECT_EQ(message(duplicate), "two tensors are named 'x'");
  File wrong_size;
  wrong_size.tensors = {FromFloats("x", {2, 2}, {1, 2, 3})};
  EXPECT_EQ(message(wrong_size), "tensor 'x': 12 bytes of data, but shape [2, 2] of F32 needs 16");
  File scalar_without_data;
  scalar_without_data.tensors = {Raw("s", DType::kI64, {}, {})};
  EXPECT_EQ(message(scalar_without_data),
            "tensor 's': 0 bytes of data, but shape [] of I64 needs 8");
  File negative;
  negative.tensors = {FromFloats("x", {-1}, {})};
  EXPECT_THAT(message(negative), HasSubstr("shape [-1] is invalid"));
  File unnamed;
  unnamed.tensors = {FromFloats("ok", {1}, {1}), FromFloats("", {1}, {1})};
  EXPECT_EQ(message(unnamed), "tensor #1 has an empty name");
  File reserved;
  reserved.tensors = {FromFloats("__metadata__", {1}, {1})};
  EXPECT_THAT(message(reserved), HasSubstr("reserved"));
  File bad_utf8;
  bad_utf8.tensors = {FromFloats("caf\xe9", {1}, {1})};
  EXPECT_THAT(message(bad_utf8), HasSubstr("name is not valid UTF-8"));
  File bad_metadata;
  bad_metadata.metadata["k"] = "\xc0\x80";  // an overlong NUL
  EXPECT_THAT(message(bad_metadata), HasSubstr("__metadata__ value of 'k' is not valid UTF-8"));
  File bad_dtype;
  bad_dtype.tensors = {Raw("x", static_cast<DType>(99), {1}, {1})};
  EXPECT_THAT(message(bad_dtype), HasSubstr("invalid dtype value 99"));
}

TEST(SafetensorsFormatTest, ToFloatsChecksDTypeAndSize) {
  EXPECT_EQ(*ToFloats(FromFloats("x", {}, {2.5f})), std::vector<float>{2.5f});
  EXPECT_EQ(*ToFloats(FromFloats("x", {0, 3}, {})), std::vector<float>{});
  StatusOr<std::vector<float>> half = ToFloats(Raw("h", DType::kF16, {1}, {0, 0x3C}));
  EXPECT_TRUE(IsInvalidArgument(half.status()));
  EXPECT_EQ(half.status().message(), "tensor 'h' is F16, not F32");
  StatusOr<std::vector<float>> short_data = ToFloats(FromFloats("x", {3}, {1, 2}));
  EXPECT_TRUE(IsInvalidArgument(short_data.status()));
  EXPECT_THAT(short_data.status().message(), HasSubstr("8 bytes of data do not match shape [3]"));
}

}  // namespace
}  // namespace tower::checkpoint
