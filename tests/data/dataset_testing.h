// Helpers for the data/ tests: small numbered datasets and whole-pass collection.
#ifndef TOWER_TESTS_DATA_DATASET_TESTING_H_
#define TOWER_TESTS_DATA_DATASET_TESTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace tower::data::testing {

// `rows` rows; feature j of row r is r·10 + j (feature_dim of them), its one target is -r.
Dataset Numbered(int64_t rows, int64_t feature_dim = 2);

// Every element of one pass (at most `limit`); an error fails the calling test through the
// returned status.
StatusOr<std::vector<Batch>> Collect(const Dataset& dataset, int64_t epoch = 0,
                                     int64_t limit = 1 << 24);

// The source rows of the batches, in order.
std::vector<int64_t> Rows(const std::vector<Batch>& batches);
// The row count of each batch.
std::vector<int64_t> Sizes(const std::vector<Batch>& batches);

// Checks that every row of every batch holds the Numbered() data of its source row; returns
// a description of the first mismatch, or "".
std::string CheckNumberedContents(const std::vector<Batch>& batches);

// Writes `contents` to a file in TEST_TMPDIR and returns its path.
std::string WriteTempFile(const std::string& name, const std::string& contents);

}  // namespace tower::data::testing

#endif  // TOWER_TESTS_DATA_DATASET_TESTING_H_
