// Fuzzes the CSV reader (data/csv.h): ParseCsv on the whole input, with options taken from
// the input itself so that most inputs get past the header.
//
// The first byte picks the delimiter (',' ';' '\t' '|') and which columns are targets and
// features; the rest is the file. Targets are the first header field (and the second, for
// some first bytes), cut from the header naively (up to the delimiter, quotes and spaces
// stripped), plus fixed names ("y", "label") for others.
//
// Invariants of a parsed table:
//  - rows > 0, every row comes from line 2, 3, ... in order (blank lines only at the end);
//  - features/targets hold rows * columns values, every one finite;
//  - schema names are the columns asked for, in order (features: the others, in file order);
//  - writing the table back as CSV (every name quoted, every value exact) and parsing that
//    gives the same schema and bit-identical values.
// Every error is InvalidArgument, starts with the file name and is one line.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "data/csv.h"
#include "util/check.h"

namespace {

using tower::data::CsvOptions;
using tower::data::CsvTable;

constexpr char kName[] = "fuzz.csv";

// The header's first fields, split naively (no quote handling beyond stripping).
std::vector<std::string> NaiveHeader(std::string_view text, char delimiter) {
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  text = text.substr(0, text.find('\n'));
  std::vector<std::string> fields;
  while (fields.size() < 3) {
    const size_t end = text.find(delimiter);
    std::string field(text.substr(0, end));
    std::string stripped;
    for (char c : field) {
      if (c != '"' && c != ' ' && c != '\t' && c != '\r') stripped += c;
    }
    fields.push_back(stripped);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return fields;
}

std::string QuoteName(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Exact(float value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", static_cast<double>(value));
  return text;
}

// The table as CSV text, every column used: targets first, then features.
std::string Write(const CsvTable& table, char delimiter) {
  const auto& targets = table.schema.target_names;
  const auto& features = table.schema.feature_names;
  std::string out;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (i > 0) out += delimiter;
    out += QuoteName(targets[i]);
  }
  for (const std::string& name : features) out += delimiter + QuoteName(name);
  out += "\r\n";  // CRLF and LF are both line ends
  for (int64_t r = 0; r < table.rows; ++r) {
    for (size_t t = 0; t < targets.size(); ++t) {
      if (t > 0) out += delimiter;
      out += Exact(table.targets[r * targets.size() + t]);
    }
    for (size_t f = 0; f < features.size(); ++f) {
      out += delimiter;
      out += Exact(table.features[r * features.size() + f]);
    }
    out += '\n';
  }
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void CheckError(const tower::Status& status) {
  TOWER_CHECK(status.code() == tower::StatusCode::kInvalidArgument) << status.ToString();
  TOWER_CHECK(status.message().rfind(std::string(kName) + ": ", 0) == 0) << status.ToString();
  TOWER_CHECK(status.message().find('\n') == std::string::npos) << status.ToString();
}

void CheckTable(const CsvTable& table, const CsvOptions& options) {
  const size_t feature_dim = table.schema.feature_names.size();
  const size_t target_dim = table.schema.target_names.size();
  TOWER_CHECK(table.rows > 0);
  TOWER_CHECK(table.schema.target_names == options.target_columns);
  if (!options.feature_columns.empty()) {
    TOWER_CHECK(table.schema.feature_names == options.feature_columns);
  }
  TOWER_CHECK(feature_dim > 0);
  TOWER_CHECK(table.features.size() == static_cast<size_t>(table.rows) * feature_dim);
  TOWER_CHECK(table.targets.size() == static_cast<size_t>(table.rows) * target_dim);
  TOWER_CHECK(table.lines.size() == static_cast<size_t>(table.rows));
  for (size_t r = 0; r < table.lines.size(); ++r) {
    TOWER_CHECK(table.lines[r] == static_cast<int64_t>(r) + 2) << "row " << r << " from line "
                                                                << table.lines[r];
  }
  for (float v : table.features) TOWER_CHECK(std::isfinite(v));
  for (float v : table.targets) TOWER_CHECK(std::isfinite(v));

  // Write it back and read that: the same table.
  const std::string text = Write(table, options.delimiter);
  CsvOptions again_options;
  again_options.delimiter = options.delimiter;
  again_options.target_columns = table.schema.target_names;
  again_options.feature_columns = table.schema.feature_names;
  tower::StatusOr<CsvTable> again = tower::data::ParseCsv(text, kName, again_options);
  TOWER_CHECK(again.ok()) << again.status().ToString() << "\n" << text;
  TOWER_CHECK(again->schema.target_names == table.schema.target_names);
  TOWER_CHECK(again->schema.feature_names == table.schema.feature_names);
  TOWER_CHECK(again->rows == table.rows);
  TOWER_CHECK(SameBits(again->features, table.features)) << text;
  TOWER_CHECK(SameBits(again->targets, table.targets)) << text;
}

void Run(std::string_view text, const CsvOptions& options) {
  tower::StatusOr<CsvTable> table = tower::data::ParseCsv(text, kName, options);
  if (table.ok()) {
    CheckTable(*table, options);
  } else {
    CheckError(table.status());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  static constexpr char kDelimiters[] = {',', ';', '\t', '|'};
  CsvOptions options;
  options.delimiter = kDelimiters[mode & 3];
  const std::vector<std::string> header = NaiveHeader(text, options.delimiter);
  switch ((mode >> 2) & 3) {
    case 0:  // the first column is the target, the others features
      options.target_columns = {header[0]};
      break;
    case 1:  // the first two columns are targets
      options.target_columns = {header[0]};
      if (header.size() > 1) options.target_columns.push_back(header[1]);
      break;
    case 2:  // the last naive field is the target, the first the only feature
      options.target_columns = {header.back()};
      options.feature_columns = {header[0]};
      break;
    case 3:
      options.target_columns = {(mode & 0x10) ? "label" : "y"};
      break;
  }
  Run(text, options);
  return 0;
}
