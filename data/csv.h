// CSV files of numbers: a header row of column names, then one row per line.
//
//   label,x1,x2
//   1, 0.5, -2
//   0, "1e-3", .5
//
// Cells are numbers (leading and trailing spaces allowed, quotes allowed); "nan", "inf",
// empty cells and anything else are errors. A UTF-8 byte order mark is skipped, CRLF line
// ends are accepted, blank lines at the end are ignored. Every error is InvalidArgument
// (NotFound for a file that does not exist) and says where: the file, the 1-based line, and
// for a cell the column by name and 1-based index:
//   data.csv: line 5, column 'x' (2): 'abc' is not a number
#ifndef TOWER_DATA_CSV_H_
#define TOWER_DATA_CSV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/schema.h"
#include "util/statusor.h"

namespace tower::data {

struct CsvOptions {
  // Columns that make the targets, in this order; at least one, unless feature_columns
  // names the features (data to predict on has no targets).
  std::vector<std::string> target_columns;
  // Columns that make the features, in this order; empty = every non-target column in file
  // order. Columns that are neither are not parsed (they may hold text, such as an id).
  std::vector<std::string> feature_columns;
  char delimiter = ',';
  // The (one) target column holds class labels. Integer labels are class ids as they are;
  // text labels ("setosa") become ids: their positions in `class_names` when it is given (a
  // label outside it is an error naming the line), else in sorted order, which the table's
  // schema then lists (Schema::class_names).
  bool class_labels = false;
  std::vector<std::string> class_names;
};

// A parsed file, in memory.
struct CsvTable {
  Schema schema;
  int64_t rows = 0;
  std::vector<float> features;  // [rows, schema.feature_names.size()]
  std::vector<float> targets;   // [rows, schema.target_names.size()]
  std::vector<int64_t> lines;   // 1-based line of each row in the file
};

// One file's header and cell rules, for readers that see a file a line at a time
// (data/csv_stream.h). ParseCsv is built on it: both give the same values and messages.
// Not thread-safe (it reuses its field buffer); move-only.
class CsvLineParser {
 public:
  // `header`: line 1 without its line end and byte order mark, not blank. Checks the options
  // and resolves the columns; every error starts with `name` (the file).
  static StatusOr<CsvLineParser> Create(std::string_view header, std::string name,
                                        const CsvOptions& options);
  // The checks of the options alone (Create makes them too).
  static Status CheckOptions(std::string name, const CsvOptions& options);
  CsvLineParser(CsvLineParser&&) noexcept;
  CsvLineParser& operator=(CsvLineParser&&) noexcept;
  ~CsvLineParser();

  const Schema& schema() const;
  const std::string& name() const;

  // Parses a data line (no line end, not blank) into features [feature_dim] and targets
  // [target_dim]. For messages the line is "line N" when `line_number` > 0, else "the line
  // at byte B" (`byte`: its 0-based offset in the file, for a reader that started mid-file).
  // With class_labels and `labels` given, the label's text is appended to *labels and
  // targets are left alone (ids are assigned once every label is known); with no `labels`
  // the label must be a number (a class id).
  Status ParseLine(std::string_view line, int64_t line_number, int64_t byte, float* features,
                   float* targets, std::vector<std::string>* labels = nullptr);

  // "name: message", InvalidArgument.
  Status Error(const std::string& message) const;
  // "line 12", or "the line at byte 3456" when the line number is not known (0).
  static std::string Where(int64_t line_number, int64_t byte);

 private:
  struct State;
  explicit CsvLineParser(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Whether `line` holds only spaces, tabs and line-end characters.
bool IsBlankCsvLine(std::string_view line);

// Parses `text`; `name` (the file name) starts every error message.
StatusOr<CsvTable> ParseCsv(std::string_view text, std::string_view name,
                            const CsvOptions& options);

// Reads the whole file at `path` and parses it.
StatusOr<CsvTable> ReadCsv(const std::string& path, const CsvOptions& options);

}  // namespace tower::data

#endif  // TOWER_DATA_CSV_H_
