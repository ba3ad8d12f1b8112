#include "data/fingerprint.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <vector>

namespace tower::data {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

void Mix(const void* bytes, size_t size, uint64_t* hash) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  uint64_t h = *hash;
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * kFnvPrime;
  *hash = h;
}

std::string Names(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  if (names.size() == 1) return " (" + names[0] + ")";
  return " (" + names.front() + ".." + names.back() + ")";
}

}  // namespace

StatusOr<std::string> DescribeContent(const Source& source) {
  const int64_t features = source.feature_dim();
  const int64_t targets = source.target_dim();
  const Schema& schema = source.schema();
  std::string text = std::to_string(features) + " features" + Names(schema.feature_names) +
                     " and " + std::to_string(targets) + " target" + (targets == 1 ? "" : "s") +
                     Names(schema.target_names);
  if (!schema.class_names.empty()) text += ", classes " + Names(schema.class_names);
  const int64_t rows = source.num_rows();
  if (rows < 0) return "endless rows of " + text;
  uint64_t hash = kFnvOffset;
  // Names and class names count too: the same numbers under other columns are other data.
  for (const auto* list : {&schema.feature_names, &schema.target_names, &schema.class_names}) {
    for (const std::string& name : *list) Mix(name.data(), name.size() + 1, &hash);
  }
  constexpr int64_t kChunk = 4096;  // rows per read
  std::vector<int64_t> index(static_cast<size_t>(std::min(rows, kChunk)));
  std::vector<float> x(index.size() * static_cast<size_t>(features));
  std::vector<float> y(index.size() * static_cast<size_t>(targets));
  for (int64_t first = 0; first < rows; first += kChunk) {
    const int64_t n = std::min(kChunk, rows - first);
    std::iota(index.begin(), index.begin() + n, first);
    TOWER_RETURN_IF_ERROR(source.Read(index.data(), n, x.data(), y.data()));
    // Row by row (features, then targets), whatever the chunking.
    for (int64_t r = 0; r < n; ++r) {
      Mix(x.data() + r * features, static_cast<size_t>(features) * sizeof(float), &hash);
      Mix(y.data() + r * targets, static_cast<size_t>(targets) * sizeof(float), &hash);
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return std::to_string(rows) + " rows of " + text + ", content fnv1a64 " + hex;
}

}  // namespace tower::data
