#include "model/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "model/checkpoint/header.h"
#include "util/file.h"

// Tensor bytes are little-endian in the file and are copied as they are.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "model/checkpoint assumes a little-endian host");

namespace tower::checkpoint {
namespace {

using internal::ByteSize;
using internal::Entry;
using internal::Header;
using internal::ShapeText;
using internal::TensorLabel;

// Reads exactly `size` bytes at `offset`.
Status ReadAt(int fd, uint64_t offset, char* data, size_t size, const std::string& where) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, data + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      return StatusFromErrno(error, where + ": reading");
    }
    if (n == 0) {
      return DataLossError(where + ": truncated while reading: the file ends at byte " +
                           std::to_string(offset + done) + " (was it shrunk meanwhile?)");
    }
    done += static_cast<size_t>(n);
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::string> Serialize(const File& file) {
  TOWER_ASSIGN_OR_RETURN(std::string out, internal::EncodeHeader(file));
  size_t total = out.size();
  for (const TensorData& tensor : file.tensors) total += tensor.bytes.size();
  out.reserve(total);
  for (const TensorData& tensor : file.tensors) {
    out.append(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
  }
  return out;
}

Status Save(const std::string& path, const File& file) {
  const std::string context = "saving " + path;
  StatusOr<std::string> header = internal::EncodeHeader(file);
  if (!header.ok()) return header.status().WithContext(context);
  return WriteFileAtomically(path, context, [&](const AppendBytes& append) -> Status {
    TOWER_RETURN_IF_ERROR(append(header->data(), header->size()));
    for (const TensorData& tensor : file.tensors) {
      TOWER_RETURN_IF_ERROR(append(tensor.bytes.data(), tensor.bytes.size()));
    }
    return OkStatus();
  });
}

StatusOr<File> Load(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not hang (it is rejected below).
  const int raw_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (raw_fd < 0) {
    const int error = errno;
    return StatusFromErrno(error, path + ": cannot open");
  }
  ScopedFd fd(raw_fd);
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) {
    const int error = errno;
    return StatusFromErrno(error, path + ": fstat");
  }
  if (S_ISDIR(info.st_mode)) {
    return InvalidArgumentError(path + ": is a directory, not a safetensors file");
  }
  if (!S_ISREG(info.st_mode)) {
    return InvalidArgumentError(path + ": not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(info.st_size);

  char prefix[8] = {};
  const size_t prefix_size = static_cast<size_t>(std::min<uint64_t>(file_size, 8));
  TOWER_RETURN_IF_ERROR(ReadAt(fd.get(), 0, prefix, prefix_size, path));
  TOWER_ASSIGN_OR_RETURN(
      const uint64_t header_length,
      internal::HeaderLength(std::string_view(prefix, prefix_size), file_size, path));
  std::string json(static_cast<size_t>(header_length), '\0');
  TOWER_RETURN_IF_ERROR(ReadAt(fd.get(), 8, json.data(), json.size(), path));
  TOWER_ASSIGN_OR_RETURN(Header header,
                         internal::ParseHeader(json, file_size - 8 - header_length, path));

  // The header's offsets now match the file's real size, so these allocations are bounded
  // by it.
  File file;
  file.metadata = std::move(header.metadata);
  file.tensors.reserve(header.entries.size());
  for (Entry& entry : header.entries) {
    TensorData& tensor = file.tensors.emplace_back(std::move(entry.tensor));
    tensor.bytes.resize(static_cast<size_t>(entry.end - entry.begin));
    TOWER_RETURN_IF_ERROR(ReadAt(fd.get(), 8 + header_length + entry.begin,
                                 reinterpret_cast<char*>(tensor.bytes.data()), tensor.bytes.size(),
                                 path));
  }
  return file;
}

StatusOr<File> Parse(std::string_view bytes, std::string_view source_name) {
  const std::string where(source_name);
  TOWER_ASSIGN_OR_RETURN(const uint64_t header_length,
                         internal::HeaderLength(bytes.substr(0, 8), bytes.size(), where));
  const std::string_view json = bytes.substr(8, static_cast<size_t>(header_length));
  TOWER_ASSIGN_OR_RETURN(Header header,
                         internal::ParseHeader(json, bytes.size() - 8 - header_length, where));
  const std::string_view data = bytes.substr(8 + static_cast<size_t>(header_length));
  File file;
  file.metadata = std::move(header.metadata);
  file.tensors.reserve(header.entries.size());
  for (Entry& entry : header.entries) {
    TensorData& tensor = file.tensors.emplace_back(std::move(entry.tensor));
    const char* begin = data.data() + entry.begin;
    tensor.bytes.assign(begin, begin + (entry.end - entry.begin));
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
  const std::string label = TensorLabel(tensor.name);
  if (tensor.dtype != DType::kF32) {
    return InvalidArgumentError(label + " is " + std::string(DTypeName(tensor.dtype)) +
                                ", not F32");
  }
  const std::optional<uint64_t> needed = ByteSize(tensor.shape, sizeof(float));
  if (!needed || *needed != tensor.bytes.size()) {
    return InvalidArgumentError(label + ": " + std::to_string(tensor.bytes.size()) +
                                " bytes of data do not match shape " + ShapeText(tensor.shape) +
                                " of F32");
  }
  std::vector<float> values(tensor.bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), tensor.bytes.data(), tensor.bytes.size());
  return values;
}

}  // namespace tower::checkpoint
