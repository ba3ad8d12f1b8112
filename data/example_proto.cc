#include "data/example_proto.h"

#include <cstring>

namespace tower::data {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

// Reads protobuf fields off a byte range; every read checks the range's end.
class WireReader {
 public:
  WireReader(std::string_view bytes, const char* message) : bytes_(bytes), message_(message) {}

  bool done() const { return position_ >= bytes_.size(); }

  Status Varint(uint64_t* value) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (done()) return Malformed("a varint runs past the end");
      const uint8_t byte = static_cast<uint8_t>(bytes_[position_++]);
      if (shift == 63 && byte > 1) return Malformed("a varint is longer than 64 bits");
      result |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) {
        *value = result;
        return OkStatus();
      }
    }
    return Malformed("a varint is longer than 10 bytes");
  }

  // The next field's number and wire type.
  Status Tag(uint32_t* field, int* wire_type) {
    uint64_t tag = 0;
    TOWER_RETURN_IF_ERROR(Varint(&tag));
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<int>(tag & 7);
    if (*field == 0) return Malformed("a field number is 0");
    return OkStatus();
  }

  Status Bytes(size_t count, std::string_view* out) {
    if (count > bytes_.size() - position_) return Malformed("a length runs past the end");
    *out = bytes_.substr(position_, count);
    position_ += count;
    return OkStatus();
  }

  Status LengthDelimited(std::string_view* out) {
    uint64_t length = 0;
    TOWER_RETURN_IF_ERROR(Varint(&length));
    if (length > bytes_.size() - position_) return Malformed("a length runs past the end");
    return Bytes(static_cast<size_t>(length), out);
  }

  // Skips a field of `wire_type` (groups, wire types 3 and 4, are not in these messages).
  Status Skip(int wire_type) {
    std::string_view ignored;
    uint64_t value = 0;
    switch (wire_type) {
      case kVarint:
        return Varint(&value);
      case kFixed64:
        return Bytes(8, &ignored);
      case kLengthDelimited:
        return LengthDelimited(&ignored);
      case kFixed32:
        return Bytes(4, &ignored);
      default:
        return Malformed("wire type " + std::to_string(wire_type) + " is not valid here");
    }
  }

  Status Malformed(const std::string& what) const {
    return InvalidArgumentError("not a tf.train.Example: " + what + " of the " + message_ +
                                " (byte " + std::to_string(position_) + " of it)");
  }

 private:
  std::string_view bytes_;
  const char* message_;
  size_t position_ = 0;
};

float LoadFloat(const char* bytes) {
  float value;
  std::memcpy(&value, bytes, sizeof(value));  // little-endian on every supported host
  return value;
}

Status DecodeFloatList(std::string_view list, std::vector<float>* out) {
  WireReader reader(list, "FloatList");
  while (!reader.done()) {
    uint32_t field = 0;
    int wire_type = 0;
    TOWER_RETURN_IF_ERROR(reader.Tag(&field, &wire_type));
    std::string_view values;
    if (field == 1 && wire_type == kLengthDelimited) {  // packed
      TOWER_RETURN_IF_ERROR(reader.LengthDelimited(&values));
      if (values.size() % 4 != 0) {
        return reader.Malformed("packed floats of " + std::to_string(values.size()) +
                                " bytes (not a multiple of 4)");
      }
      for (size_t i = 0; i < values.size(); i += 4) out->push_back(LoadFloat(values.data() + i));
    } else if (field == 1 && wire_type == kFixed32) {  // one unpacked value
      TOWER_RETURN_IF_ERROR(reader.Bytes(4, &values));
      out->push_back(LoadFloat(values.data()));
    } else {
      TOWER_RETURN_IF_ERROR(reader.Skip(wire_type));
    }
  }
  return OkStatus();
}

Status DecodeInt64List(std::string_view list, std::vector<int64_t>* out) {
  WireReader reader(list, "Int64List");
  while (!reader.done()) {
    uint32_t field = 0;
    int wire_type = 0;
    TOWER_RETURN_IF_ERROR(reader.Tag(&field, &wire_type));
    uint64_t value = 0;
    if (field == 1 && wire_type == kLengthDelimited) {  // packed varints
      std::string_view values;
      TOWER_RETURN_IF_ERROR(reader.LengthDelimited(&values));
      WireReader packed(values, "Int64List's packed values");
      while (!packed.done()) {
        TOWER_RETURN_IF_ERROR(packed.Varint(&value));
        out->push_back(static_cast<int64_t>(value));  // int64: two's complement, 10 bytes
      }
    } else if (field == 1 && wire_type == kVarint) {  // one unpacked value
      TOWER_RETURN_IF_ERROR(reader.Varint(&value));
      out->push_back(static_cast<int64_t>(value));
    } else {
      TOWER_RETURN_IF_ERROR(reader.Skip(wire_type));
    }
  }
  return OkStatus();
}

Status CountBytesList(std::string_view list, int64_t* count) {
  WireReader reader(list, "BytesList");
  while (!reader.done()) {
    uint32_t field = 0;
    int wire_type = 0;
    TOWER_RETURN_IF_ERROR(reader.Tag(&field, &wire_type));
    if (field == 1 && wire_type == kLengthDelimited) ++*count;
    TOWER_RETURN_IF_ERROR(reader.Skip(wire_type));
  }
  return OkStatus();
}

}  // namespace

const char* FeatureKindName(FeatureKind kind) {
  switch (kind) {
    case FeatureKind::kBytes:
      return "bytes_list";
    case FeatureKind::kFloat:
      return "float_list";
    case FeatureKind::kInt64:
      return "int64_list";
    case FeatureKind::kNone:
      break;
  }
  return "no value";
}

int64_t FeatureList::size() const {
  switch (kind) {
    case FeatureKind::kBytes:
      return bytes_values;
    case FeatureKind::kFloat:
      return static_cast<int64_t>(floats.size());
    case FeatureKind::kInt64:
      return static_cast<int64_t>(int64s.size());
    case FeatureKind::kNone:
      break;
  }
  return 0;
}

Status ForEachFeature(
    std::string_view example,
    const std::function<Status(std::string_view name, std::string_view feature)>& visit) {
  WireReader reader(example, "Example");
  while (!reader.done()) {
    uint32_t field = 0;
    int wire_type = 0;
    TOWER_RETURN_IF_ERROR(reader.Tag(&field, &wire_type));
    if (field != 1 || wire_type != kLengthDelimited) {
      TOWER_RETURN_IF_ERROR(reader.Skip(wire_type));
      continue;
    }
    std::string_view features;
    TOWER_RETURN_IF_ERROR(reader.LengthDelimited(&features));
    WireReader entries(features, "Features");
    while (!entries.done()) {
      TOWER_RETURN_IF_ERROR(entries.Tag(&field, &wire_type));
      if (field != 1 || wire_type != kLengthDelimited) {
        TOWER_RETURN_IF_ERROR(entries.Skip(wire_type));
        continue;
      }
      std::string_view entry_bytes;
      TOWER_RETURN_IF_ERROR(entries.LengthDelimited(&entry_bytes));
      // A map entry: key = 1, value = 2; either may be missing (an empty string, an empty
      // Feature).
      WireReader entry(entry_bytes, "Features map entry");
      std::string_view name, feature;
      while (!entry.done()) {
        TOWER_RETURN_IF_ERROR(entry.Tag(&field, &wire_type));
        if (field == 1 && wire_type == kLengthDelimited) {
          TOWER_RETURN_IF_ERROR(entry.LengthDelimited(&name));
        } else if (field == 2 && wire_type == kLengthDelimited) {
          TOWER_RETURN_IF_ERROR(entry.LengthDelimited(&feature));
        } else {
          TOWER_RETURN_IF_ERROR(entry.Skip(wire_type));
        }
      }
      TOWER_RETURN_IF_ERROR(visit(name, feature));
    }
  }
  return OkStatus();
}

Status DecodeFeature(std::string_view feature, FeatureList* out) {
  out->kind = FeatureKind::kNone;
  out->floats.clear();
  out->int64s.clear();
  out->bytes_values = 0;
  WireReader reader(feature, "Feature");
  while (!reader.done()) {
    uint32_t field = 0;
    int wire_type = 0;
    TOWER_RETURN_IF_ERROR(reader.Tag(&field, &wire_type));
    if (field < 1 || field > 3 || wire_type != kLengthDelimited) {
      TOWER_RETURN_IF_ERROR(reader.Skip(wire_type));
      continue;
    }
    std::string_view list;
    TOWER_RETURN_IF_ERROR(reader.LengthDelimited(&list));
    // A later member of the oneof replaces an earlier, other one; the same member twice is
    // merged, as protobuf merges a repeated message field (the values concatenate).
    const FeatureKind kind = field == 1   ? FeatureKind::kBytes
                             : field == 2 ? FeatureKind::kFloat
                                          : FeatureKind::kInt64;
    if (kind != out->kind) {
      out->floats.clear();
      out->int64s.clear();
      out->bytes_values = 0;
    }
    if (field == 1) {
      out->kind = FeatureKind::kBytes;
      TOWER_RETURN_IF_ERROR(CountBytesList(list, &out->bytes_values));
    } else if (field == 2) {
      out->kind = FeatureKind::kFloat;
      TOWER_RETURN_IF_ERROR(DecodeFloatList(list, &out->floats));
    } else {
      out->kind = FeatureKind::kInt64;
      TOWER_RETURN_IF_ERROR(DecodeInt64List(list, &out->int64s));
    }
  }
  return OkStatus();
}

}  // namespace tower::data
