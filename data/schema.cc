#include "data/schema.h"

namespace tower::data {

Schema DefaultSchema(int64_t feature_dim, int64_t target_dim) {
  Schema schema;
  schema.feature_names.reserve(static_cast<size_t>(feature_dim));
  for (int64_t i = 0; i < feature_dim; ++i) schema.feature_names.push_back("x" + std::to_string(i));
  if (target_dim == 1) {
    schema.target_names.push_back("y");
  } else {
    for (int64_t i = 0; i < target_dim; ++i) schema.target_names.push_back("y" + std::to_string(i));
  }
  return schema;
}

}  // namespace tower::data
