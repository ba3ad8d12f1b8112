#include "data/npy.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "util/strings.h"

namespace tower::data {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

uint64_t LoadLittleEndian(const char* bytes, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i) {
    value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  return value;
}

void SkipSpaces(std::string_view text, size_t* at) {
  while (*at < text.size() && (text[*at] == ' ' || text[*at] == '\t')) ++*at;
}

// The text of the value of `key` in the header's Python dict literal, up to (not including)
// the comma or brace that ends it; "" when the key is missing.
std::string_view DictValue(std::string_view dict, std::string_view key) {
  for (const char quote : {'\'', '"'}) {
    const std::string quoted = std::string(1, quote) + std::string(key) + quote;
    size_t at = dict.find(quoted);
    if (at == std::string_view::npos) continue;
    at += quoted.size();
    SkipSpaces(dict, &at);
    if (at >= dict.size() || dict[at] != ':') return {};
    ++at;
    SkipSpaces(dict, &at);
    const size_t start = at;
    const char open = at < dict.size() ? dict[at] : '\0';
    if (open == '(' || open == '[') {
      const size_t close = dict.find(open == '(' ? ')' : ']', at);
      return close == std::string_view::npos ? std::string_view()
                                             : dict.substr(start, close + 1 - start);
    }
    if (open == '\'' || open == '"') {
      const size_t close = dict.find(open, at + 1);
      return close == std::string_view::npos ? std::string_view()
                                             : dict.substr(start, close + 1 - start);
    }
    while (at < dict.size() && dict[at] != ',' && dict[at] != '}') ++at;
    size_t end = at;
    while (end > start && dict[end - 1] == ' ') --end;
    return dict.substr(start, end - start);
  }
  return {};
}

// '<f4' and the like into `header`.
Status ParseDescr(std::string_view descr, const std::string& name, NpyHeader* header) {
  const std::string what = name + ": dtype " + Printable(descr) + " ";
  if (descr.empty() || descr[0] == '[') {
    return InvalidArgumentError(what +
                                "is a structured dtype: save a plain numeric array "
                                "(np.save(path, np.asarray(a, dtype=np.float32)))");
  }
  if (descr.size() < 4 || (descr[0] != '\'' && descr[0] != '"')) {
    return InvalidArgumentError(name + ": the header's 'descr' is not a dtype string");
  }
  const std::string_view code = descr.substr(1, descr.size() - 2);  // without the quotes
  const char order = code[0];
  const char kind = code[1];
  int bytes = 0;
  for (size_t i = 2; i < code.size(); ++i) {
    if (code[i] < '0' || code[i] > '9' || bytes > 1000) {
      bytes = -1;
      break;
    }
    bytes = bytes * 10 + (code[i] - '0');
  }
  const bool numeric =
      (kind == 'f' && (bytes == 4 || bytes == 8)) ||
      ((kind == 'i' || kind == 'u') && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8)) ||
      (kind == 'b' && bytes == 1);
  if (kind == 'O') {
    return InvalidArgumentError(what +
                                "holds Python objects (dtype=object), which cannot be "
                                "read: save a numeric array (a.astype(np.float32))");
  }
  if (!numeric || (order != '<' && order != '>' && order != '|' && order != '=')) {
    return InvalidArgumentError(what +
                                "is not supported: save float32, float64, integers or "
                                "booleans (a.astype(np.float32))");
  }
  if (order == '>' && bytes > 1) {
    return InvalidArgumentError(what +
                                "is big-endian: save it little-endian "
                                "(a.astype(a.dtype.newbyteorder('<')))");
  }
  header->kind = kind;
  header->item_bytes = bytes;
  return OkStatus();
}

// "(3, 2)", "(3,)", "()" into `shape`.
Status ParseShape(std::string_view text, const std::string& name, std::vector<int64_t>* shape) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
    return InvalidArgumentError(name + ": the header's 'shape' is not a tuple");
  }
  size_t at = 1;
  while (true) {
    SkipSpaces(text, &at);
    if (text[at] == ')') break;
    int64_t value = 0;
    size_t digits = 0;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9' && digits < 18) {
      value = value * 10 + (text[at++] - '0');
      ++digits;
    }
    if (text[at] == 'L') ++at;  // Python 2's long integers
    if (digits == 0) return InvalidArgumentError(name + ": the header's 'shape' is not valid");
    shape->push_back(value);
    SkipSpaces(text, &at);
    if (text[at] == ',') ++at;
  }
  return OkStatus();
}

template <typename T>
void ConvertAs(const uint8_t* src, int64_t count, float* dst) {
  for (int64_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, src + i * sizeof(T), sizeof(T));  // the mapping need not be aligned
    dst[i] = static_cast<float>(value);
  }
}

// `count` values of the array's dtype at `src` into floats at `dst`.
void Convert(const NpyHeader& header, const uint8_t* src, int64_t count, float* dst) {
  switch (header.kind) {
    case 'f':
      if (header.item_bytes == 4) {
        std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
      } else {
        ConvertAs<double>(src, count, dst);
      }
      return;
    case 'i':
      if (header.item_bytes == 1) return ConvertAs<int8_t>(src, count, dst);
      if (header.item_bytes == 2) return ConvertAs<int16_t>(src, count, dst);
      if (header.item_bytes == 4) return ConvertAs<int32_t>(src, count, dst);
      return ConvertAs<int64_t>(src, count, dst);
    default:  // 'u', and 'b' (one byte, 0 or 1)
      if (header.item_bytes == 1) return ConvertAs<uint8_t>(src, count, dst);
      if (header.item_bytes == 2) return ConvertAs<uint16_t>(src, count, dst);
      if (header.item_bytes == 4) return ConvertAs<uint32_t>(src, count, dst);
      return ConvertAs<uint64_t>(src, count, dst);
  }
}

// A .npz member, as its zip central directory entry says.
struct ZipMember {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;  // 0: stored
  uint64_t compressed_bytes = 0;
  uint64_t local_header = 0;  // offset of its local file header
};

// Replaces the 0xFFFFFFFF fields of `member` (compressed size, local header offset) with the
// values of its zip64 extra field, which holds them in the order uncompressed size, compressed
// size, offset, each only when its 32-bit field is 0xFFFFFFFF.
void ReadZip64Extra(std::string_view extra, bool uncompressed_is_64, bool compressed_is_64,
                    bool offset_is_64, ZipMember* member) {
  size_t at = 0;
  while (at + 4 <= extra.size()) {
    const uint64_t id = LoadLittleEndian(extra.data() + at, 2);
    const uint64_t size = LoadLittleEndian(extra.data() + at + 2, 2);
    if (id == 0x0001) {
      size_t field = at + 4;
      const size_t end = std::min(extra.size(), field + size);
      if (uncompressed_is_64 && field + 8 <= end) field += 8;
      if (compressed_is_64 && field + 8 <= end) {
        member->compressed_bytes = LoadLittleEndian(extra.data() + field, 8);
        field += 8;
      }
      if (offset_is_64 && field + 8 <= end)
        member->local_header = LoadLittleEndian(extra.data() + field, 8);
      return;
    }
    at += 4 + size;
  }
}

// The central directory of the zip `file`: where it is and how many entries it has.
Status FindCentralDirectory(std::string_view file, const std::string& path, uint64_t* offset,
                            uint64_t* entries) {
  const std::string bad = path +
                          ": not a .npz file (no zip directory at its end; write it "
                          "with np.savez)";
  if (file.size() < 22) return InvalidArgumentError(bad);
  // The end of central directory record: 22 bytes and a comment of up to 65535.
  size_t end = file.size() - 22;
  const size_t lowest = file.size() > 22 + 65535 ? file.size() - 22 - 65535 : 0;
  while (LoadLittleEndian(file.data() + end, 4) != 0x06054b50) {
    if (end == lowest) return InvalidArgumentError(bad);
    --end;
  }
  *entries = LoadLittleEndian(file.data() + end + 10, 2);
  *offset = LoadLittleEndian(file.data() + end + 16, 4);
  if ((*entries == 0xFFFF || *offset == 0xFFFFFFFF) && end >= 20 &&
      LoadLittleEndian(file.data() + end - 20, 4) == 0x07064b50) {
    // Zip64: a locator just before points at the zip64 end record.
    const uint64_t record = LoadLittleEndian(file.data() + end - 20 + 8, 8);
    if (file.size() < 56 || record > file.size() - 56 ||
        LoadLittleEndian(file.data() + record, 4) != 0x06064b50) {
      return InvalidArgumentError(bad);
    }
    *entries = LoadLittleEndian(file.data() + record + 32, 8);
    *offset = LoadLittleEndian(file.data() + record + 48, 8);
  }
  if (*offset > file.size()) return InvalidArgumentError(bad);
  return OkStatus();
}

StatusOr<std::vector<ZipMember>> ReadCentralDirectory(std::string_view file,
                                                      const std::string& path) {
  uint64_t at = 0, entries = 0;
  TOWER_RETURN_IF_ERROR(FindCentralDirectory(file, path, &at, &entries));
  std::vector<ZipMember> members;
  for (uint64_t i = 0; i < entries; ++i) {
    if (at + 46 > file.size() || LoadLittleEndian(file.data() + at, 4) != 0x02014b50) {
      return InvalidArgumentError(path + ": a damaged zip directory (entry " + std::to_string(i) +
                                  ")");
    }
    const char* entry = file.data() + at;
    ZipMember member;
    member.flags = static_cast<uint16_t>(LoadLittleEndian(entry + 8, 2));
    member.method = static_cast<uint16_t>(LoadLittleEndian(entry + 10, 2));
    member.compressed_bytes = LoadLittleEndian(entry + 20, 4);
    const uint64_t uncompressed = LoadLittleEndian(entry + 24, 4);
    const uint64_t name_bytes = LoadLittleEndian(entry + 28, 2);
    const uint64_t extra_bytes = LoadLittleEndian(entry + 30, 2);
    const uint64_t comment_bytes = LoadLittleEndian(entry + 32, 2);
    member.local_header = LoadLittleEndian(entry + 42, 4);
    if (at + 46 + name_bytes + extra_bytes > file.size()) {
      return InvalidArgumentError(path + ": a damaged zip directory (entry " + std::to_string(i) +
                                  ")");
    }
    member.name = std::string(entry + 46, name_bytes);
    ReadZip64Extra(std::string_view(entry + 46 + name_bytes, extra_bytes),
                   uncompressed == 0xFFFFFFFF, member.compressed_bytes == 0xFFFFFFFF,
                   member.local_header == 0xFFFFFFFF, &member);
    members.push_back(std::move(member));
    at += 46 + name_bytes + extra_bytes + comment_bytes;
  }
  return members;
}

}  // namespace

StatusOr<std::vector<NpyArray>> OpenNpz(const std::string& path) {
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::Open(path));
  TOWER_ASSIGN_OR_RETURN(std::vector<NpyArray> arrays, ParseNpz(file->view(), path));
  for (NpyArray& array : arrays) array.file = file;
  return arrays;
}

StatusOr<std::vector<NpyArray>> ParseNpz(std::string_view npz, const std::string& path) {
  TOWER_ASSIGN_OR_RETURN(std::vector<ZipMember> members, ReadCentralDirectory(npz, path));
  std::vector<NpyArray> arrays;
  for (const ZipMember& member : members) {
    std::string name = member.name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    const std::string where = path + ":" + Printable(name);
    if (member.method != 0 || (member.flags & 1) != 0) {
      return InvalidArgumentError(where + ": the member is compressed or encrypted (zip method " +
                                  std::to_string(member.method) +
                                  "): save with np.savez, not "
                                  "np.savez_compressed, to read it in place");
    }
    const uint64_t local = member.local_header;
    // `local` may be any 64-bit value (a zip64 extra field's): local + 30 could wrap.
    if (local > npz.size() || npz.size() - local < 30 ||
        LoadLittleEndian(npz.data() + local, 4) != 0x04034b50) {
      return InvalidArgumentError(where + ": a damaged zip entry (no local header)");
    }
    const uint64_t start = local + 30 + LoadLittleEndian(npz.data() + local + 26, 2) +
                           LoadLittleEndian(npz.data() + local + 28, 2);
    if (start > npz.size() || member.compressed_bytes > npz.size() - start) {
      return InvalidArgumentError(where +
                                  ": truncated (the member runs past the end of the "
                                  "file: write it again)");
    }
    NpyArray array;
    array.name = where;
    TOWER_ASSIGN_OR_RETURN(array.header,
                           ParseNpyHeader(npz.substr(start, member.compressed_bytes), where));
    array.offset = start + array.header.data_offset;
    arrays.push_back(std::move(array));
  }
  if (arrays.empty()) return InvalidArgumentError(path + ": the archive holds no arrays");
  return arrays;
}

StatusOr<NpyHeader> ParseNpyHeader(std::string_view npy, const std::string& name) {
  if (npy.size() < kMagicBytes + 4 || std::memcmp(npy.data(), kMagic, kMagicBytes) != 0) {
    return InvalidArgumentError(name +
                                ": not a .npy file (it does not start with \\x93NUMPY; "
                                "write it with np.save)");
  }
  const int major = static_cast<uint8_t>(npy[6]);
  if (major < 1 || major > 3) {
    return InvalidArgumentError(name + ": .npy format version " + std::to_string(major) +
                                ".x is not supported (1.0 to 3.0 are)");
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagicBytes + 2 + length_bytes;
  if (npy.size() < prefix) return InvalidArgumentError(name + ": truncated in its header");
  const size_t header_bytes = LoadLittleEndian(npy.data() + 8, static_cast<int>(length_bytes));
  if (header_bytes > npy.size() - prefix) {
    return InvalidArgumentError(name + ": truncated in its header (" + std::to_string(npy.size()) +
                                " bytes)");
  }
  const std::string_view dict = npy.substr(prefix, header_bytes);
  NpyHeader header;
  header.data_offset = prefix + header_bytes;
  const std::string_view fortran = DictValue(dict, "fortran_order");
  if (fortran != "False") {
    return InvalidArgumentError(
        name + ": " +
        (fortran == "True" ? "the array is in Fortran "
                             "order: save it in C order (np.save(path, np.ascontiguousarray(a)))"
                           : "the header has no valid 'fortran_order'"));
  }
  TOWER_RETURN_IF_ERROR(ParseDescr(DictValue(dict, "descr"), name, &header));
  TOWER_RETURN_IF_ERROR(ParseShape(DictValue(dict, "shape"), name, &header.shape));
  if (header.shape.empty() || header.shape.size() > 2) {
    return InvalidArgumentError(name + ": the array has " + std::to_string(header.shape.size()) +
                                " dimensions; give 1 (one value per row) or 2 (rows, columns)");
  }
  uint64_t values = 1;
  for (const int64_t dim : header.shape) {
    if (__builtin_mul_overflow(values, static_cast<uint64_t>(dim), &values)) values = UINT64_MAX;
  }
  const uint64_t data_bytes = npy.size() - header.data_offset;
  uint64_t want = 0;
  if (__builtin_mul_overflow(values, static_cast<uint64_t>(header.item_bytes), &want) ||
      want != data_bytes) {
    return InvalidArgumentError(
        name + ": the shape (" + std::to_string(header.shape[0]) +
        (header.shape.size() == 2 ? ", " + std::to_string(header.shape[1]) : std::string(",")) +
        ") of " + std::to_string(header.item_bytes) + "-byte values needs " + std::to_string(want) +
        " bytes of data, the file has " + std::to_string(data_bytes) +
        (want > data_bytes ? " (truncated: write it again)" : ""));
  }
  return header;
}

StatusOr<NpyArray> OpenNpy(const std::string& path) {
  NpyArray array;
  array.name = path;
  TOWER_ASSIGN_OR_RETURN(array.file, MappedFile::Open(path));
  TOWER_ASSIGN_OR_RETURN(array.header, ParseNpyHeader(array.file->view(), path));
  array.offset = array.header.data_offset;
  return array;
}

StatusOr<std::shared_ptr<const NpySource>> NpySource::Create(NpyArray features, NpyArray targets) {
  if (features.rows() < 1 || features.columns() < 1) {
    return InvalidArgumentError(features.name + ": no rows or no columns: nothing to train on");
  }
  if (targets.rows() != features.rows()) {
    return InvalidArgumentError(features.name + " has " + std::to_string(features.rows()) +
                                " rows, " + targets.name + " " + std::to_string(targets.rows()) +
                                ": the features and the targets need one row each");
  }
  if (targets.columns() < 1) return InvalidArgumentError(targets.name + ": no columns");
  std::shared_ptr<NpySource> source(new NpySource());
  source->schema_ = DefaultSchema(features.columns(), targets.columns());
  source->features_ = std::move(features);
  source->targets_ = std::move(targets);
  return std::shared_ptr<const NpySource>(std::move(source));
}

namespace {

// Rows [first, first + count) of `array` as float32 into `out`: read straight into `out` for
// float32, else through `scratch` and converted.
Status ReadRows(const NpyArray& array, int64_t first, int64_t count, std::vector<uint8_t>* scratch,
                float* out) {
  const int64_t values = count * array.columns();
  const size_t row_bytes = static_cast<size_t>(array.columns()) * array.header.item_bytes;
  const uint64_t offset = array.offset + static_cast<uint64_t>(first) * row_bytes;
  const size_t bytes = static_cast<size_t>(count) * row_bytes;
  if (array.header.kind == 'f' && array.header.item_bytes == 4) {
    return array.file->ReadAt(offset, bytes, out);
  }
  scratch->resize(bytes);
  TOWER_RETURN_IF_ERROR(array.file->ReadAt(offset, bytes, scratch->data()));
  Convert(array.header, scratch->data(), values, out);
  return OkStatus();
}

}  // namespace

Status NpySource::Read(const int64_t* rows, int64_t n, float* features, float* targets) const {
  std::vector<uint8_t> scratch;
  int64_t i = 0;
  while (i < n) {
    // The run rows[i..j) of consecutive indices is contiguous in both files: one read each.
    const int64_t first = rows[i];
    int64_t j = i + 1;
    while (j < n && rows[j] == first + (j - i)) ++j;
    TOWER_RETURN_IF_ERROR(
        ReadRows(features_, first, j - i, &scratch, features + i * features_.columns()));
    TOWER_RETURN_IF_ERROR(
        ReadRows(targets_, first, j - i, &scratch, targets + i * targets_.columns()));
    i = j;
  }
  return OkStatus();
}

std::string NpySource::DescribeRow(int64_t row) const {
  return features_.name + ": row " + std::to_string(row);
}

}  // namespace tower::data
