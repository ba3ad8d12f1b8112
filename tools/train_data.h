// The data of `tower train`: a CSV file or a synthetic workload loaded, class ids checked, the
// validation rows chosen (--validation-split or --validation-data), and the target statistics
// of --normalize-target.
#ifndef TOWER_TOOLS_TRAIN_DATA_H_
#define TOWER_TOOLS_TRAIN_DATA_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/csv_stream.h"
#include "data/dataset.h"
#include "util/status.h"

namespace tower {

struct Prepared {
  data::Dataset dataset;
  std::string synthetic;  // the workload name, or "" for CSV
  std::string features;   // --features, for a --validation-data file
  // Streamed CSV (tools/train_stream.h): the files; `dataset` is then one pass over them all.
  std::shared_ptr<const data::CsvFileSet> files;
};

// `spec`: a CSV file (with `target` naming its target columns), a .npy, .npz or TFRecord
// file (tools/binary_data.h) or synthetic:... . A classifier's CSV target may hold class names
// (`class_labels`), mapped as `class_names` says (empty: sorted). `features` (--features):
// the feature columns, arrays or features to read (empty: all but the targets).
StatusOr<Prepared> LoadData(const std::string& spec, const std::string& target,
                            bool class_labels = false,
                            const std::vector<std::string>& class_names = {},
                            const std::string& features = "");

// The files `tower train` reads, as given: --data's comma-separated files or globs, a .npy
// --target, and --validation-data's (synthetic data: none).
struct InputFiles {
  std::string data;        // --data
  std::string target;      // --target
  std::string validation;  // --validation-data
};

// Whether `status`, an error that stopped training, is bad input met mid-run (a cell that is
// not a number deep in a streamed file, a file that shrank or changed while read): an
// InvalidArgument or DataLoss error whose message starts with a file `files` names (matched
// as globs: "part-*.tfrecord" names "part-3.tfrecord: record 7 ..."). `tower train` exits 2
// for it, as for bad input found before training, and 1 for any other failure.
bool IsInputError(const Status& status, const InputFiles& files);

// Class ids must be integers in [0, classes): checked for every row before training, so a
// bad label is reported with its file and line ("d.csv:12") instead of mid-run. A stream's
// are checked as its rows are read (data::ShardedBatchOptions::class_count) instead.
Status CheckClassIds(const data::Dataset& dataset, int64_t classes);

struct ValidationFlags {
  double split = 0;  // --validation-split: the last fraction of the rows
  std::string data;  // --validation-data: a file with the training data's columns
  std::string target;  // --target, for that file
};

// The validation data: the last --validation-split of the rows (Keras's validation_split,
// taken before any shuffle), or --validation-data. `training` becomes the rest
// (`training_rows` of it); `validation` stays empty without either. `classes`: a classifier's
// class count, whose ids the validation file's rows are checked against.
Status PrepareValidation(const ValidationFlags& flags, const Prepared& prepared, int64_t rows,
                         std::optional<int64_t> classes, data::Dataset* training,
                         int64_t* training_rows, std::optional<data::Dataset>* validation);

// Each target column's mean and population standard deviation over `data`'s rows, as
// SetTargetNormalization takes them (a constant column: std 1).
StatusOr<std::pair<std::vector<float>, std::vector<float>>> TargetStatistics(
    const data::Dataset& data);

}  // namespace tower

#endif  // TOWER_TOOLS_TRAIN_DATA_H_
