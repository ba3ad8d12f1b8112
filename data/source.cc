#include "data/source.h"

namespace tower::data {

std::string Source::DescribeRow(int64_t row) const { return "row " + std::to_string(row); }

}  // namespace tower::data
