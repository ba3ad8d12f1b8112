#include "model/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "util/strings.h"

namespace tower::checkpoint {
namespace {

using Json = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference reader's limit
std::atomic<int64_t> fail_after_bytes{-1};

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "F32", 4}, {DType::kF16, "F16", 2}, {DType::kBF16, "BF16", 2},
    {DType::kI32, "I32", 4}, {DType::kI64, "I64", 8}, {DType::kU8, "U8", 1},
    {DType::kF64, "F64", 8},
};

std::string ShapeText(const std::vector<int64_t>& shape) { return "[" + Join(shape, ", ") + "]"; }

// Elements of a shape, or nullopt on a negative dimension or overflow past 2^62.
std::optional<uint64_t> ElementCount(const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && count > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) return std::nullopt;
    count *= static_cast<uint64_t>(d);
  }
  return count;
}

std::string ErrnoText() { return std::strerror(errno); }

// Writes all of `data` to `fd`, honouring the test hook.
bool WriteAll(int fd, const char* data, size_t size) {
  const int64_t limit = fail_after_bytes.exchange(-1);
  size_t allowed = size;
  if (limit >= 0 && static_cast<uint64_t>(limit) < size) allowed = static_cast<size_t>(limit);
  size_t written = 0;
  while (written < allowed) {
    const ssize_t n = ::write(fd, data + written, allowed - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    written += static_cast<size_t>(n);
  }
  if (allowed < size) {
    errno = EIO;
    return false;
  }
  return true;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info.name;
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.name) return info.dtype;
  }
  return std::nullopt;
}

size_t ElementSize(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info.size;
  }
  return 0;
}

const TensorData* File::Find(std::string_view name) const {
  for (const TensorData& tensor : tensors) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

StatusOr<std::string> Serialize(const File& file) {
  Json header = Json::object();
  if (!file.metadata.empty()) {
    Json metadata = Json::object();
    for (const auto& [key, value] : file.metadata) metadata[key] = value;
    header["__metadata__"] = metadata;
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorData& tensor : file.tensors) {
    if (tensor.name.empty() || tensor.name == "__metadata__") {
      return InvalidArgumentError("safetensors: a tensor needs a name (and not __metadata__)");
    }
    if (!names.insert(tensor.name).second) {
      return InvalidArgumentError("safetensors: two tensors are named '" + tensor.name + "'");
    }
    const std::optional<uint64_t> count = ElementCount(tensor.shape);
    if (!count || *count * ElementSize(tensor.dtype) != tensor.bytes.size()) {
      return InvalidArgumentError("safetensors: tensor '" + tensor.name + "' has " +
                                  std::to_string(tensor.bytes.size()) + " bytes, but shape " +
                                  ShapeText(tensor.shape) + " of " +
                                  std::string(DTypeName(tensor.dtype)) + " needs " +
                                  (count ? std::to_string(*count * ElementSize(tensor.dtype))
                                         : std::string("an impossible count")));
    }
    Json entry = Json::object();
    entry["dtype"] = std::string(DTypeName(tensor.dtype));
    entry["shape"] = tensor.shape;
    entry["data_offsets"] = {offset, offset + tensor.bytes.size()};
    header[tensor.name] = entry;
    offset += tensor.bytes.size();
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + json.size() + offset);
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += json;
  for (const TensorData& tensor : file.tensors) {
    out.append(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
  }
  return out;
}

Status Save(const std::string& path, const File& file) {
  TOWER_ASSIGN_OR_RETURN(std::string bytes, Serialize(file));
  std::random_device entropy;
  const std::string temporary = path + ".tmp." + std::to_string(::getpid()) + "." +
                                std::to_string(entropy() % 1000000000u);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return PermissionDeniedError("cannot write checkpoint '" + path + "': creating " +
                                 temporary + ": " + ErrnoText());
  }
  const bool written = WriteAll(fd, bytes.data(), bytes.size());
  const std::string write_error = written ? "" : ErrnoText();
  const bool synced = written && ::fsync(fd) == 0;
  const std::string sync_error = synced || !written ? "" : ErrnoText();
  ::close(fd);
  if (!written || !synced) {
    ::unlink(temporary.c_str());
    return DataLossError("cannot write checkpoint '" + path + "': " +
                         (written ? "fsync: " + sync_error : "write: " + write_error) +
                         " (the previous file, if any, is unchanged)");
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string error = ErrnoText();
    ::unlink(temporary.c_str());
    return DataLossError("cannot write checkpoint '" + path + "': rename: " + error);
  }
  // Make the rename itself durable.
  const int dir = ::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return OkStatus();
}

StatusOr<File> Load(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const std::string error = ErrnoText();
    if (errno == ENOENT) return NotFoundError(path + ": no such checkpoint file");
    return PermissionDeniedError(path + ": cannot open: " + error);
  }
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + ": not a regular file");
  }
  std::string bytes(static_cast<size_t>(info.st_size), '\0');
  size_t read_so_far = 0;
  while (read_so_far < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + read_so_far, bytes.size() - read_so_far);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    read_so_far += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(read_so_far);
  return Parse(bytes, path);
}

StatusOr<File> Parse(std::string_view bytes, std::string_view source) {
  const std::string where(source);
  auto bad = [&where](const std::string& what) { return DataLossError(where + ": " + what); };
  if (bytes.size() < 8) {
    return bad("only " + std::to_string(bytes.size()) +
               " bytes; a safetensors file starts with an 8-byte header length");
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<uint8_t>(bytes[i]);
  if (header_size > kMaxHeaderBytes) {
    return bad("header length " + std::to_string(header_size) + " is over the 100 MB limit "
               "(not a safetensors file?)");
  }
  if (header_size > bytes.size() - 8) {
    return bad("header length " + std::to_string(header_size) + " exceeds the " +
               std::to_string(bytes.size() - 8) + " bytes that follow it (truncated?)");
  }
  const std::string_view text = bytes.substr(8, header_size);
  // Duplicate top-level keys are an error (JSON parsers would silently keep one).
  std::set<std::string> keys;
  std::string duplicate;
  Json::parser_callback_t on_event = [&](int depth, nlohmann::json::parse_event_t event,
                                         Json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      if (!keys.insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  const Json header = Json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/false);
  if (header.is_discarded()) return bad("the header is not valid JSON");
  if (!header.is_object()) return bad("the header is not a JSON object");
  if (!duplicate.empty()) return bad("the header names '" + duplicate + "' twice");

  File file;
  struct Entry {
    uint64_t begin, end;
    TensorData tensor;
  };
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) return bad("__metadata__ is not an object");
      for (const auto& [key, item] : value.items()) {
        if (!item.is_string()) return bad("__metadata__ value of '" + key + "' is not a string");
        file.metadata[key] = item.get<std::string>();
      }
      continue;
    }
    const std::string tensor = "tensor '" + name + "'";
    if (!value.is_object()) return bad(tensor + " is not an object");
    if (!value.contains("dtype") || !value["dtype"].is_string()) {
      return bad(tensor + " has no string dtype");
    }
    const std::optional<DType> dtype = ParseDType(value["dtype"].get<std::string>());
    if (!dtype) return bad(tensor + " has unknown dtype '" + value["dtype"].get<std::string>() + "'");
    if (!value.contains("shape") || !value["shape"].is_array()) {
      return bad(tensor + " has no shape array");
    }
    std::vector<int64_t> shape;
    for (const Json& d : value["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 62)) {
        return bad(tensor + " has a shape entry that is not a non-negative integer");
      }
      shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
    }
    const std::optional<uint64_t> count = ElementCount(shape);
    if (!count) return bad(tensor + " has shape " + ShapeText(shape) + ", too large");
    if (!value.contains("data_offsets") || !value["data_offsets"].is_array() ||
        value["data_offsets"].size() != 2 || !value["data_offsets"][0].is_number_unsigned() ||
        !value["data_offsets"][1].is_number_unsigned()) {
      return bad(tensor + " needs data_offsets [begin, end] of non-negative integers");
    }
    const uint64_t begin = value["data_offsets"][0].get<uint64_t>();
    const uint64_t end = value["data_offsets"][1].get<uint64_t>();
    if (end < begin) {
      return bad(tensor + ": data_offsets [" + std::to_string(begin) + ", " +
                 std::to_string(end) + "] are reversed");
    }
    const uint64_t needed = *count * ElementSize(*dtype);
    if (end - begin != needed) {
      return bad(tensor + ": data_offsets [" + std::to_string(begin) + ", " +
                 std::to_string(end) + "] hold " + std::to_string(end - begin) +
                 " bytes but shape " + ShapeText(shape) + " of " +
                 std::string(DTypeName(*dtype)) + " needs " + std::to_string(needed));
    }
    entries.push_back(Entry{begin, end, TensorData{name, *dtype, std::move(shape), {}}});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  const uint64_t data_size = bytes.size() - 8 - header_size;
  uint64_t expected = 0;
  for (const Entry& entry : entries) {
    if (entry.begin < expected) {
      return bad("tensor '" + entry.tensor.name + "' overlaps the tensor before it (offset " +
                 std::to_string(entry.begin) + " < " + std::to_string(expected) + ")");
    }
    if (entry.begin > expected) {
      return bad("a gap of " + std::to_string(entry.begin - expected) +
                 " bytes before tensor '" + entry.tensor.name + "'");
    }
    expected = entry.end;
  }
  if (expected > data_size) {
    return bad("truncated: the header promises " + std::to_string(expected) +
               " bytes of data, the file has " + std::to_string(data_size));
  }
  if (expected < data_size) {
    return bad(std::to_string(data_size - expected) + " bytes of data follow the last tensor");
  }
  const char* data = bytes.data() + 8 + header_size;
  for (Entry& entry : entries) {
    entry.tensor.bytes.assign(data + entry.begin, data + entry.end);
    file.tensors.push_back(std::move(entry.tensor));
  }
  return file;
}

TensorData FromFloats(std::string name, std::vector<int64_t> shape,
                      const std::vector<float>& values) {
  TensorData tensor;
  tensor.name = std::move(name);
  tensor.dtype = DType::kF32;
  tensor.shape = std::move(shape);
  tensor.bytes.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
  return tensor;
}

StatusOr<std::vector<float>> ToFloats(const TensorData& tensor) {
  if (tensor.dtype != DType::kF32) {
    return InvalidArgumentError("tensor '" + tensor.name + "' is " +
                                std::string(DTypeName(tensor.dtype)) + ", not F32");
  }
  std::vector<float> values(tensor.bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), tensor.bytes.data(), tensor.bytes.size());
  return values;
}

namespace internal {
void FailNextSaveAfterBytesForTesting(int64_t bytes) { fail_after_bytes.store(bytes); }
}  // namespace internal

}  // namespace tower::checkpoint
