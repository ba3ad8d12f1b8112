// NumPy arrays on disk: .npy files (np.save) and .npz archives of them (np.savez), read in
// place (data/mapped_file.h): the header is parsed at open, and each batch's rows are read
// (one read per run of consecutive rows: a pass in order through a read-ahead buffer,
// shuffled rows out of the mapping) and converted to float32 then; resident memory stays
// under MappedFile's window however large the file.
//
// Read: C-order ("fortran_order": False) arrays of 1 or 2 dimensions, little-endian or
// single-byte dtypes float32/float64 ('<f4', '<f8'), signed and unsigned integers of 1 to 8
// bytes ('|i1'.. '<i8', '|u1'.. '<u8') and booleans ('|b1'); format versions 1.0, 2.0 and
// 3.0. A 1-D array of n values is n rows of one column. Anything else (Fortran order,
// dtype=object, strings, structured or big-endian dtypes, 3 or more dimensions, a file whose
// size is not what its shape says, a compressed .npz member from np.savez_compressed) is an
// InvalidArgument error naming the file and what to do.
#ifndef TOWER_DATA_NPY_H_
#define TOWER_DATA_NPY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/mapped_file.h"
#include "data/source.h"
#include "util/statusor.h"

namespace tower::data {

// A .npy header, parsed.
struct NpyHeader {
  char kind = 'f';     // 'f' float, 'i' signed, 'u' unsigned, 'b' bool
  int item_bytes = 4;  // bytes per value
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // where the values start, from the start of the .npy bytes
};

// Parses the header of the .npy bytes `npy` (the whole file, or a .npz member); `name`
// starts every error message. Checks that `npy` holds exactly the values the shape says.
StatusOr<NpyHeader> ParseNpyHeader(std::string_view npy, const std::string& name);

// One array: a .npy file, or a member of a .npz archive, mapped.
struct NpyArray {
  std::string name;  // "x.npy", or "d.npz:x" for a member
  std::shared_ptr<const MappedFile> file;
  size_t offset = 0;  // where the array's values start in the file
  NpyHeader header;

  int64_t rows() const { return header.shape.empty() ? 0 : header.shape[0]; }
  int64_t columns() const { return header.shape.size() == 2 ? header.shape[1] : 1; }
};

// Opens a .npy file.
StatusOr<NpyArray> OpenNpy(const std::string& path);
// The members of a .npz archive (np.savez: a zip of uncompressed .npy files), by name
// without ".npy", in archive order.
StatusOr<std::vector<NpyArray>> OpenNpz(const std::string& path);
// OpenNpz's parse of the archive's bytes `npz` (`path` starts every error message): the
// members' names, headers and offsets into `npz`, with no `file` (OpenNpz adds the mapping).
// Apart from a file, for tests/fuzz/npy_fuzzer.cc.
StatusOr<std::vector<NpyArray>> ParseNpz(std::string_view npz, const std::string& path);

class NpySource final : public Source {
 public:
  // `features`: [rows] or [rows, feature_dim]; `targets`: [rows] or [rows, target_dim], the
  // same rows. Schema: x0.. and y (DefaultSchema).
  static StatusOr<std::shared_ptr<const NpySource>> Create(NpyArray features, NpyArray targets);

  int64_t num_rows() const override { return features_.rows(); }
  int64_t feature_dim() const override { return features_.columns(); }
  int64_t target_dim() const override { return targets_.columns(); }
  const Schema& schema() const override { return schema_; }
  Status Read(const int64_t* rows, int64_t n, float* features, float* targets) const override;
  // "x.npy: row 12" (0-based, as NumPy indexes).
  std::string DescribeRow(int64_t row) const override;

 private:
  NpySource() = default;

  NpyArray features_;
  NpyArray targets_;
  Schema schema_;
};

}  // namespace tower::data

#endif  // TOWER_DATA_NPY_H_
