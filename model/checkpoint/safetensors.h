// The safetensors format (https://github.com/huggingface/safetensors), on the host:
//
//   [8 bytes: N, little-endian u64][N bytes: UTF-8 JSON header][data section]
//   header = {"__metadata__": {"format": "tower"},
//             "layers.0.kernel": {"dtype": "F32", "shape": [256, 1024],
//                                 "data_offsets": [0, 1048576]}, ...}
//
// Offsets are relative to the start of the data section, which the tensors must cover
// exactly (no gaps, no overlaps, nothing after the last one). Save formats the header as the
// reference writer does: compact JSON, "__metadata__" first, each tensor as {"dtype",
// "shape", "data_offsets"}, padded with spaces to a multiple of 8 bytes. Unlike it, Save
// keeps the tensors in the order given (header and data alike). Python's `safetensors` reads
// the result: readers sort by offsets, whatever the key order.
//
// Save is atomic: it writes a temporary file next to `path` (same directory, so the rename
// cannot cross file systems), fsyncs it, renames it over `path` and fsyncs the directory. A
// failure or crash leaves the previous file or the new one, never part of one.
//
// Load and Parse check everything a damaged or hostile file can get wrong and say what,
// naming the file: they never crash, and their memory stays proportional to the file's real
// size (the header, at most 100 MB, is parsed as a stream without a JSON tree, and its
// offsets are checked against the real size before any tensor is allocated or read).
// Errors in a file's contents are DATA_LOSS; a missing file is NOT_FOUND; other I/O errors
// carry the errno text.
//
// Alignment: the data section starts at a multiple of 8, and tensors are packed in the
// order given. The reference writer sorts tensors by descending element size so that each
// starts at a multiple of its own; callers that mix element sizes and want that should put
// the larger ones first (readers, Python's included, accept either).
#ifndef TOWER_MODEL_CHECKPOINT_SAFETENSORS_H_
#define TOWER_MODEL_CHECKPOINT_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/checkpoint/file.h"
#include "util/statusor.h"

namespace tower::checkpoint {

// The bytes of a safetensors file holding `file`: tensors in the order given, header padded
// with spaces to a multiple of 8. InvalidArgument if a name is empty, "__metadata__", a
// duplicate or not valid UTF-8 (metadata too), or a tensor's bytes do not match its shape.
StatusOr<std::string> Serialize(const File& file);

// Writes `file` to `path` atomically (see the top of this file): a temporary
// "<path>.tmp.<pid>.<random>" in the same directory, fsync, rename over `path`, fsync of the
// directory. On any failure the temporary is removed and `path` is untouched. Checks `file`
// as Serialize does before creating anything. If `path` is a symbolic link, the link itself
// is replaced, not its target.
Status Save(const std::string& path, const File& file);

// Reads and validates a safetensors file. NotFound if it does not exist.
StatusOr<File> Load(const std::string& path);

// The same checks, on a whole file's bytes in memory (tests, fuzzing); `source_name` stands
// for the path in error messages.
StatusOr<File> Parse(std::string_view bytes, std::string_view source_name = "<memory>");

// An F32 tensor holding `values` (their count should match `shape`; Save checks it).
TensorData FromFloats(std::string name, std::vector<int64_t> shape,
                      const std::vector<float>& values);
// The values of an F32 tensor; InvalidArgument for another dtype or bytes that do not
// match the shape.
StatusOr<std::vector<float>> ToFloats(const TensorData& tensor);

}  // namespace tower::checkpoint

#endif  // TOWER_MODEL_CHECKPOINT_SAFETENSORS_H_
