#include "tests/data/dataset_testing.h"

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "util/check.h"

namespace tower::data::testing {

Dataset Numbered(int64_t rows, int64_t feature_dim) {
  std::vector<float> features;
  std::vector<float> targets;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < feature_dim; ++j) features.push_back(static_cast<float>(r * 10 + j));
    targets.push_back(static_cast<float>(-r));
  }
  StatusOr<Dataset> dataset = Dataset::FromTensors(features, feature_dim, targets, 1);
  TOWER_CHECK_OK(dataset.status());
  return *dataset;
}

StatusOr<std::vector<Batch>> Collect(const Dataset& dataset, int64_t epoch, int64_t limit) {
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> iterator, dataset.MakeIterator(epoch));
  std::vector<Batch> batches;
  while (static_cast<int64_t>(batches.size()) < limit) {
    TOWER_ASSIGN_OR_RETURN(std::optional<Batch> batch, iterator->Next());
    if (!batch.has_value()) break;
    batches.push_back(std::move(*batch));
  }
  return batches;
}

std::vector<int64_t> Rows(const std::vector<Batch>& batches) {
  std::vector<int64_t> rows;
  for (const Batch& batch : batches) {
    rows.insert(rows.end(), batch.source_rows.begin(), batch.source_rows.end());
  }
  return rows;
}

std::vector<int64_t> Sizes(const std::vector<Batch>& batches) {
  std::vector<int64_t> sizes;
  for (const Batch& batch : batches) sizes.push_back(batch.rows);
  return sizes;
}

std::string CheckNumberedContents(const std::vector<Batch>& batches) {
  for (size_t b = 0; b < batches.size(); ++b) {
    const Batch& batch = batches[b];
    if (static_cast<int64_t>(batch.source_rows.size()) != batch.rows ||
        static_cast<int64_t>(batch.features.size()) != batch.rows * batch.feature_dim ||
        static_cast<int64_t>(batch.targets.size()) != batch.rows * batch.target_dim) {
      return "batch " + std::to_string(b) + " has inconsistent sizes";
    }
    for (int64_t i = 0; i < batch.rows; ++i) {
      const int64_t r = batch.source_rows[static_cast<size_t>(i)];
      for (int64_t j = 0; j < batch.feature_dim; ++j) {
        if (batch.feature_row(i)[j] != static_cast<float>(r * 10 + j)) {
          return "batch " + std::to_string(b) + " row " + std::to_string(i) + " feature " +
                 std::to_string(j) + " is " + std::to_string(batch.feature_row(i)[j]) +
                 ", source row " + std::to_string(r);
        }
      }
      if (batch.target_row(i)[0] != static_cast<float>(-r)) {
        return "batch " + std::to_string(b) + " row " + std::to_string(i) + " target is " +
               std::to_string(batch.target_row(i)[0]) + ", source row " + std::to_string(r);
      }
    }
  }
  return "";
}

std::string WriteTempFile(const std::string& name, const std::string& contents) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  TOWER_CHECK(file != nullptr) << "cannot write " << path;
  TOWER_CHECK(std::fwrite(contents.data(), 1, contents.size(), file) == contents.size());
  std::fclose(file);
  return path;
}

}  // namespace tower::data::testing
