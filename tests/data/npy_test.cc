// data/npy.h: .npy files and .npz archives built byte by byte here (the header layout of
// NumPy's format versions 1.0 and 2.0, and zip's stored entries), read as a source; each
// unsupported or damaged file gives an error naming it.
#include "data/npy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "tests/data/dataset_testing.h"

namespace tower::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::WriteTempFile;

std::string LittleEndian(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  return out;
}

// A .npy file as np.save writes it: magic, version, header length, the dict padded with
// spaces to a multiple of 64 bytes and ended by '\n', then `data`.
std::string Npy(const std::string& descr, const std::string& shape, const std::string& data,
                bool fortran = false, int major = 1) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape + ", }";
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  return std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0' +
         LittleEndian(dict.size(), major == 1 ? 2 : 4) + dict + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Every row of one pass, features then targets.
void ReadAll(const Dataset& dataset, std::vector<float>* features, std::vector<float>* targets) {
  StatusOr<std::vector<Batch>> batches = testing::Collect(dataset.Batch(1000));
  ASSERT_TRUE(batches.ok()) << batches.status();
  for (const Batch& batch : *batches) {
    features->insert(features->end(), batch.features.begin(), batch.features.end());
    targets->insert(targets->end(), batch.targets.begin(), batch.targets.end());
  }
}

TEST(NpyTest, ReadsFloat32FeaturesAndFloat64Targets) {
  const std::string x = WriteTempFile(
      "x.npy", Npy("<f4", "(3, 2)", Bytes<float>({0.5f, -1.25f, 2, 3, 1e-8f, -0.0f})));
  const std::string y = WriteTempFile("y.npy", Npy("<f8", "(3,)", Bytes<double>({1, -2.5, 7})));
  StatusOr<Dataset> dataset = Dataset::FromNpy(x, y);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->num_rows(), 3);
  EXPECT_EQ(dataset->feature_dim(), 2);
  EXPECT_EQ(dataset->target_dim(), 1);
  EXPECT_THAT(dataset->schema().feature_names, ElementsAre("x0", "x1"));
  std::vector<float> features, targets;
  ReadAll(*dataset, &features, &targets);
  EXPECT_THAT(features, ElementsAre(0.5f, -1.25f, 2.0f, 3.0f, 1e-8f, -0.0f));
  EXPECT_THAT(targets, ElementsAre(1.0f, -2.5f, 7.0f));
  EXPECT_EQ(dataset->DescribeRow(2), x + ": row 2");
}

TEST(NpyTest, IntegerAndBooleanLabelsBecomeFloats) {
  const std::string x = WriteTempFile("ints_x.npy", Npy("<f4", "(2,)", Bytes<float>({1, 2})));
  struct Case {
    std::string descr, data;
    std::vector<float> want;
  };
  const std::vector<Case> cases = {
      {"|i1", Bytes<int8_t>({-128, 127}), {-128, 127}},
      {"<i2", Bytes<int16_t>({-300, 2}), {-300, 2}},
      {"<i4", Bytes<int32_t>({-70000, 3}), {-70000, 3}},
      {"<i8", Bytes<int64_t>({-5, int64_t{1} << 40}), {-5, 1099511627776.0f}},
      {"|u1", Bytes<uint8_t>({0, 255}), {0, 255}},
      {"<u2", Bytes<uint16_t>({65535, 1}), {65535, 1}},
      {"<u4", Bytes<uint32_t>({4000000000u, 9}), {4e9f, 9}},
      {"<u8", Bytes<uint64_t>({7, 8}), {7, 8}},
      {"|b1", std::string("\x01\x00", 2), {1, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.descr);
    const std::string y = WriteTempFile("ints_y.npy", Npy(c.descr, "(2,)", c.data));
    StatusOr<Dataset> dataset = Dataset::FromNpy(x, y);
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    std::vector<float> features, targets;
    ReadAll(*dataset, &features, &targets);
    EXPECT_EQ(targets, c.want);
  }
}

TEST(NpyTest, ShuffledRowsAndVersion2Headers) {
  std::vector<double> values;
  for (int i = 0; i < 30; ++i) values.push_back(i);  // 10 rows of 3: row r is 3r, 3r+1, 3r+2
  const std::string x = WriteTempFile("v2_x.npy", Npy("<f8", "(10, 3)", Bytes(values), false, 2));
  const std::string y = WriteTempFile(
      "v2_y.npy", Npy("<i8", "(10, 1)", Bytes<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9})));
  StatusOr<Dataset> dataset = Dataset::FromNpy(x, y);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const int64_t rows[] = {7, 2, 3, 9};
  std::vector<float> features(4 * 3), targets(4);
  ASSERT_TRUE(dataset->source()->Read(rows, 4, features.data(), targets.data()).ok());
  EXPECT_THAT(features, ElementsAre(21, 22, 23, 6, 7, 8, 9, 10, 11, 27, 28, 29));
  EXPECT_THAT(targets, ElementsAre(7, 2, 3, 9));
}

// The error of Dataset::FromNpy on features `x` (and the good targets of 2 rows).
std::string FeaturesError(const std::string& name, const std::string& contents) {
  const std::string x = WriteTempFile(name, contents);
  const std::string y = WriteTempFile("good_y.npy", Npy("<f4", "(2,)", Bytes<float>({1, 2})));
  StatusOr<Dataset> dataset = Dataset::FromNpy(x, y);
  if (dataset.ok()) return "(no error)";
  EXPECT_EQ(dataset.status().code(), StatusCode::kInvalidArgument) << dataset.status();
  return dataset.status().message();
}

TEST(NpyTest, UnsupportedFilesAreRefusedNamingTheFile) {
  const std::string four = Bytes<float>({1, 2, 3, 4});
  EXPECT_THAT(FeaturesError("fortran.npy", Npy("<f4", "(2, 2)", four, /*fortran=*/true)),
              HasSubstr("fortran.npy: the array is in Fortran order"));
  EXPECT_THAT(FeaturesError("object.npy", Npy("|O", "(2,)", std::string(16, '\0'))),
              HasSubstr("object.npy: dtype '|O' holds Python objects"));
  EXPECT_THAT(FeaturesError("big.npy", Npy(">f4", "(2, 2)", four)),
              HasSubstr("big.npy: dtype '>f4' is big-endian"));
  EXPECT_THAT(FeaturesError("half.npy", Npy("<f2", "(2, 2)", four.substr(0, 8))),
              HasSubstr("half.npy: dtype '<f2' is not supported"));
  EXPECT_THAT(FeaturesError("text.npy", Npy("<U1", "(2,)", four.substr(0, 8))),
              HasSubstr("text.npy: dtype '<U1' is not supported"));
  EXPECT_THAT(FeaturesError("cube.npy", Npy("<f4", "(1, 2, 2)", four)),
              HasSubstr("cube.npy: the array has 3 dimensions"));
  EXPECT_THAT(FeaturesError("scalar.npy", Npy("<f4", "()", four.substr(0, 4))),
              HasSubstr("scalar.npy: the array has 0 dimensions"));
  EXPECT_THAT(FeaturesError("short.npy", Npy("<f4", "(2, 2)", four.substr(0, 15))),
              HasSubstr("short.npy: the shape (2, 2) of 4-byte values needs 16 bytes of data, "
                        "the file has 15 (truncated"));
  EXPECT_THAT(FeaturesError("long.npy", Npy("<f4", "(2, 2)", four + "x")),
              HasSubstr("long.npy: the shape (2, 2) of 4-byte values needs 16 bytes of data, "
                        "the file has 17"));
  EXPECT_THAT(FeaturesError("cut_header.npy", Npy("<f4", "(2, 2)", four).substr(0, 40)),
              HasSubstr("cut_header.npy: truncated in its header"));
  EXPECT_THAT(FeaturesError("csv.npy", "x,y\n1,2\n"), HasSubstr("csv.npy: not a .npy file"));
  EXPECT_THAT(FeaturesError("rows.npy", Npy("<f4", "(4,)", four)),
              HasSubstr("rows.npy has 4 rows, "));
  EXPECT_THAT(FeaturesError("rows.npy", Npy("<f4", "(4,)", four)),
              HasSubstr("good_y.npy 2: the features and the targets need one row each"));
  StatusOr<Dataset> missing =
      Dataset::FromNpy(testing::WriteTempFile("m.npy", "") + ".absent", "y.npy");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status();
}

// A zip of stored (uncompressed) members, as np.savez writes it: local headers and data,
// the central directory, the end record. `method` 8 marks them deflated instead.
std::string Zip(const std::vector<std::pair<std::string, std::string>>& members,
                uint16_t method = 0) {
  std::string out, directory;
  for (const auto& [name, data] : members) {
    const size_t local = out.size();
    out += LittleEndian(0x04034b50, 4) + LittleEndian(20, 2) + LittleEndian(0, 2) +
           LittleEndian(method, 2) + LittleEndian(0, 4) + LittleEndian(0, 4) +
           LittleEndian(data.size(), 4) + LittleEndian(data.size(), 4) +
           LittleEndian(name.size(), 2) + LittleEndian(0, 2) + name + data;
    directory += LittleEndian(0x02014b50, 4) + LittleEndian(20, 2) + LittleEndian(20, 2) +
                 LittleEndian(0, 2) + LittleEndian(method, 2) + LittleEndian(0, 4) +
                 LittleEndian(0, 4) + LittleEndian(data.size(), 4) + LittleEndian(data.size(), 4) +
                 LittleEndian(name.size(), 2) + LittleEndian(0, 2) + LittleEndian(0, 2) +
                 LittleEndian(0, 2) + LittleEndian(0, 2) + LittleEndian(0, 4) +
                 LittleEndian(local, 4) + name;
  }
  const size_t directory_at = out.size();
  out += directory + LittleEndian(0x06054b50, 4) + LittleEndian(0, 4) +
         LittleEndian(members.size(), 2) + LittleEndian(members.size(), 2) +
         LittleEndian(directory.size(), 4) + LittleEndian(directory_at, 4) + LittleEndian(0, 2);
  return out;
}

TEST(NpyTest, NpzArchivesByName) {
  const std::string x = Npy("<f4", "(2, 2)", Bytes<float>({1, 2, 3, 4}));
  const std::string y = Npy("<i8", "(2,)", Bytes<int64_t>({5, 6}));
  const std::string w = Npy("<f8", "(2,)", Bytes<double>({-1, -2}));
  const std::string two = WriteTempFile("two.npz", Zip({{"x.npy", x}, {"y.npy", y}}));
  StatusOr<Dataset> dataset = Dataset::FromNpz(two, "y");
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  std::vector<float> features, targets;
  ReadAll(*dataset, &features, &targets);
  EXPECT_THAT(features, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(targets, ElementsAre(5, 6));
  EXPECT_EQ(dataset->DescribeRow(1), two + ":x: row 1");

  const std::string three =
      WriteTempFile("three.npz", Zip({{"x.npy", x}, {"y.npy", y}, {"w.npy", w}}));
  dataset = Dataset::FromNpz(three, "w", "x");
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  features.clear();
  targets.clear();
  ReadAll(*dataset, &features, &targets);
  EXPECT_THAT(targets, ElementsAre(-1, -2));
  EXPECT_THAT(Dataset::FromNpz(three, "w").status().message(),
              HasSubstr("three.npz: name the features' array (--features=NAME; the archive "
                        "holds x, y, w)"));
  EXPECT_THAT(Dataset::FromNpz(three, "z").status().message(),
              HasSubstr("three.npz: no array named 'z' (the archive holds x, y, w)"));
  const std::string deflated =
      WriteTempFile("deflated.npz", Zip({{"x.npy", x}, {"y.npy", y}}, /*method=*/8));
  EXPECT_THAT(Dataset::FromNpz(deflated, "y").status().message(),
              HasSubstr("deflated.npz:x: the member is compressed"));
  const std::string zip = Zip({{"x.npy", x}, {"y.npy", y}});
  EXPECT_THAT(Dataset::FromNpz(WriteTempFile("cut.npz", zip.substr(0, zip.size() - 30)), "y")
                  .status()
                  .message(),
              HasSubstr("cut.npz: not a .npz file"));
}

}  // namespace
}  // namespace tower::data
