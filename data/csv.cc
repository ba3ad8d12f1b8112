#include "data/csv.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "util/strings.h"

namespace tower::data {

namespace {

// One field of a line: its text (inside the quotes for a quoted field, spaces trimmed) or a
// quoting error.
struct Field {
  std::string_view text;
  bool quoted = false;
  // Non-empty for a malformed field: "unterminated quote", ...
  const char* error = nullptr;
};

class LineSplitter {
 public:
  explicit LineSplitter(char delimiter) : delimiter_(delimiter) {}

  // Splits `line` (no line end) into fields(); stops at the first malformed field, which is
  // then the last one.
  void Split(std::string_view line) {
    fields_.clear();
    size_t pos = 0;
    while (true) {
      Field field;
      pos = SkipSpaces(line, pos);
      if (pos < line.size() && line[pos] == '"') {
        // Quoted: up to the closing quote; "" inside stands for one quote.
        size_t close = pos + 1;
        while (true) {
          close = line.find('"', close);
          if (close == std::string_view::npos) break;
          if (close + 1 < line.size() && line[close + 1] == '"') {
            close += 2;
            continue;
          }
          break;
        }
        if (close == std::string_view::npos) {
          field.error = "unterminated quote";
          field.text = line.substr(pos);
          fields_.push_back(field);
          return;
        }
        field.quoted = true;
        field.text = Trim(line.substr(pos + 1, close - pos - 1));
        const size_t after = SkipSpaces(line, close + 1);
        if (after < line.size() && line[after] != delimiter_) {
          field.error = "text after the closing quote";
          const size_t end = line.find(delimiter_, after);
          field.text = line.substr(pos, end == std::string_view::npos ? std::string_view::npos
                                                                      : end - pos);
          fields_.push_back(field);
          return;
        }
        fields_.push_back(field);
        if (after >= line.size()) return;
        pos = after + 1;
      } else {
        const size_t end = line.find(delimiter_, pos);
        if (end == std::string_view::npos) {
          field.text = Trim(line.substr(pos));
          fields_.push_back(field);
          return;
        }
        field.text = Trim(line.substr(pos, end - pos));
        fields_.push_back(field);
        pos = end + 1;
      }
    }
  }

  const std::vector<Field>& fields() const { return fields_; }

  bool IsSpace(char c) const { return (c == ' ' || c == '\t') && c != delimiter_; }

  std::string_view Trim(std::string_view text) const {
    size_t begin = 0;
    size_t end = text.size();
    while (begin < end && IsSpace(text[begin])) ++begin;
    while (end > begin && IsSpace(text[end - 1])) --end;
    return text.substr(begin, end - begin);
  }

 private:
  size_t SkipSpaces(std::string_view line, size_t pos) const {
    while (pos < line.size() && IsSpace(line[pos])) ++pos;
    return pos;
  }

  char delimiter_;
  std::vector<Field> fields_;
};

// Lines of the text, each without its line end ("\n" or "\r\n"), numbered from 1.
class LineReader {
 public:
  explicit LineReader(std::string_view text) : text_(text) {}

  bool Next(std::string_view* line) {
    if (pos_ >= text_.size()) return false;
    size_t end = text_.find('\n', pos_);
    size_t next = end + 1;
    if (end == std::string_view::npos) {
      end = text_.size();
      next = end;
    }
    *line = text_.substr(pos_, end - pos_);
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    pos_ = next;
    ++line_number_;
    return true;
  }
  int64_t line_number() const { return line_number_; }
  size_t position() const { return pos_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int64_t line_number_ = 0;
};

bool IsBlank(std::string_view line) {
  for (char c : line) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  }
  return true;
}

std::string Quoted(std::string_view text) {
  // Long or binary cells are cut and escaped so that a message stays one readable line.
  const size_t limit = 40;
  return "'" + Printable(text.substr(0, limit)) + (text.size() > limit ? "..." : "") + "'";
}

enum class CellError { kNone, kEmpty, kNotANumber, kNotFinite, kOutOfRange };

// 10^k, exact in double for k <= 22.
constexpr double kExactPowersOf10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// The common cell, a plain decimal [-]digits[.digits] of at most 19 digits, without
// from_chars: its digits m and its fraction's length k give m / 10^k, and when m <= 2^53
// and k <= 22 both are exact doubles and IEEE division rounds the quotient correctly, so it
// is the double from_chars gives, bit for bit (Clinger's fast path). Scans from `p` up to
// `stop` or `end` and returns where it stopped; null for anything else (an exponent, more
// digits, no digit, another character), which from_chars then reads. (from_chars was 42 % of
// a streamed CSV's parse, 2026-11-29.)
const char* ScanPlainDecimal(const char* p, const char* end, char stop, double* out) {
  const bool negative = p < end && *p == '-';
  if (negative) ++p;
  uint64_t mantissa = 0;
  int digits = 0;
  int fraction = 0;
  bool dot = false;
  for (; p < end && *p != stop; ++p) {
    const char c = *p;
    if (c >= '0' && c <= '9') {
      if (++digits > 19) return nullptr;
      mantissa = mantissa * 10 + static_cast<uint64_t>(c - '0');
      fraction += dot ? 1 : 0;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      return nullptr;
    }
  }
  if (digits == 0 || mantissa > (uint64_t{1} << 53) || fraction > 22) return nullptr;
  const double value = static_cast<double>(mantissa) / kExactPowersOf10[fraction];
  *out = negative ? -value : value;
  return p;
}

// A whole cell [begin, end) that is a plain decimal (ScanPlainDecimal).
bool ParsePlainDecimal(const char* begin, const char* end, double* out) {
  return ScanPlainDecimal(begin, end, '\0', out) == end;
}

// A whole-cell number: [+-]digits[.digits][e[+-]digits], also ".5" and "5.".
CellError ParseCell(std::string_view text, float* out) {
  if (text.empty()) return CellError::kEmpty;
  const char* begin = text.data();
  const char* end = begin + text.size();
  // from_chars takes no leading '+'.
  if (*begin == '+' && end - begin > 1 && (begin[1] == '.' || (begin[1] >= '0' && begin[1] <= '9'))) {
    ++begin;
  }
  double value = 0;
  if (ParsePlainDecimal(begin, end, &value)) {
    *out = static_cast<float>(value);  // |value| <= 2^53: finite, within float's range
    return CellError::kNone;
  }
  const std::from_chars_result result = std::from_chars(begin, end, value);
  if (result.ptr != end) return CellError::kNotANumber;
  if (result.ec == std::errc::invalid_argument) return CellError::kNotANumber;
  if (result.ec == std::errc::result_out_of_range) {
    // Overflow, or an underflow that strtod rounds to a (sub)normal or zero.
    const std::string copy(begin, end);
    value = std::strtod(copy.c_str(), nullptr);
    if (std::isinf(value)) return CellError::kOutOfRange;
  }
  if (!std::isfinite(value)) return CellError::kNotFinite;
  if (std::fabs(value) > static_cast<double>(std::numeric_limits<float>::max())) {
    return CellError::kOutOfRange;
  }
  *out = static_cast<float>(value);
  return CellError::kNone;
}

std::string CellErrorText(CellError error, std::string_view text) {
  switch (error) {
    case CellError::kEmpty:
      return "empty cell (every cell must hold a number)";
    case CellError::kNotFinite:
      return Quoted(text) + " is not a finite number";
    case CellError::kOutOfRange:
      return Quoted(text) + " is out of the float32 range";
    case CellError::kNotANumber:
    case CellError::kNone:
      break;
  }
  return Quoted(text) + " is not a number";
}

// Where a column's cells go: a feature or target slot, or nowhere (an unused column).
struct Destination {
  enum Kind { kSkip, kFeature, kTarget } kind = kSkip;
  int64_t slot = 0;
};

// A class label as written: without the quotes and surrounding spaces.
std::string LabelText(const Field& field) {
  std::string text(field.text);
  if (field.quoted) {
    for (size_t at = text.find("\"\""); at != std::string::npos; at = text.find("\"\"", at + 1)) {
      text.erase(at, 1);
    }
  }
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// The common line in one pass, without splitting it into fields first: every column a plain
// decimal (ScanPlainDecimal) right between the delimiters, or, where the column is not read,
// anything without a quote (so that no field is quoted, and the delimiters split the line as
// the general path's splitter does). False for any other line (spaces, quotes, exponents,
// empty cells, a wrong field count), which the general path then parses or reports on; for
// the lines it takes, the values are those of the general path, bit for bit.
bool ParsePlainLine(std::string_view line, char delimiter,
                    const std::vector<Destination>& destinations, float* features, float* targets) {
  const char* p = line.data();
  const char* const end = p + line.size();
  const size_t columns = destinations.size();
  for (size_t c = 0; c < columns; ++c) {
    const Destination& destination = destinations[c];
    if (destination.kind == Destination::kSkip) {
      const void* next =
          p < end ? std::memchr(p, delimiter, static_cast<size_t>(end - p)) : nullptr;
      const char* field_end = next == nullptr ? end : static_cast<const char*>(next);
      if (field_end > p && std::memchr(p, '"', static_cast<size_t>(field_end - p)) != nullptr) {
        return false;
      }
      p = field_end;
    } else {
      double value = 0;
      p = ScanPlainDecimal(p, end, delimiter, &value);
      if (p == nullptr) return false;
      (destination.kind == Destination::kFeature ? features : targets)[destination.slot] =
          static_cast<float>(value);
    }
    // A delimiter after every column but the last, the line's end after the last.
    if (c + 1 < columns) {
      if (p == end) return false;
      ++p;
    } else if (p != end) {
      return false;
    }
  }
  return columns > 0;
}

}  // namespace

struct CsvLineParser::State {
  State(std::string file, const CsvOptions& csv)
      : name(std::move(file)), options(csv), splitter(csv.delimiter) {}

  Status Error(const std::string& message) const {
    return InvalidArgumentError(name + ": " + message);
  }

  // "column 'x' (2)", or "field 7" past the header's columns.
  std::string ColumnName(int64_t index) const {
    if (index < static_cast<int64_t>(header.size())) {
      return "column '" + header[static_cast<size_t>(index)] + "' (" + std::to_string(index + 1) +
             ")";
    }
    return "field " + std::to_string(index + 1);
  }

  Status CheckOptions() const {
    const char d = options.delimiter;
    if (d == '"' || d == '\n' || d == '\r' || d == ' ' || d == '\0' || d == '.' || d == '-' ||
        d == '+' || (d >= '0' && d <= '9')) {
      return Error(std::string("CsvOptions::delimiter ") + Quoted(std::string_view(&d, 1)) +
                   " cannot separate numbers");
    }
    if (options.class_labels && options.target_columns.size() != 1) {
      return Error("class labels need exactly one target column, not " +
                   std::to_string(options.target_columns.size()));
    }
    // No targets is allowed only for features named one by one (data to predict on).
    if (options.target_columns.empty() && options.feature_columns.empty()) {
      return Error("no target column given (set CsvOptions::target_columns)");
    }
    return OkStatus();
  }

  Status ReadHeader(std::string_view line) {
    splitter.Split(line);
    for (size_t c = 0; c < splitter.fields().size(); ++c) {
      const Field& field = splitter.fields()[c];
      if (field.error != nullptr) {
        return Error("line 1 (the header), column " + std::to_string(c + 1) + ": " + field.error +
                     ": " + Quoted(field.text));
      }
      std::string column(field.text);
      if (field.quoted) {
        // "" inside quotes is one quote.
        for (size_t at = column.find("\"\""); at != std::string::npos;
             at = column.find("\"\"", at + 1)) {
          column.erase(at, 1);
        }
      }
      if (column.empty()) {
        return Error("line 1 (the header), column " + std::to_string(c + 1) +
                     ": empty column name");
      }
      const auto [it, inserted] = index.emplace(column, static_cast<int64_t>(c));
      if (!inserted) {
        return Error("line 1 (the header): duplicate column name '" + column + "' (columns " +
                     std::to_string(it->second + 1) + " and " + std::to_string(c + 1) + ")");
      }
      header.push_back(std::move(column));
    }
    return OkStatus();
  }

  Status ResolveColumns() {
    destinations.assign(header.size(), Destination());
    const std::string columns = Join(header, ", ");
    for (size_t t = 0; t < options.target_columns.size(); ++t) {
      const std::string& column = options.target_columns[t];
      const auto it = index.find(column);
      if (it == index.end()) {
        return Error("no column named '" + column + "'; columns are: " + columns);
      }
      Destination& destination = destinations[static_cast<size_t>(it->second)];
      if (destination.kind != Destination::kSkip) {
        return Error("target column '" + column + "' is listed twice");
      }
      destination = {Destination::kTarget, static_cast<int64_t>(t)};
      schema.target_names.push_back(column);
    }
    if (options.feature_columns.empty()) {
      for (size_t c = 0; c < header.size(); ++c) {
        if (destinations[c].kind != Destination::kSkip) continue;
        destinations[c] = {Destination::kFeature,
                           static_cast<int64_t>(schema.feature_names.size())};
        schema.feature_names.push_back(header[c]);
      }
      if (schema.feature_names.empty()) {
        return Error("no feature columns: every column (" + columns + ") is a target");
      }
      return OkStatus();
    }
    for (size_t f = 0; f < options.feature_columns.size(); ++f) {
      const std::string& column = options.feature_columns[f];
      const auto it = index.find(column);
      if (it == index.end()) {
        return Error("feature column '" + column +
                     "' is not in the header; columns are: " + columns);
      }
      Destination& destination = destinations[static_cast<size_t>(it->second)];
      if (destination.kind == Destination::kTarget) {
        return Error("column '" + column + "' is both a target and a feature");
      }
      if (destination.kind == Destination::kFeature) {
        return Error("feature column '" + column + "' is listed twice");
      }
      destination = {Destination::kFeature, static_cast<int64_t>(f)};
      schema.feature_names.push_back(column);
    }
    return OkStatus();
  }

  std::string name;
  CsvOptions options;
  LineSplitter splitter;
  std::vector<std::string> header;
  std::unordered_map<std::string, int64_t> index;
  std::vector<Destination> destinations;
  Schema schema;
};

CsvLineParser::CsvLineParser(std::unique_ptr<State> state) : state_(std::move(state)) {}
CsvLineParser::CsvLineParser(CsvLineParser&&) noexcept = default;
CsvLineParser& CsvLineParser::operator=(CsvLineParser&&) noexcept = default;
CsvLineParser::~CsvLineParser() = default;

StatusOr<CsvLineParser> CsvLineParser::Create(std::string_view header, std::string name,
                                              const CsvOptions& options) {
  auto state = std::make_unique<State>(std::move(name), options);
  TOWER_RETURN_IF_ERROR(state->CheckOptions());
  TOWER_RETURN_IF_ERROR(state->ReadHeader(header));
  TOWER_RETURN_IF_ERROR(state->ResolveColumns());
  return CsvLineParser(std::move(state));
}

Status CsvLineParser::CheckOptions(std::string name, const CsvOptions& options) {
  return State(std::move(name), options).CheckOptions();
}

const Schema& CsvLineParser::schema() const { return state_->schema; }
const std::string& CsvLineParser::name() const { return state_->name; }
Status CsvLineParser::Error(const std::string& message) const { return state_->Error(message); }

std::string CsvLineParser::Where(int64_t line_number, int64_t byte) {
  if (line_number > 0) return "line " + std::to_string(line_number);
  return "the line at byte " + std::to_string(byte);
}

Status CsvLineParser::ParseLine(std::string_view line, int64_t line_number, int64_t byte,
                                float* features, float* targets, std::vector<std::string>* labels) {
  State& s = *state_;
  if (!(s.options.class_labels && labels != nullptr) &&
      ParsePlainLine(line, s.options.delimiter, s.destinations, features, targets)) {
    return OkStatus();
  }
  s.splitter.Split(line);
  const std::vector<Field>& fields = s.splitter.fields();
  const int64_t columns = static_cast<int64_t>(s.header.size());
  for (size_t c = 0; c < fields.size(); ++c) {
    if (fields[c].error != nullptr) {
      return Error(Where(line_number, byte) + ", " + s.ColumnName(static_cast<int64_t>(c)) + ": " +
                   fields[c].error + ": " + Quoted(fields[c].text));
    }
  }
  if (static_cast<int64_t>(fields.size()) != columns) {
    return Error(Where(line_number, byte) + " has " + std::to_string(fields.size()) + " field" +
                 (fields.size() == 1 ? "" : "s") + ", the header has " + std::to_string(columns));
  }
  for (int64_t c = 0; c < columns; ++c) {
    const Destination& destination = s.destinations[static_cast<size_t>(c)];
    if (destination.kind == Destination::kSkip) continue;
    const Field& field = fields[static_cast<size_t>(c)];
    if (destination.kind == Destination::kTarget && s.options.class_labels && labels != nullptr) {
      labels->push_back(LabelText(field));
      if (labels->back().empty()) {
        return Error(Where(line_number, byte) + ", " + s.ColumnName(c) + ": an empty class label");
      }
      continue;  // mapped to ids once every label is known
    }
    float value = 0;
    const CellError error = ParseCell(field.text, &value);
    if (error != CellError::kNone) {
      return Error(Where(line_number, byte) + ", " + s.ColumnName(c) + ": " +
                   CellErrorText(error, field.text));
    }
    if (destination.kind == Destination::kFeature) {
      features[destination.slot] = value;
    } else {
      targets[destination.slot] = value;
    }
  }
  return OkStatus();
}

bool IsBlankCsvLine(std::string_view line) { return IsBlank(line); }

namespace {

class Parser {
 public:
  Parser(std::string_view name, const CsvOptions& options) : name_(name), options_(options) {}

  StatusOr<CsvTable> Parse(std::string_view text) {
    // A UTF-8 byte order mark, as spreadsheet programs write it.
    if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    if (IsBlank(TrimNewlines(text))) {
      // The options are checked before the header.
      TOWER_RETURN_IF_ERROR(CsvLineParser::CheckOptions(std::string(name_), options_));
      return Error("the file is empty; the first line must be a header of column names");
    }
    LineReader reader(text);
    std::string_view line;
    reader.Next(&line);
    if (IsBlank(line)) {
      TOWER_RETURN_IF_ERROR(CsvLineParser::CheckOptions(std::string(name_), options_));
      return Error("line 1 is empty; the first line must be a header of column names");
    }
    TOWER_ASSIGN_OR_RETURN(CsvLineParser parser,
                           CsvLineParser::Create(line, std::string(name_), options_));
    CsvTable table;
    const Schema& schema = parser.schema();
    const int64_t feature_dim = static_cast<int64_t>(schema.feature_names.size());
    const int64_t target_dim = static_cast<int64_t>(schema.target_names.size());
    // A row per remaining line, near enough, so the arrays grow once.
    int64_t expected_rows = 1;
    for (size_t i = reader.position(); i < text.size(); ++i) expected_rows += text[i] == '\n';
    table.features.reserve(static_cast<size_t>(expected_rows * feature_dim));
    table.targets.reserve(static_cast<size_t>(expected_rows * target_dim));
    table.lines.reserve(static_cast<size_t>(expected_rows));

    // Blank lines are allowed only at the end: one is an error once a row follows it.
    int64_t first_blank_line = 0;
    std::vector<float> features(static_cast<size_t>(feature_dim));
    std::vector<float> targets(static_cast<size_t>(target_dim));
    std::vector<std::string> labels;  // with class_labels: each row's label as written
    while (reader.Next(&line)) {
      const int64_t line_number = reader.line_number();
      if (IsBlank(line)) {
        if (first_blank_line == 0) first_blank_line = line_number;
        continue;
      }
      if (first_blank_line != 0) {
        return Error("line " + std::to_string(first_blank_line) +
                     " is empty (blank lines are allowed only at the end of the file)");
      }
      TOWER_RETURN_IF_ERROR(
          parser.ParseLine(line, line_number, 0, features.data(), targets.data(), &labels));
      table.features.insert(table.features.end(), features.begin(), features.end());
      table.targets.insert(table.targets.end(), targets.begin(), targets.end());
      table.lines.push_back(line_number);
    }
    table.rows = static_cast<int64_t>(table.lines.size());
    if (table.rows == 0) return Error("the file has a header (line 1) but no data rows");
    schema_ = schema;
    if (options_.class_labels) TOWER_RETURN_IF_ERROR(MapLabels(labels, &table));
    table.schema = schema_;
    return table;
  }

  // The labels as class ids (see CsvOptions::class_labels), into table->targets.
  Status MapLabels(const std::vector<std::string>& labels, CsvTable* table) {
    std::vector<std::string> names = options_.class_names;
    if (names.empty()) {
      // All integers: ids as they are.
      bool numeric = true;
      std::vector<float> ids;
      for (const std::string& label : labels) {
        float value = 0;
        if (ParseCell(label, &value) != CellError::kNone) {
          numeric = false;
          break;
        }
        ids.push_back(value);
      }
      if (numeric) {
        table->targets = std::move(ids);
        return OkStatus();
      }
      names = labels;
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
      schema_.class_names = names;
    } else {
      schema_.class_names = names;
    }
    std::unordered_map<std::string, int64_t> id;
    for (size_t k = 0; k < names.size(); ++k) id.emplace(names[k], static_cast<int64_t>(k));
    table->targets.resize(labels.size());
    for (size_t r = 0; r < labels.size(); ++r) {
      const auto it = id.find(labels[r]);
      if (it == id.end()) {
        return Error("line " + std::to_string(table->lines[r]) + ": class '" + labels[r] +
                     "' is not one of the model's classes (" + Join(names, ", ") + ")");
      }
      table->targets[r] = static_cast<float>(it->second);
    }
    return OkStatus();
  }

 private:
  Status Error(const std::string& message) const {
    return InvalidArgumentError(std::string(name_) + ": " + message);
  }

  static std::string_view TrimNewlines(std::string_view text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    return text;
  }

  std::string_view name_;
  const CsvOptions& options_;
  Schema schema_;
};

}  // namespace

StatusOr<CsvTable> ParseCsv(std::string_view text, std::string_view name,
                            const CsvOptions& options) {
  return Parser(name, options).Parse(text);
}

StatusOr<CsvTable> ReadCsv(const std::string& path, const CsvOptions& options) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return NotFoundError(path + ": no such file");
    }
    return InvalidArgumentError(path + ": cannot open: " + std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) {
    return InvalidArgumentError(path + ": is a directory, not a CSV file");
  }
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return InvalidArgumentError(path + ": cannot open: " + std::strerror(errno));
  }
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const size_t got = std::fread(buffer, 1, sizeof(buffer), file);
    text.append(buffer, got);
    if (got < sizeof(buffer)) break;
  }
  const bool failed = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);
  if (failed) {
    return InvalidArgumentError(path + ": cannot read: " + std::strerror(error));
  }
  return ParseCsv(text, path, options);
}

}  // namespace tower::data
