// Fuzzes the safetensors reader (model/checkpoint/safetensors.h): Parse on the whole input.
//
// Invariants:
//  - an error is DATA_LOSS (the bytes are damaged) and names the source;
//  - a parsed file's tensors each hold product(shape) * element size bytes, have distinct
//    names, and together are exactly the input's data section (sizes add up to the file);
//  - Serialize of a parsed file succeeds (whatever Parse accepts, Save can write back, but
//    for a tensor named "", which only the writer refuses), and parsing that gives the same
//    file; serializing it again gives the same bytes.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "model/checkpoint/safetensors.h"
#include "util/check.h"

namespace {

using tower::checkpoint::File;
using tower::checkpoint::TensorData;

constexpr char kSource[] = "fuzz.safetensors";

bool SameTensor(const TensorData& a, const TensorData& b) {
  return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes;
}

bool SameFile(const File& a, const File& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    if (!SameTensor(a.tensors[i], b.tensors[i])) return false;
  }
  return true;
}

uint64_t HeaderLength(std::string_view bytes) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(bytes[i]);
  return length;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  tower::StatusOr<File> parsed = tower::checkpoint::Parse(bytes, kSource);
  if (!parsed.ok()) {
    TOWER_CHECK(parsed.status().code() == tower::StatusCode::kDataLoss)
        << parsed.status().ToString();
    TOWER_CHECK(parsed.status().message().rfind(std::string(kSource) + ": ", 0) == 0)
        << parsed.status().ToString();
    return 0;
  }
  const File& file = *parsed;

  // The tensors are the data section, exactly.
  TOWER_CHECK(size >= 8);
  const uint64_t header_length = HeaderLength(bytes);
  TOWER_CHECK(header_length <= size - 8);
  uint64_t data_bytes = 0;
  std::set<std::string> names;
  for (const TensorData& tensor : file.tensors) {
    TOWER_CHECK(names.insert(tensor.name).second) << "duplicate tensor " << tensor.name;
    TOWER_CHECK(tensor.name != "__metadata__");
    const size_t element_size = tower::checkpoint::ElementSize(tensor.dtype);
    TOWER_CHECK(element_size > 0);
    uint64_t elements = 1;
    for (int64_t dim : tensor.shape) {
      TOWER_CHECK(dim >= 0);
      // Parse checks this product step by step in this order, so it cannot overflow here.
      elements *= static_cast<uint64_t>(dim);
    }
    TOWER_CHECK(tensor.bytes.size() == elements * element_size)
        << tensor.name << ": " << tensor.bytes.size() << " bytes";
    data_bytes += tensor.bytes.size();
  }
  TOWER_CHECK(8 + header_length + data_bytes == size)
      << "tensors hold " << data_bytes << " bytes, the data section is "
      << size - 8 - header_length;

  // Whatever Parse accepts, Serialize writes, and the result reads back the same. The one
  // exception: the reader takes a tensor named "" (the reference implementation writes and
  // reads such files), which Serialize refuses by design (safetensors.h).
  tower::StatusOr<std::string> written = tower::checkpoint::Serialize(file);
  if (names.count("") > 0) {
    TOWER_CHECK(!written.ok() && written.status().code() == tower::StatusCode::kInvalidArgument &&
                written.status().message().find("empty name") != std::string::npos)
        << written.status().ToString();
    return 0;
  }
  TOWER_CHECK(written.ok()) << "Parse accepts a file that Serialize rejects: "
                            << written.status().ToString();
  TOWER_CHECK(HeaderLength(*written) % 8 == 0) << "the header is not padded to 8 bytes";
  tower::StatusOr<File> again = tower::checkpoint::Parse(*written, "rewritten");
  TOWER_CHECK(again.ok()) << again.status().ToString();
  TOWER_CHECK(SameFile(*again, file));
  tower::StatusOr<std::string> rewritten = tower::checkpoint::Serialize(*again);
  TOWER_CHECK(rewritten.ok()) << rewritten.status().ToString();
  TOWER_CHECK(*rewritten == *written) << "Serialize is not stable";
  return 0;
}
