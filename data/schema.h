// Schema: the names of a dataset's columns, features first then targets, in order.
#ifndef TOWER_DATA_SCHEMA_H_
#define TOWER_DATA_SCHEMA_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tower::data {

struct Schema {
  std::vector<std::string> feature_names;
  std::vector<std::string> target_names;
  // A class column of text labels (CsvOptions::class_labels): class id i is named
  // class_names[i]. Empty for numeric targets and numeric class ids.
  std::vector<std::string> class_names;
};

// Default names for unnamed columns: features "x0".."x{n-1}"; targets "y" when there is one,
// "y0".."y{n-1}" when there are several.
Schema DefaultSchema(int64_t feature_dim, int64_t target_dim);

}  // namespace tower::data

#endif  // TOWER_DATA_SCHEMA_H_
