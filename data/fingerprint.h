// A fingerprint of a source's content, so that workers on several hosts can check before the
// first step that they read the same data (a stale copy on one host trains silently wrong).
#ifndef TOWER_DATA_FINGERPRINT_H_
#define TOWER_DATA_FINGERPRINT_H_

#include <string>

#include "data/source.h"
#include "util/statusor.h"

namespace tower::data {

// "600 rows of 10 features (x0..x9) and 1 target (y), content fnv1a64 0123456789abcdef":
// the column names, the shape, and a 64-bit FNV-1a hash of every row's feature and target
// bytes in row order (one read pass over the source). An endless (synthetic) source is
// described by its shape and names alone. Fails as the source's reads fail.
StatusOr<std::string> DescribeContent(const Source& source);

}  // namespace tower::data

#endif  // TOWER_DATA_FINGERPRINT_H_
