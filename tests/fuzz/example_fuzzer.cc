// Fuzzes the tf.train.Example decoder (data/example_proto.h): ForEachFeature over the whole
// input as a serialized Example, and DecodeFeature on each feature it visits.
//
// Invariants:
//  - an error is InvalidArgument, one line, starting "not a tf.train.Example: ";
//  - decoding a feature again into a FeatureList that held the previous one (whose vectors it
//    reuses) gives the same values;
//  - a decoded Example, written again by the small encoder below (its own wire format code, not
//    the decoder's), once with packed and once with unpacked lists, decodes to the same
//    features: the same names in the same order, kinds, and values bit for bit (NaN payloads
//    included) or, for a bytes_list, the same count.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/example_proto.h"
#include "util/check.h"

namespace {

using tower::data::FeatureKind;
using tower::data::FeatureList;

constexpr char kErrorPrefix[] = "not a tf.train.Example: ";

struct Feature {
  std::string name;
  FeatureList list;
};

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (FloatBits(a[i]) != FloatBits(b[i])) return false;
  }
  return true;
}

// Every (name, feature) of `example`, decoded, in wire order.
tower::Status Decode(std::string_view example, std::vector<Feature>* out) {
  out->clear();
  FeatureList reused;  // decodes every feature in turn, as TfRecordSource's scratch does
  return tower::data::ForEachFeature(
      example, [&](std::string_view name, std::string_view feature) -> tower::Status {
        Feature decoded;
        decoded.name = std::string(name);
        TOWER_RETURN_IF_ERROR(tower::data::DecodeFeature(feature, &decoded.list));
        // Again into a list that held the previous feature: reusing it changes nothing.
        TOWER_CHECK_OK(tower::data::DecodeFeature(feature, &reused));
        TOWER_CHECK(reused.kind == decoded.list.kind && reused.int64s == decoded.list.int64s &&
                    reused.bytes_values == decoded.list.bytes_values &&
                    SameBits(reused.floats, decoded.list.floats))
            << "decoding '" << decoded.name << "' twice gives different values";
        out->push_back(std::move(decoded));
        return tower::OkStatus();
      });
}

// The encoder: protobuf's wire format, written here independently of the decoder.
void PutVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void PutTag(uint32_t field, int wire_type, std::string* out) {
  PutVarint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type), out);
}

void PutLengthDelimited(uint32_t field, std::string_view bytes, std::string* out) {
  PutTag(field, 2, out);
  PutVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

void PutFixed32(uint32_t value, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

// A Feature message: one of the three lists (none for kNone).
std::string EncodeFeature(const FeatureList& list, bool packed) {
  std::string values;  // the list message's body
  uint32_t field = 0;  // the Feature's field of that list
  switch (list.kind) {
    case FeatureKind::kBytes:
      field = 1;
      // Only the count is decoded: empty values, as many.
      for (int64_t i = 0; i < list.bytes_values; ++i) PutLengthDelimited(1, "", &values);
      break;
    case FeatureKind::kFloat: {
      field = 2;
      std::string packed_values;
      for (const float value : list.floats) {
        if (!packed) PutTag(1, 5, &values);
        PutFixed32(FloatBits(value), packed ? &packed_values : &values);
      }
      if (packed) PutLengthDelimited(1, packed_values, &values);
      break;
    }
    case FeatureKind::kInt64: {
      field = 3;
      std::string packed_values;
      for (const int64_t value : list.int64s) {
        if (!packed) PutTag(1, 0, &values);
        PutVarint(static_cast<uint64_t>(value), packed ? &packed_values : &values);
      }
      if (packed) PutLengthDelimited(1, packed_values, &values);
      break;
    }
    case FeatureKind::kNone:
      return "";
  }
  std::string feature;
  PutLengthDelimited(field, values, &feature);
  return feature;
}

std::string EncodeExample(const std::vector<Feature>& features, bool packed) {
  std::string map;  // the Features message: one map entry per feature
  for (const Feature& feature : features) {
    std::string entry;
    PutLengthDelimited(1, feature.name, &entry);
    PutLengthDelimited(2, EncodeFeature(feature.list, packed), &entry);
    PutLengthDelimited(1, entry, &map);
  }
  std::string example;
  PutLengthDelimited(1, map, &example);
  return example;
}

void CheckSame(const std::vector<Feature>& want, const std::vector<Feature>& got, const char* how) {
  TOWER_CHECK(want.size() == got.size())
      << how << ": " << got.size() << " features, not " << want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    const FeatureList& a = want[i].list;
    const FeatureList& b = got[i].list;
    TOWER_CHECK(want[i].name == got[i].name) << how << ": feature " << i << "'s name";
    TOWER_CHECK(a.kind == b.kind) << how << ": '" << want[i].name << "' is a "
                                  << tower::data::FeatureKindName(b.kind) << ", not a "
                                  << tower::data::FeatureKindName(a.kind);
    TOWER_CHECK(a.size() == b.size() && a.bytes_values == b.bytes_values && a.int64s == b.int64s &&
                SameBits(a.floats, b.floats))
        << how << ": '" << want[i].name << "' has other values (" << b.size() << ", not "
        << a.size() << ")";
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view example(reinterpret_cast<const char*>(data), size);
  std::vector<Feature> features;
  const tower::Status status = Decode(example, &features);
  if (!status.ok()) {
    TOWER_CHECK(status.code() == tower::StatusCode::kInvalidArgument) << status.ToString();
    TOWER_CHECK(status.message().rfind(kErrorPrefix, 0) == 0) << status.ToString();
    TOWER_CHECK(status.message().find('\n') == std::string::npos) << status.ToString();
    return 0;
  }
  for (const bool packed : {true, false}) {
    const char* how = packed ? "re-encoded packed" : "re-encoded unpacked";
    std::vector<Feature> again;
    const tower::Status decoded = Decode(EncodeExample(features, packed), &again);
    TOWER_CHECK(decoded.ok()) << how << ": " << decoded.ToString();
    CheckSame(features, again, how);
  }
  return 0;
}
