// A decoder of tf.train.Example (TensorFlow's example.proto and feature.proto) straight from
// the protobuf wire format, without libprotobuf:
//
//   Example   { Features features = 1; }
//   Features  { map<string, Feature> feature = 1; }   // entries { key = 1; value = 2; }
//   Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
//                            Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }
//   FloatList { repeated float value = 1 [packed = true]; }
//   Int64List { repeated int64 value = 1 [packed = true]; }
//
// Packed and unpacked repeated values are both read (a parser must accept either), unknown
// fields are skipped, and as in protobuf a later map entry of the same key, or a later other
// member of the oneof, replaces an earlier one (the same list twice concatenates). Errors are
// InvalidArgument and say what is malformed
// ("a length runs past the end of the Feature"); the caller adds the file and record.
#ifndef TOWER_DATA_EXAMPLE_PROTO_H_
#define TOWER_DATA_EXAMPLE_PROTO_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tower::data {

enum class FeatureKind { kNone, kBytes, kFloat, kInt64 };

// "bytes_list", "float_list", "int64_list", or "no value" for kNone.
const char* FeatureKindName(FeatureKind kind);

// One Feature's values. Decoding into the same object again reuses its vectors' memory.
struct FeatureList {
  FeatureKind kind = FeatureKind::kNone;  // kNone: a Feature without any of the three lists
  std::vector<float> floats;              // float_list
  std::vector<int64_t> int64s;            // int64_list
  int64_t bytes_values = 0;               // bytes_list: how many (their contents are skipped)

  int64_t size() const;
};

// Calls `visit` with each (name, serialized Feature) of a serialized Example, in the order of
// the wire (a writer's map order, not sorted). A duplicate name is visited twice, the later
// one last.
Status ForEachFeature(
    std::string_view example,
    const std::function<Status(std::string_view name, std::string_view feature)>& visit);

// Decodes a serialized Feature into `out`.
Status DecodeFeature(std::string_view feature, FeatureList* out);

}  // namespace tower::data

#endif  // TOWER_DATA_EXAMPLE_PROTO_H_
