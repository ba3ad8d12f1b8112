#include "model/checkpoint/header.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "util/strings.h"

namespace tower::checkpoint::internal {
namespace {

// The reference implementation's MAX_HEADER_SIZE.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr char kMetadataKey[] = "__metadata__";
constexpr uint64_t kMaxInt64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
constexpr char kDTypeList[] = "F32, F16, BF16, I32, I64, U8, F64";

std::string RangeText(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// A name as messages show it: quoted, and cut short if a hostile file made it huge.
std::string Quoted(std::string_view text) {
  constexpr size_t kMaxShown = 200;
  if (text.size() <= kMaxShown) return "'" + std::string(text) + "'";
  return "'" + std::string(text.substr(0, kMaxShown)) + "...' (" + std::to_string(text.size()) +
         " bytes)";
}

// Strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF), as Rust's
// str::from_utf8 in the reference reader requires of the header.
bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t extra;
    uint32_t code;
    if (lead >= 0xC2 && lead <= 0xDF) {
      extra = 1;
      code = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2;
      code = lead & 0x0F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      extra = 3;
      code = lead & 0x07;
    } else {
      return false;
    }
    if (text.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    if (extra == 2 && (code < 0x800 || (code >= 0xD800 && code <= 0xDFFF))) return false;
    if (extra == 3 && (code < 0x10000 || code > 0x10FFFF)) return false;
    i += extra + 1;
  }
  return true;
}

// A JSON string literal, escaped as serde_json (the reference writer) escapes it.
void AppendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Builds a Header from nlohmann's SAX events, checking each value as it arrives. It keeps
// no JSON tree: memory is the tensors' names and shapes, and any nesting that the format
// has no place for is rejected at once (or skipped with a counter, inside fields the format
// does not define, which the reference reader ignores too).
class HeaderReader {
 public:
  using Json = nlohmann::json;

  // --- The SAX interface (nlohmann::json_sax) ---
  bool null() { return OnValue(Value(Value::kNull)); }
  bool boolean(bool) { return OnValue(Value(Value::kBool)); }
  bool number_integer(Json::number_integer_t value) {
    Value v(Value::kInt);
    v.integer = value;
    return OnValue(v);
  }
  bool number_unsigned(Json::number_unsigned_t value) {
    Value v(Value::kUint);
    v.unsigned_integer = value;
    return OnValue(v);
  }
  bool number_float(Json::number_float_t, const Json::string_t& text) {
    Value v(Value::kFloat);
    v.text = &text;
    return OnValue(v);
  }
  bool string(Json::string_t& text) {
    Value v(Value::kString);
    v.text = &text;
    return OnValue(v);
  }
  bool binary(Json::binary_t&) { return OnValue(Value(Value::kBinary)); }
  bool start_object(std::size_t) { return OnValue(Value(Value::kObject)); }
  bool start_array(std::size_t) { return OnValue(Value(Value::kArray)); }
  bool key(Json::string_t& name);
  bool end_object();
  bool end_array();
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error);

  // Empty if the header was read without fault.
  const std::string& error() const { return error_; }
  bool done() const { return state_ == State::kDone; }
  Header TakeHeader() { return std::move(header_); }

 private:
  struct Value {
    enum Kind { kNull, kBool, kInt, kUint, kFloat, kString, kBinary, kObject, kArray };
    explicit Value(Kind k) : kind(k) {}
    Kind kind;
    int64_t integer = 0;
    uint64_t unsigned_integer = 0;
    const std::string* text = nullptr;
  };
  enum class State { kTop, kRoot, kMetadata, kEntry, kShape, kOffsets, kSkip, kDone };
  enum class Field { kDType, kShape, kOffsets, kOther };

  static std::string Describe(const Value& v) {
    switch (v.kind) {
      case Value::kNull:
        return "null";
      case Value::kBool:
        return "a boolean";
      case Value::kInt:
      case Value::kUint:
      case Value::kFloat:
        return "a number";
      case Value::kString:
        return "a string";
      case Value::kBinary:
        return "binary data";
      case Value::kObject:
        return "an object";
      case Value::kArray:
        return "an array";
    }
    return "a value";
  }
  static bool IsContainer(const Value& v) {
    return v.kind == Value::kObject || v.kind == Value::kArray;
  }

  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }
  std::string Label() const { return TensorLabel(entry_.tensor.name); }

  bool OnValue(const Value& v);
  bool OnField(const Value& v);
  bool OnShapeDim(const Value& v);
  bool OnOffset(const Value& v);
  bool FinishEntry();

  State state_ = State::kTop;
  std::string key_;  // the last key read in the root or __metadata__ object
  std::set<std::string> root_keys_;
  Field field_ = Field::kOther;
  Entry entry_;  // the tensor entry being read
  bool has_dtype_ = false, has_shape_ = false, has_offsets_ = false;
  int offsets_read_ = 0;
  uint64_t skip_depth_ = 0;  // nesting inside an ignored field
  Header header_;
  std::string error_;
};

bool HeaderReader::OnValue(const Value& v) {
  switch (state_) {
    case State::kTop:
      if (v.kind != Value::kObject) {
        return Fail("the header is " + Describe(v) + ", not a JSON object");
      }
      state_ = State::kRoot;
      return true;
    case State::kRoot:
      if (key_ == kMetadataKey) {
        if (v.kind != Value::kObject) {
          return Fail("__metadata__ is " + Describe(v) + ", not an object of strings");
        }
        state_ = State::kMetadata;
        return true;
      }
      if (v.kind != Value::kObject) {
        return Fail(TensorLabel(key_) + " is " + Describe(v) +
                    ", not an object {\"dtype\", \"shape\", \"data_offsets\"}");
      }
      entry_ = Entry();
      entry_.tensor.name = key_;
      has_dtype_ = has_shape_ = has_offsets_ = false;
      offsets_read_ = 0;
      state_ = State::kEntry;
      return true;
    case State::kMetadata:
      if (v.kind != Value::kString) {
        return Fail("__metadata__: the value of " + Quoted(key_) + " is " + Describe(v) +
                    ", not a string");
      }
      header_.metadata[key_] = *v.text;
      return true;
    case State::kEntry:
      return OnField(v);
    case State::kShape:
      return OnShapeDim(v);
    case State::kOffsets:
      return OnOffset(v);
    case State::kSkip:
      if (IsContainer(v)) ++skip_depth_;
      return true;
    case State::kDone:
      break;
  }
  return Fail("unexpected JSON after the header object");
}

bool HeaderReader::key(Json::string_t& name) {
  switch (state_) {
    case State::kRoot:
      if (!root_keys_.insert(name).second) {
        return Fail(name == kMetadataKey ? std::string("the header has two __metadata__ entries")
                                         : "the header names " + TensorLabel(name) + " twice");
      }
      key_ = name;
      return true;
    case State::kMetadata:
      if (header_.metadata.count(name) > 0) {
        return Fail("__metadata__ has the key " + Quoted(name) + " twice");
      }
      key_ = name;
      return true;
    case State::kEntry: {
      bool* seen = nullptr;
      if (name == "dtype") {
        field_ = Field::kDType;
        seen = &has_dtype_;
      } else if (name == "shape") {
        field_ = Field::kShape;
        seen = &has_shape_;
      } else if (name == "data_offsets") {
        field_ = Field::kOffsets;
        seen = &has_offsets_;
      } else {
        field_ = Field::kOther;
      }
      if (seen != nullptr) {
        if (*seen) return Fail(Label() + ": \"" + name + "\" appears twice");
        *seen = true;
      }
      return true;
    }
    default:
      return true;  // keys inside skipped fields
  }
}

bool HeaderReader::OnField(const Value& v) {
  switch (field_) {
    case Field::kDType: {
      if (v.kind != Value::kString) {
        return Fail(Label() + ": dtype is " + Describe(v) + ", not a string");
      }
      const std::optional<DType> dtype = ParseDType(*v.text);
      if (!dtype) {
        return Fail(Label() + ": unknown dtype " + Quoted(*v.text) + " (Tower reads " + kDTypeList +
                    ")");
      }
      entry_.tensor.dtype = *dtype;
      return true;
    }
    case Field::kShape:
      if (v.kind != Value::kArray) {
        return Fail(Label() + ": shape is " + Describe(v) + ", not an array of integers");
      }
      state_ = State::kShape;
      return true;
    case Field::kOffsets:
      if (v.kind != Value::kArray) {
        return Fail(Label() + ": data_offsets is " + Describe(v) + ", not an array [begin, end]");
      }
      state_ = State::kOffsets;
      return true;
    case Field::kOther:
      if (IsContainer(v)) {
        state_ = State::kSkip;
        skip_depth_ = 1;
      }
      return true;
  }
  return true;
}

bool HeaderReader::OnShapeDim(const Value& v) {
  switch (v.kind) {
    case Value::kUint:
      if (v.unsigned_integer > kMaxInt64) {
        return Fail(Label() + ": shape dimension " + std::to_string(v.unsigned_integer) +
                    " is too large");
      }
      entry_.tensor.shape.push_back(static_cast<int64_t>(v.unsigned_integer));
      return true;
    case Value::kInt:  // nlohmann reports only signed literals ("-3", "-0") this way
      if (v.integer < 0) {
        return Fail(Label() + ": shape has a negative dimension " + std::to_string(v.integer));
      }
      entry_.tensor.shape.push_back(v.integer);
      return true;
    case Value::kFloat:
      return Fail(Label() + ": shape dimension " + *v.text + " is not an integer");
    default:
      return Fail(Label() + ": shape holds " + Describe(v) + ", not only integers");
  }
}

bool HeaderReader::OnOffset(const Value& v) {
  uint64_t offset = 0;
  switch (v.kind) {
    case Value::kUint:
      offset = v.unsigned_integer;
      break;
    case Value::kInt:
      if (v.integer < 0) {
        return Fail(Label() + ": data_offsets has a negative offset " + std::to_string(v.integer));
      }
      offset = static_cast<uint64_t>(v.integer);
      break;
    case Value::kFloat:
      return Fail(Label() + ": data offset " + *v.text + " is not an integer");
    default:
      return Fail(Label() + ": data_offsets holds " + Describe(v) + ", not only integers");
  }
  if (offsets_read_ == 2) {
    return Fail(Label() + ": data_offsets has more than 2 entries; it must be [begin, end]");
  }
  (offsets_read_ == 0 ? entry_.begin : entry_.end) = offset;
  ++offsets_read_;
  return true;
}

bool HeaderReader::end_array() {
  switch (state_) {
    case State::kShape:
      state_ = State::kEntry;
      return true;
    case State::kOffsets:
      if (offsets_read_ != 2) {
        return Fail(Label() + ": data_offsets has " + std::to_string(offsets_read_) +
                    (offsets_read_ == 1 ? " entry" : " entries") + "; it must be [begin, end]");
      }
      state_ = State::kEntry;
      return true;
    case State::kSkip:
      if (--skip_depth_ == 0) state_ = State::kEntry;
      return true;
    default:
      return Fail("unbalanced JSON array");  // nlohmann's parser makes this unreachable
  }
}

bool HeaderReader::end_object() {
  switch (state_) {
    case State::kRoot:
      state_ = State::kDone;
      return true;
    case State::kMetadata:
      state_ = State::kRoot;
      return true;
    case State::kEntry:
      if (!FinishEntry()) return false;
      state_ = State::kRoot;
      return true;
    case State::kSkip:
      if (--skip_depth_ == 0) state_ = State::kEntry;
      return true;
    default:
      return Fail("unbalanced JSON object");  // nlohmann's parser makes this unreachable
  }
}

bool HeaderReader::FinishEntry() {
  std::vector<std::string> missing;
  if (!has_dtype_) missing.push_back("\"dtype\"");
  if (!has_shape_) missing.push_back("\"shape\"");
  if (!has_offsets_) missing.push_back("\"data_offsets\"");
  if (!missing.empty()) return Fail(Label() + ": missing " + Join(missing, ", "));
  const TensorData& tensor = entry_.tensor;
  const std::string dtype(DTypeName(tensor.dtype));
  const std::optional<uint64_t> needed = ByteSize(tensor.shape, ElementSize(tensor.dtype));
  if (!needed) {
    return Fail(Label() + ": shape " + ShapeText(tensor.shape) + " of " + dtype +
                " is too large (its byte size overflows 64 bits)");
  }
  if (entry_.begin > entry_.end) {
    return Fail(Label() + ": data_offsets " + RangeText(entry_.begin, entry_.end) +
                " are reversed (begin > end)");
  }
  const uint64_t held = entry_.end - entry_.begin;
  if (held != *needed) {
    return Fail(Label() + ": data_offsets " + RangeText(entry_.begin, entry_.end) + " hold " +
                std::to_string(held) + " bytes but shape " + ShapeText(tensor.shape) + " of " +
                dtype + " needs " + std::to_string(*needed));
  }
  header_.entries.push_back(std::move(entry_));
  entry_ = Entry();
  return true;
}

bool HeaderReader::parse_error(std::size_t, const std::string&,
                               const nlohmann::detail::exception& error) {
  // "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error ...":
  // keep the part after the tag, and not too much of it (it quotes the offending token).
  std::string text = error.what();
  const size_t tag_end = text.find("] ");
  if (tag_end != std::string::npos) text = text.substr(tag_end + 2);
  constexpr size_t kMaxShown = 300;
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return Fail("the header is not valid JSON: " + text);
}

}  // namespace

std::string ShapeText(const std::vector<int64_t>& shape) { return "[" + Join(shape, ", ") + "]"; }

std::string TensorLabel(std::string_view name) { return "tensor " + Quoted(name); }

// product(shape) * element_size, computed as the reference reader does (element count
// first, then bytes, each step checked); nullopt on a negative dimension or an overflow
// past int64.
std::optional<uint64_t> ByteSize(const std::vector<int64_t>& shape, size_t element_size) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count)) {
      return std::nullopt;
    }
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(element_size), &bytes) ||
      bytes > kMaxInt64) {
    return std::nullopt;
  }
  return bytes;
}

// The 8-byte length and the padded JSON header for `file`, after checking it.
StatusOr<std::string> EncodeHeader(const File& file) {
  std::string json = "{";
  if (!file.metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : file.metadata) {
      if (!IsValidUtf8(key)) {
        return InvalidArgumentError("__metadata__ key " + Quoted(key) + " is not valid UTF-8");
      }
      if (!IsValidUtf8(value)) {
        return InvalidArgumentError("__metadata__ value of " + Quoted(key) + " is not valid UTF-8");
      }
      if (!first) json += ',';
      first = false;
      AppendJsonString(json, key);
      json += ':';
      AppendJsonString(json, value);
    }
    json += "},";
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const TensorData& tensor = file.tensors[i];
    const std::string label = TensorLabel(tensor.name);
    if (tensor.name.empty()) {
      return InvalidArgumentError("tensor #" + std::to_string(i) + " has an empty name");
    }
    if (tensor.name == kMetadataKey) {
      return InvalidArgumentError("tensor #" + std::to_string(i) +
                                  ": the name __metadata__ is reserved for the file's metadata");
    }
    if (!IsValidUtf8(tensor.name)) return InvalidArgumentError(label + ": name is not valid UTF-8");
    if (!names.insert(tensor.name).second) {
      return InvalidArgumentError("two tensors are named " + Quoted(tensor.name));
    }
    const size_t element_size = ElementSize(tensor.dtype);
    if (element_size == 0) {
      return InvalidArgumentError(label + ": invalid dtype value " +
                                  std::to_string(static_cast<int>(tensor.dtype)));
    }
    const std::optional<uint64_t> needed = ByteSize(tensor.shape, element_size);
    if (!needed) {
      return InvalidArgumentError(label + ": shape " + ShapeText(tensor.shape) +
                                  " is invalid (a negative dimension, or too large)");
    }
    if (*needed != tensor.bytes.size()) {
      return InvalidArgumentError(label + ": " + std::to_string(tensor.bytes.size()) +
                                  " bytes of data, but shape " + ShapeText(tensor.shape) + " of " +
                                  std::string(DTypeName(tensor.dtype)) + " needs " +
                                  std::to_string(*needed));
    }
    AppendJsonString(json, tensor.name);
    json += ":{\"dtype\":\"";
    json += DTypeName(tensor.dtype);
    json += "\",\"shape\":[";
    for (size_t d = 0; d < tensor.shape.size(); ++d) {
      if (d > 0) json += ',';
      json += std::to_string(tensor.shape[d]);
    }
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(offset + tensor.bytes.size()) + "]},";
    offset += tensor.bytes.size();
  }
  if (json.back() == ',') json.pop_back();
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');  // as the reference writer pads
  std::string header(8, '\0');
  const uint64_t length = json.size();
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  return header + json;
}

// Checks the 8-byte length that starts the file (`prefix`: the file's first bytes, up to 8)
// against the file's size; returns the header's length.
StatusOr<uint64_t> HeaderLength(std::string_view prefix, uint64_t file_size,
                                const std::string& where) {
  if (file_size < 8) {
    return DataLossError(where + ": the file is " + std::to_string(file_size) +
                         " bytes, too short for a safetensors file (it starts with an 8-byte "
                         "header length)");
  }
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(prefix[i]);
  if (length > kMaxHeaderBytes) {
    return DataLossError(where + ": header length " + std::to_string(length) +
                         " is over the limit of " + std::to_string(kMaxHeaderBytes) +
                         " bytes (a damaged file, or not a safetensors file)");
  }
  if (length > file_size - 8) {
    return DataLossError(where + ": truncated: the header length is " + std::to_string(length) +
                         " bytes but only " + std::to_string(file_size - 8) + " bytes follow it");
  }
  return length;
}

// Parses and checks the JSON header, and that its tensors cover the `data_size` bytes of the
// data section exactly.
StatusOr<Header> ParseHeader(std::string_view json, uint64_t data_size, const std::string& where) {
  // Rust's from_utf8 rejects a non-UTF-8 header as a whole (the JSON parser would only see
  // bad bytes inside strings).
  if (!IsValidUtf8(json)) return DataLossError(where + ": the header is not valid UTF-8");
  // nlohmann's lexer takes a NUL byte for the end of the input and would ignore the rest;
  // JSON has no place for one (in strings it must be escaped as \u0000).
  if (const size_t nul = json.find('\0'); nul != std::string_view::npos) {
    return DataLossError(where + ": the header is not valid JSON: a NUL byte at byte " +
                         std::to_string(nul) + " of the header");
  }
  HeaderReader reader;
  const bool parsed = nlohmann::json::sax_parse(json.data(), json.data() + json.size(), &reader);
  if (!reader.error().empty()) return DataLossError(where + ": " + reader.error());
  if (!parsed || !reader.done()) {
    return DataLossError(where + ": the header is not valid JSON");
  }
  Header header = reader.TakeHeader();
  // Data order; among empty tensors at one offset, the header's order.
  std::stable_sort(header.entries.begin(), header.entries.end(),
                   [](const Entry& a, const Entry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& entry : header.entries) {
    const std::string label =
        TensorLabel(entry.tensor.name) + ": data_offsets " + RangeText(entry.begin, entry.end);
    if (entry.begin > covered) {
      return DataLossError(where + ": " + label + " leave a gap of " +
                           std::to_string(entry.begin - covered) + " bytes " +
                           (previous == nullptr
                                ? std::string("at the start of the data section")
                                : "after " + TensorLabel(previous->tensor.name) +
                                      " (which ends at " + std::to_string(covered) + ")") +
                           "; the tensors must cover the data exactly");
    }
    if (entry.begin < covered) {
      return DataLossError(where + ": " + label + " overlap " + TensorLabel(previous->tensor.name) +
                           " " + RangeText(previous->begin, previous->end));
    }
    covered = entry.end;
    previous = &entry;
  }
  if (covered > data_size) {
    std::string past;
    for (const Entry& entry : header.entries) {
      if (entry.end > data_size) {
        past = " (" + TensorLabel(entry.tensor.name) + " " + RangeText(entry.begin, entry.end) +
               " ends past it)";
        break;
      }
    }
    return DataLossError(where + ": truncated: the header promises " + std::to_string(covered) +
                         " bytes of data, the file has " + std::to_string(data_size) + past);
  }
  if (covered < data_size) {
    return DataLossError(where + ": the header's tensors cover " + std::to_string(covered) +
                         " bytes of data but the file has " + std::to_string(data_size) + ": " +
                         std::to_string(data_size - covered) + " stray bytes at the end");
  }
  return header;
}

}  // namespace tower::checkpoint::internal
