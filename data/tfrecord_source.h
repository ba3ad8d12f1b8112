// TfRecordSource: rows from TFRecord files of tf.train.Example (data/tfrecord.h,
// data/example_proto.h), as TensorFlow writes them with tf.io.TFRecordWriter, one row per
// record, files one after another.
//
// Features are chosen by name: each float_list or int64_list feature gives as many columns as
// it has values (a feature of length 1: one column named after it; of length n: "name[0]" ..
// "name[n-1]"); int64 values become float32. The first record fixes each feature's kind and
// length; every record of every file is checked against it when the source is opened (one pass,
// which also indexes the records: 8 bytes each, no feature data kept), so that a bad record
// is reported before training, with its file and 0-based record:
//   train.tfrecord: record 7 (byte 1180): feature 'x' is missing (the first record has it)
// Read reads (MappedFile::ReadAt) and decodes the rows it is asked for.
#ifndef TOWER_DATA_TFRECORD_SOURCE_H_
#define TOWER_DATA_TFRECORD_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/example_proto.h"
#include "data/source.h"
#include "data/tfrecord.h"
#include "util/statusor.h"

namespace tower::data {

struct TfRecordOptions {
  // Features that make the targets, in this order; at least one.
  std::vector<std::string> target_features;
  // Features that make the inputs, in this order; empty: every float_list and int64_list
  // feature of the first record that is not a target, in name order (bytes_list features are
  // left out).
  std::vector<std::string> features;
};

class TfRecordSource final : public Source {
 public:
  // `paths`: one or more files, read in this order.
  static StatusOr<std::shared_ptr<const TfRecordSource>> Open(const std::vector<std::string>& paths,
                                                              const TfRecordOptions& options);

  int64_t num_rows() const override { return first_row_.back(); }
  int64_t feature_dim() const override { return feature_dim_; }
  int64_t target_dim() const override { return target_dim_; }
  const Schema& schema() const override { return schema_; }
  Status Read(const int64_t* rows, int64_t n, float* features, float* targets) const override;
  // "train.tfrecord: record 12".
  std::string DescribeRow(int64_t row) const override;

 private:
  struct Column {
    std::string name;
    FeatureKind kind = FeatureKind::kNone;
    int64_t length = 0;  // values per record
    bool target = false;
    int64_t offset = 0;  // where its values start in a features (or targets) row
  };
  // Per-call scratch of DecodeRow.
  struct Scratch {
    std::string record;
    FeatureList list;
    std::vector<char> seen;
  };

  TfRecordSource() = default;
  // The columns from the first record (a serialized Example).
  Status SetColumns(std::string_view example, const TfRecordOptions& options);
  // Decodes one record into a features row and a targets row (either may be null: checked,
  // not stored).
  Status DecodeRow(std::string_view example, float* features, float* targets,
                   Scratch* scratch) const;

  std::vector<std::unique_ptr<TfRecordReader>> files_;
  std::vector<int64_t> first_row_{0};  // file i's rows are [first_row_[i], first_row_[i + 1])
  std::vector<Column> columns_;
  std::unordered_map<std::string_view, size_t> column_of_;  // keys: columns_' names
  int64_t feature_dim_ = 0;
  int64_t target_dim_ = 0;
  Schema schema_;
};

}  // namespace tower::data

#endif  // TOWER_DATA_TFRECORD_SOURCE_H_
