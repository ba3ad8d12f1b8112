#include "model/checkpoint/safetensors.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tower::checkpoint {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int CountTemporaries(const std::string& dir) {
  int count = 0;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) count += std::strstr(e->d_name, ".tmp.") != nullptr;
  closedir(d);
  return count;
}

TensorData Raw(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  return TensorData{std::move(name), dtype, std::move(shape), std::move(bytes)};
}

File Sample() {
  File file;
  file.tensors.push_back(FromFloats("layers.0.kernel", {2, 3}, {1, 2, 3, 4, 5, 6}));
  file.tensors.push_back(FromFloats("layers.0.bias", {3}, {-1, 0.5f, 1e-30f}));
  file.tensors.push_back(Raw("optimizer.iterations", DType::kI64, {}, {7, 0, 0, 0, 0, 0, 0, 0}));
  file.tensors.push_back(Raw("half", DType::kF16, {2}, {0x00, 0x3c, 0x00, 0xc0}));
  file.tensors.push_back(FromFloats("empty", {0, 4}, {}));
  file.metadata["format"] = "tower";
  return file;
}

void ExpectSame(const File& a, const File& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
    EXPECT_EQ(a.tensors[i].dtype, b.tensors[i].dtype);
    EXPECT_EQ(a.tensors[i].shape, b.tensors[i].shape);
    EXPECT_EQ(a.tensors[i].bytes, b.tensors[i].bytes);
  }
  EXPECT_EQ(a.metadata, b.metadata);
}

TEST(SafetensorsTest, RoundTripIsBitExact) {
  const std::string path = TempDir() + "/roundtrip.safetensors";
  ASSERT_TRUE(Save(path, Sample()).ok());
  StatusOr<File> loaded = Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSame(Sample(), *loaded);
  EXPECT_EQ(*ToFloats(*loaded->Find("layers.0.bias")), (std::vector<float>{-1, 0.5f, 1e-30f}));
  EXPECT_EQ(loaded->Find("missing"), nullptr);
  EXPECT_FALSE(ToFloats(*loaded->Find("half")).ok());
}

// The bytes the format prescribes for one F32 tensor "a" of shape [2] holding 1, 2.
TEST(SafetensorsTest, KnownAnswerBytes) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_EQ(header.size(), 54u);  // padded to 56 with two spaces
  std::string expected(8, '\0');
  expected[0] = 56;
  expected += header + "  ";
  const float values[] = {1, 2};
  expected.append(reinterpret_cast<const char*>(values), 8);
  File file;
  file.tensors.push_back(FromFloats("a", {2}, {1, 2}));
  StatusOr<std::string> bytes = Serialize(file);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, expected);
  StatusOr<File> parsed = Parse(expected);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*ToFloats(parsed->tensors[0]), (std::vector<float>{1, 2}));
  // A header the reference writer would produce without padding parses too.
  std::string unpadded(8, '\0');
  unpadded[0] = 54;
  unpadded += header;
  unpadded.append(reinterpret_cast<const char*>(values), 8);
  EXPECT_TRUE(Parse(unpadded).ok());
}

std::string WithHeader(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json + data;
}

TEST(SafetensorsTest, CorruptedInputsAreRejectedWithTheirReason) {
  const std::string good = *Serialize(Sample());
  const std::string eight(8, 'x');
  struct Case {
    std::string bytes;
    std::string message;
  };
  const Case cases[] = {
      {"", "only 0 bytes"},
      {"abc", "only 3 bytes"},
      {good.substr(0, 8), "exceeds the 0 bytes that follow it"},
      {good.substr(0, 20), "exceeds the 12 bytes that follow it"},
      {good.substr(0, good.size() - 1), "truncated: the header promises"},
      {good + "extra", "5 bytes of data follow the last tensor"},
      {std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}", "over the 100 MB limit"},
      {WithHeader("{not json", ""), "not valid JSON"},
      {WithHeader("[1, 2]", ""), "not a JSON object"},
      {WithHeader(R"({"a": 5})", ""), "tensor 'a' is not an object"},
      {WithHeader(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", eight.substr(0, 4)), "has no string dtype"},
      {WithHeader(R"({"a": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}})", eight.substr(0, 4)), "unknown dtype 'Q7'"},
      {WithHeader(R"({"a": {"dtype": "F32", "data_offsets": [0, 4]}})", eight.substr(0, 4)), "has no shape array"},
      {WithHeader(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", eight.substr(0, 4)), "not a non-negative integer"},
      {WithHeader(R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", eight.substr(0, 4)), "not a non-negative integer"},
      {WithHeader(R"({"a": {"dtype": "F32", "shape": [1]}})", eight.substr(0, 4)), "needs data_offsets"},
      {WithHeader(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", eight.substr(0, 4)), "are reversed"},
      {WithHeader(R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 12]}})", std::string(12, 'x')),
       "tensor 'a': data_offsets [0, 12] hold 12 bytes but shape [2, 3] of F32 needs 24"},
      {WithHeader(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})", eight.substr(0, 6)), "overlaps the tensor before it"},
      {WithHeader(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", eight), "a gap of 4 bytes before tensor 'a'"},
      {WithHeader(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", eight), "names 'a' twice"},
      {WithHeader(R"({"__metadata__": {"k": 1}})", ""), "__metadata__ value of 'k' is not a string"},
      {WithHeader(R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 4]}})", eight.substr(0, 4)), "too large"},
  };
  for (const Case& c : cases) {
    StatusOr<File> parsed = Parse(c.bytes, "bad.safetensors");
    ASSERT_FALSE(parsed.ok()) << c.message;
    EXPECT_THAT(parsed.status().message(), HasSubstr("bad.safetensors: "));
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.message));
  }
}

TEST(SafetensorsTest, TruncatedAtEveryLengthNeverCrashes) {
  const std::string good = *Serialize(Sample());
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(Parse(good.substr(0, n)).ok()) << n;
  }
  EXPECT_TRUE(Parse(good).ok());
}

TEST(SafetensorsTest, SerializeRejectsInconsistentTensors) {
  File duplicate;
  duplicate.tensors = {FromFloats("x", {1}, {1}), FromFloats("x", {1}, {2})};
  EXPECT_THAT(Serialize(duplicate).status().message(), HasSubstr("two tensors are named 'x'"));
  File wrong_size;
  wrong_size.tensors = {FromFloats("x", {2, 2}, {1, 2, 3})};
  EXPECT_THAT(Serialize(wrong_size).status().message(), HasSubstr("has 12 bytes, but shape [2, 2] of F32 needs 16"));
  File unnamed;
  unnamed.tensors = {FromFloats("", {1}, {1})};
  EXPECT_FALSE(Serialize(unnamed).ok());
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  StatusOr<File> missing = Load(TempDir() + "/nope.safetensors");
  EXPECT_TRUE(IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.safetensors: no such checkpoint file"));
  EXPECT_TRUE(IsInvalidArgument(Load(TempDir()).status()));  // a directory
}

TEST(SafetensorsTest, AFailedSaveLeavesThePreviousFileAndNoTemporary) {
  const std::string dir = TempDir() + "/atomic";
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/model.safetensors";
  ASSERT_TRUE(Save(path, Sample()).ok());
  const std::string before = ReadFile(path);
  File other;
  other.tensors.push_back(FromFloats("w", {1000}, std::vector<float>(1000, 3.0f)));
  internal::FailNextSaveAfterBytesForTesting(100);  // dies part-way through the temporary
  Status failed = Save(path, other);
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(failed.message(), HasSubstr("the previous file, if any, is unchanged"));
  EXPECT_EQ(ReadFile(path), before);
  EXPECT_EQ(CountTemporaries(dir), 0);
  // And the next save replaces it whole.
  ASSERT_TRUE(Save(path, other).ok());
  EXPECT_EQ(Load(path)->tensors.size(), 1u);
  EXPECT_EQ(CountTemporaries(dir), 0);
}

TEST(SafetensorsTest, UnwritableDirectoryFailsCleanly) {
  Status status = Save("/proc/tower-cannot-write-here/model.safetensors", Sample());
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("cannot write checkpoint"));
}

}  // namespace
}  // namespace tower::checkpoint
