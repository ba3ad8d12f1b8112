// CSV: malformed files, each with its exact message (file, line, column), and well-formed
// variants.
#include "data/csv.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "tests/data/dataset_testing.h"

namespace tower::data {
namespace {

using testing::Collect;
using testing::WriteTempFile;

CsvOptions Targets(std::vector<std::string> targets, std::vector<std::string> features = {}) {
  CsvOptions options;
  options.target_columns = std::move(targets);
  options.feature_columns = std::move(features);
  return options;
}

struct Malformed {
  const char* name;
  std::string contents;
  CsvOptions options;
  std::string message;  // after "<path>: "
};

TEST(CsvTest, MalformedFilesSayWhatAndWhere) {
  const std::vector<Malformed> cases = {
      {"empty", "", Targets({"y"}),
       "the file is empty; the first line must be a header of column names"},
      {"only_newlines", "\n\r\n  \n", Targets({"y"}),
       "the file is empty; the first line must be a header of column names"},
      {"bom_only", "\xEF\xBB\xBF", Targets({"y"}),
       "the file is empty; the first line must be a header of column names"},
      {"blank_header", "\na,y\n1,2\n", Targets({"y"}),
       "line 1 is empty; the first line must be a header of column names"},
      {"header_only", "a,b,y\n", Targets({"y"}), "the file has a header (line 1) but no data rows"},
      {"header_and_blanks", "a,y\r\n\r\n  \n", Targets({"y"}),
       "the file has a header (line 1) but no data rows"},
      {"duplicate_column", "a,b,a,y\n1,2,3,4\n", Targets({"y"}),
       "line 1 (the header): duplicate column name 'a' (columns 1 and 3)"},
      {"empty_column_name", "a, ,y\n1,2,3\n", Targets({"y"}),
       "line 1 (the header), column 2: empty column name"},
      {"ragged_short", "a,b,c,y\n1,2,3,4\n1,2,3,4\n1,2,3,4\n1,2,3,4\n1,2,3,4\n1,2,3\n",
       Targets({"y"}), "line 7 has 3 fields, the header has 4"},
      {"ragged_long", "a,b,c,y\n1,2,3,4\n1,2,3,4,5\n", Targets({"y"}),
       "line 3 has 5 fields, the header has 4"},
      {"ragged_one", "a,y\n1,2\n7\n", Targets({"y"}), "line 3 has 1 field, the header has 2"},
      {"not_a_number", "w,x,y\n1,2,3\n1,2,3\n1,2,3\n1,abc,3\n", Targets({"y"}),
       "line 5, column 'x' (2): 'abc' is not a number"},
      {"two_points", "a,y\n1.2.3,4\n", Targets({"y"}), "line 2, column 'a' (1): '1.2.3' is not a number"},
      {"hex", "a,y\n0x10,4\n", Targets({"y"}), "line 2, column 'a' (1): '0x10' is not a number"},
      {"dangling_exponent", "a,y\n1e,4\n", Targets({"y"}), "line 2, column 'a' (1): '1e' is not a number"},
      {"double_sign", "a,y\n--1,4\n", Targets({"y"}), "line 2, column 'a' (1): '--1' is not a number"},
      {"lone_sign", "a,y\n+,4\n", Targets({"y"}), "line 2, column 'a' (1): '+' is not a number"},
      {"inner_space", "a,y\n1 2,4\n", Targets({"y"}), "line 2, column 'a' (1): '1 2' is not a number"},
      {"nan", "a,y\n1,2\nnan,4\n", Targets({"y"}), "line 3, column 'a' (1): 'nan' is not a finite number"},
      {"inf", "a,y\n1,inf\n", Targets({"y"}), "line 2, column 'y' (2): 'inf' is not a finite number"},
      {"minus_infinity", "a,y\n-Infinity,1\n", Targets({"y"}),
       "line 2, column 'a' (1): '-Infinity' is not a finite number"},
      {"float_overflow", "a,y\n1e40,1\n", Targets({"y"}),
       "line 2, column 'a' (1): '1e40' is out of the float32 range"},
      {"double_overflow", "a,y\n1,-1e400\n", Targets({"y"}),
       "line 2, column 'y' (2): '-1e400' is out of the float32 range"},
      {"empty_cell", "a,b,y\n1,,3\n", Targets({"y"}),
       "line 2, column 'b' (2): empty cell (every cell must hold a number)"},
      {"empty_quoted_cell", "a,b,y\n1,\"\",3\n", Targets({"y"}),
       "line 2, column 'b' (2): empty cell (every cell must hold a number)"},
      {"blank_middle_line", "a,y\n1,2\n\n3,4\n", Targets({"y"}),
       "line 3 is empty (blank lines are allowed only at the end of the file)"},
      {"unterminated_quote", "a,b,y\n1,\"1.5,3\n", Targets({"y"}),
       "line 2, column 'b' (2): unterminated quote: '\"1.5,3'"},
      {"text_after_quote", "a,b,y\n1,\"1\"5,3\n", Targets({"y"}),
       "line 2, column 'b' (2): text after the closing quote: '\"1\"5'"},
      {"quoted_comma", "a,b,y\n1,\"1,5\",3\n", Targets({"y"}),
       "line 2, column 'b' (2): '1,5' is not a number"},
      {"text_in_target", "a,label\n1,yes\n", Targets({"label"}),
       "line 2, column 'label' (2): 'yes' is not a number"},
      {"control_bytes", "a,y\n1\x01,2\n", Targets({"y"}),
       "line 2, column 'a' (1): '1\\x01' is not a number"},
      {"missing_target", "a,b,c\n1,2,3\n", Targets({"z"}), "no column named 'z'; columns are: a, b, c"},
      {"missing_feature", "a,b,c\n1,2,3\n", Targets({"c"}, {"a", "q"}),
       "feature column 'q' is not in the header; columns are: a, b, c"},
      {"no_target", "a,b,c\n1,2,3\n", Targets({}), "no target column given (set CsvOptions::target_columns)"},
      {"target_twice", "a,b,c\n1,2,3\n", Targets({"c", "c"}), "target column 'c' is listed twice"},
      {"feature_twice", "a,b,c\n1,2,3\n", Targets({"c"}, {"a", "a"}), "feature column 'a' is listed twice"},
      {"target_and_feature", "a,b,c\n1,2,3\n", Targets({"c"}, {"a", "c"}),
       "column 'c' is both a target and a feature"},
      {"all_targets", "a,b\n1,2\n", Targets({"a", "b"}), "no feature columns: every column (a, b) is a target"},
  };
  ASSERT_GE(cases.size(), 15u);
  for (const Malformed& c : cases) {
    const std::string path = WriteTempFile(std::string(c.name) + ".csv", c.contents);
    StatusOr<CsvTable> table = ReadCsv(path, c.options);
    EXPECT_EQ(table.status(), InvalidArgumentError(path + ": " + c.message)) << c.name;
    // The Dataset entry point reports the same.
    EXPECT_EQ(Dataset::FromCsv(path, c.options).status(), table.status()) << c.name;
  }
}

TEST(CsvTest, MissingAndUnreadableFiles) {
  const char* dir = std::getenv("TEST_TMPDIR");
  ASSERT_NE(dir, nullptr);
  const std::string missing = std::string(dir) + "/no_such.csv";
  EXPECT_EQ(ReadCsv(missing, Targets({"y"})).status(), NotFoundError(missing + ": no such file"));
  EXPECT_EQ(Dataset::FromCsv(missing, Targets({"y"})).status(),
            NotFoundError(missing + ": no such file"));
  const std::string in_missing_dir = std::string(dir) + "/no_dir/data.csv";
  EXPECT_EQ(ReadCsv(in_missing_dir, Targets({"y"})).status(),
            NotFoundError(in_missing_dir + ": no such file"));
  const std::string directory = std::string(dir) + "/a_directory.csv";
  ::mkdir(directory.c_str(), 0755);
  EXPECT_EQ(ReadCsv(directory, Targets({"y"})).status(),
            InvalidArgumentError(directory + ": is a directory, not a CSV file"));
}

TEST(CsvTest, BadDelimiter) {
  CsvOptions options = Targets({"y"});
  options.delimiter = '"';
  EXPECT_EQ(ParseCsv("a,y\n1,2\n", "mem.csv", options).status(),
            InvalidArgumentError("mem.csv: CsvOptions::delimiter '\"' cannot separate numbers"));
  options.delimiter = '.';
  EXPECT_TRUE(IsInvalidArgument(ParseCsv("a,y\n1,2\n", "mem.csv", options).status()));
}

struct WellFormed {
  const char* name;
  std::string contents;
  CsvOptions options;
  std::vector<std::string> feature_names;
  std::vector<std::string> target_names;
  std::vector<float> features;
  std::vector<float> targets;
  std::vector<int64_t> lines;
};

TEST(CsvTest, WellFormedVariants) {
  CsvOptions semicolon = Targets({"y"});
  semicolon.delimiter = ';';
  CsvOptions tab = Targets({"y"});
  tab.delimiter = '\t';
  const std::vector<WellFormed> cases = {
      {"basic", "a,b,y\n1,2,3\n4,5,6\n", Targets({"y"}), {"a", "b"}, {"y"}, {1, 2, 4, 5}, {3, 6}, {2, 3}},
      {"no_final_newline", "a,b,y\n1,2,3\n4,5,6", Targets({"y"}), {"a", "b"}, {"y"}, {1, 2, 4, 5}, {3, 6}, {2, 3}},
      {"crlf", "a,b,y\r\n1,2,3\r\n4,5,6\r\n", Targets({"y"}), {"a", "b"}, {"y"}, {1, 2, 4, 5}, {3, 6}, {2, 3}},
      {"bom", "\xEF\xBB\xBF" "a,b,y\n1,2,3\n", Targets({"y"}), {"a", "b"}, {"y"}, {1, 2}, {3}, {2}},
      {"quotes", "\"a\",\"b\",\"y\"\n\"1.5\",\" 2 \", \"3\" \n", Targets({"y"}), {"a", "b"}, {"y"},
       {1.5f, 2}, {3}, {2}},
      {"quoted_header_with_quote", "\"say \"\"hi\"\"\",y\n1,2\n", Targets({"y"}), {"say \"hi\""},
       {"y"}, {1}, {2}, {2}},
      {"spaces", " a , b ,y \n 1 ,  2,3  \n\t4\t,5,6\n", Targets({"y"}), {"a", "b"}, {"y"},
       {1, 2, 4, 5}, {3, 6}, {2, 3}},
      {"trailing_blank_lines", "a,y\n1,2\n\n  \r\n\n", Targets({"y"}), {"a"}, {"y"}, {1}, {2}, {2}},
      {"number_forms", "a,b,c,d,e,f,g,y\n1e-3,-2,.5,5.,+3,-.25,1E3,1e-50\n", Targets({"y"}),
       {"a", "b", "c", "d", "e", "f", "g"}, {"y"}, {0.001f, -2, 0.5f, 5, 3, -0.25f, 1000}, {0}, {2}},
      {"target_in_middle", "a,y,b\n1,2,3\n4,5,6\n", Targets({"y"}), {"a", "b"}, {"y"}, {1, 3, 4, 6},
       {2, 5}, {2, 3}},
      {"several_targets_in_given_order", "t1,a,t2\n1,2,3\n", Targets({"t2", "t1"}), {"a"},
       {"t2", "t1"}, {2}, {3, 1}, {2}},
      {"chosen_features_skip_text", "id,x1,x2,y\nabc,1,2,3\n\"d,e\",4,5,6\n", Targets({"y"}, {"x2", "x1"}),
       {"x2", "x1"}, {"y"}, {2, 1, 5, 4}, {3, 6}, {2, 3}},
      {"semicolon", "a;b;y\n1;2.5;3\n", semicolon, {"a", "b"}, {"y"}, {1, 2.5f}, {3}, {2}},
      {"tab", "a\ty\n 1\t2\n", tab, {"a"}, {"y"}, {1}, {2}, {2}},
  };
  for (const WellFormed& c : cases) {
    const std::string path = WriteTempFile(std::string("ok_") + c.name + ".csv", c.contents);
    StatusOr<CsvTable> table = ReadCsv(path, c.options);
    ASSERT_TRUE(table.ok()) << c.name << ": " << table.status();
    EXPECT_EQ(table->schema.feature_names, c.feature_names) << c.name;
    EXPECT_EQ(table->schema.target_names, c.target_names) << c.name;
    EXPECT_EQ(table->features, c.features) << c.name;
    EXPECT_EQ(table->targets, c.targets) << c.name;
    EXPECT_EQ(table->lines, c.lines) << c.name;
    EXPECT_EQ(table->rows, static_cast<int64_t>(c.lines.size())) << c.name;
  }
}

TEST(CsvTest, DatasetKeepsLinesForMessages) {
  const std::string path = WriteTempFile("lines.csv", "x,label\n0.5,1\n\n");
  // A blank line in the middle is an error, so lines are consecutive; the BOM and CRLF do
  // not shift them.
  const std::string crlf =
      WriteTempFile("lines_crlf.csv", "\xEF\xBB\xBFx,label\r\n0.5,1\r\n1.5,0\r\n2.5,3\r\n");
  StatusOr<Dataset> dataset = Dataset::FromCsv(crlf, Targets({"label"}));
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->num_rows(), 3);
  EXPECT_EQ(dataset->feature_dim(), 1);
  EXPECT_EQ(dataset->target_dim(), 1);
  EXPECT_EQ(dataset->schema().feature_names, (std::vector<std::string>{"x"}));
  EXPECT_EQ(dataset->schema().target_names, (std::vector<std::string>{"label"}));
  EXPECT_EQ(dataset->DescribeRow(0), crlf + ":2");
  EXPECT_EQ(dataset->DescribeRow(2), crlf + ":4");
  StatusOr<std::vector<Batch>> batches = Collect(dataset->Batch(2));
  ASSERT_TRUE(batches.ok());
  ASSERT_EQ(batches->size(), 2u);
  EXPECT_EQ((*batches)[0].features, (std::vector<float>{0.5f, 1.5f}));
  EXPECT_EQ((*batches)[1].targets, (std::vector<float>{3}));
  EXPECT_EQ(dataset->DescribeRow((*batches)[1].source_rows[0]) + ": label 3 is not a class id",
            crlf + ":4: label 3 is not a class id");
  StatusOr<Dataset> simple = Dataset::FromCsv(path, Targets({"label"}));
  ASSERT_TRUE(simple.ok()) << simple.status();
  EXPECT_EQ(simple->num_rows(), 1);
}

// Data to predict on: features named one by one, no targets, other columns ignored.
TEST(CsvTest, FeaturesOnlyWhenNamed) {
  CsvOptions options;
  options.feature_columns = {"b", "a"};
  StatusOr<CsvTable> table = ParseCsv("a,note,b\n1,x,2\n3,y,4\n", "mem.csv", options);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->rows, 2);
  EXPECT_EQ(table->features, (std::vector<float>{2, 1, 4, 3}));
  EXPECT_TRUE(table->targets.empty());
  EXPECT_TRUE(table->schema.target_names.empty());
}

// A class column of text: names become ids in sorted order (or the order given), integer
// labels stay ids, and a name outside a given list is an error naming the line.
TEST(CsvTest, ClassLabelsByName) {
  CsvOptions options;
  options.target_columns = {"kind"};
  options.class_labels = true;
  const std::string text = "x,kind\n1,b\n2, a \n3,\"c,d\"\n4,b\n";
  StatusOr<CsvTable> table = ParseCsv(text, "mem.csv", options);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->schema.class_names, (std::vector<std::string>{"a", "b", "c,d"}));
  EXPECT_EQ(table->targets, (std::vector<float>{1, 0, 2, 1}));
  options.class_names = {"c,d", "b", "a"};
  table = ParseCsv(text, "mem.csv", options);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->targets, (std::vector<float>{1, 2, 0, 1}));
  options.class_names = {"a", "b"};
  EXPECT_EQ(ParseCsv(text, "mem.csv", options).status().message(),
            "mem.csv: line 4: class 'c,d' is not one of the model's classes (a, b)");
  options.class_names.clear();
  table = ParseCsv("x,kind\n1,2\n2,0\n", "mem.csv", options);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_TRUE(table->schema.class_names.empty());
  EXPECT_EQ(table->targets, (std::vector<float>{2, 0}));
  EXPECT_EQ(ParseCsv("x,kind\n1, \n", "mem.csv", options).status().message(),
            "mem.csv: line 2, column 'kind' (2): an empty class label");
  options.target_columns = {"x", "kind"};
  EXPECT_EQ(ParseCsv(text, "mem.csv", options).status().message(),
            "mem.csv: class labels need exactly one target column, not 2");
}

TEST(CsvTest, ManyRows) {
  std::string text = "a,b,y\n";
  for (int r = 0; r < 20000; ++r) {
    text += std::to_string(r) + "," + std::to_string(r * 0.5) + "," + std::to_string(-r) + "\n";
  }
  StatusOr<CsvTable> table = ParseCsv(text, "big.csv", Targets({"y"}));
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->rows, 20000);
  EXPECT_EQ(table->features[2 * 19999], 19999.0f);
  EXPECT_EQ(table->features[2 * 19999 + 1], 9999.5f);
  EXPECT_EQ(table->targets[19999], -19999.0f);
  EXPECT_EQ(table->lines[19999], 20001);
}

// Lines of plain decimals take a one-pass path; every other line the general one. Where the
// two could differ (a quote in a column that is not read, which may hide a delimiter), the
// general path decides: these lines give its values and messages.
TEST(CsvTest, LinesWithQuotesOrSpacesInUnreadColumnsReadAsTheGeneralPathReadsThem) {
  CsvOptions options = Targets({"y"}, {"x"});
  const std::string header = "x,s1,s2,y\n";
  StatusOr<CsvTable> quoted =
      ParseCsv(header + "1,\"a\",\"b,c\",2\n3, \"d\" ,e,4\n5,6,7,8\n", "quoted.csv", options);
  ASSERT_TRUE(quoted.ok()) << quoted.status();
  EXPECT_EQ(quoted->features, (std::vector<float>{1, 3, 5}));
  EXPECT_EQ(quoted->targets, (std::vector<float>{2, 4, 8}));
  // A quoted field holding the delimiter: 3 fields, not 4 (split at every comma, the line
  // would have 4 and read as x=1, y=2).
  StatusOr<CsvTable> hidden = ParseCsv(header + "1, \"a,b\",2\n", "hidden.csv", options);
  EXPECT_EQ(hidden.status().message(), "hidden.csv: line 2 has 3 fields, the header has 4");
  StatusOr<CsvTable> spaced = ParseCsv(header + " 1 ,a,b, 2\n-0,a,b,.5\n", "spaced.csv", options);
  ASSERT_TRUE(spaced.ok()) << spaced.status();
  EXPECT_EQ(spaced->features[0], 1.0f);
  EXPECT_TRUE(std::signbit(spaced->features[1]));
  EXPECT_EQ(spaced->targets, (std::vector<float>{2, 0.5f}));
}

// Every number cell reads as strtod's double rounded to float, bit for bit: plain decimals
// (the fast path: at most 19 digits, a fraction of at most 22) and their edges (more digits,
// longer fractions, mantissas past 2^53, signs, a leading or trailing dot, -0) as well as
// exponents (from_chars). strtod is the reference, not the code under test.
TEST(CsvTest, NumbersReadAsStrtodRoundedToFloat) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state](uint64_t below) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state % below;
  };
  std::vector<std::string> cells = {"0",
                                    "-0",
                                    "-0.0",
                                    ".5",
                                    "5.",
                                    "-.25",
                                    "+1.5",
                                    "+.5",
                                    "9007199254740993",
                                    "9007199254740992.5",
                                    "0.1",
                                    "0.30000000000000004",
                                    "1.0000000000000000000001",
                                    "123456789012345678901234",
                                    "1e10",
                                    "-2.5E-3",
                                    "0.000000000000000000000001"};
  for (int i = 0; i < 20000; ++i) {
    std::string cell;
    const uint64_t sign = next(4);
    if (sign == 1) cell += '-';
    if (sign == 2) cell += '+';
    const int digits = 1 + static_cast<int>(next(i % 4 == 0 ? 26 : 12));
    const int dot = static_cast<int>(next(static_cast<uint64_t>(digits + 2)));  // may be none
    for (int d = 0; d < digits; ++d) {
      if (d == dot) cell += '.';
      cell += static_cast<char>('0' + next(10));
    }
    if (dot == digits) cell += '.';
    if (i % 50 == 0) cell += "e" + std::to_string(static_cast<int>(next(20)) - 10);
    cells.push_back(cell);
  }
  // Near ties: the midpoint of two adjacent floats in [1, 8), printed with 15 decimals (16
  // digits, below 2^53: the fast path) or 18 (19 digits, past 2^53: from_chars), lies within
  // a few double ulps of the tie, so the float it rounds to turns on the double's last bits:
  // a double off by one ulp shows.
  for (int i = 0; i < 20000; ++i) {
    const float low = 1.0f + static_cast<float>(next(7000000)) / 1000000.0f;
    const float high = std::nextafter(low, 16.0f);
    const double middle = (static_cast<double>(low) + static_cast<double>(high)) / 2;
    char cell[64];
    std::snprintf(cell, sizeof(cell), i % 2 == 0 ? "%.15f" : "%.18f", middle);
    cells.push_back(cell);
  }
  std::string text = "x,y\n";
  for (const std::string& cell : cells) text += cell + ",1\n";
  StatusOr<CsvTable> table = ParseCsv(text, "numbers.csv", Targets({"y"}));
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->rows, static_cast<int64_t>(cells.size()));
  for (size_t i = 0; i < cells.size(); ++i) {
    const float want = static_cast<float>(std::strtod(cells[i].c_str(), nullptr));
    uint32_t want_bits = 0, got_bits = 0;
    std::memcpy(&want_bits, &want, 4);
    std::memcpy(&got_bits, &table->features[i], 4);
    ASSERT_EQ(got_bits, want_bits)
        << "'" << cells[i] << "': " << table->features[i] << " vs " << want;
  }
}

}  // namespace
}  // namespace tower::data
