// Dataset: a cheap, copyable description of an input pipeline over a shared, immutable
// source, in the manner of tf.data:
//
//   CsvOptions csv;
//   csv.target_columns = {"y"};
//   TOWER_ASSIGN_OR_RETURN(Dataset train, Dataset::FromCsv("train.csv", csv));
//   train = train.Shuffle(10000, /*seed=*/42).Batch(64).Prefetch();
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     TOWER_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> it, train.MakeIterator(epoch));
//     while (true) {
//       TOWER_ASSIGN_OR_RETURN(std::optional<Batch> batch, it->Next());
//       if (!batch) break;
//       ...
//     }
//   }
//
// Sources are random access (data/source.h): in-memory tensors, a CSV file read whole, .npy
// files and TFRecord files read in place, or a synthetic generator. Before Batch(),
// Shuffle/Repeat/Take/Skip move row indices only; a batch gathers its rows in one Source::Read (one
// memcpy per run of consecutive rows). After Batch() (or Prefetch()), the same operations act on
// whole elements, as in tf.data:
//   Repeat(n).Batch(b)  mixes passes into batches;   Batch(b).Repeat(n) keeps each pass's
//   partial batch;   Batch(b).Shuffle(k) shuffles whole batches.
// Shuffling is deterministic: the order depends on the seed, the epoch given to
// MakeIterator and, under Repeat, the repetition; never on timing or threads.
//
// Invalid arguments (Batch(0), Shuffle(0), Batch after Batch, ...) do not abort: the dataset
// carries the error, status() returns it, and MakeIterator fails with it.
#ifndef TOWER_DATA_DATASET_H_
#define TOWER_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/csv.h"
#include "data/iterator.h"
#include "data/schema.h"
#include "data/source.h"
#include "data/stream.h"
#include "data/synthetic.h"
#include "data/tfrecord_source.h"
#include "util/statusor.h"

namespace tower::data {

namespace internal {
struct Op;
struct Plan;
}  // namespace internal

class Dataset {
 public:
  // An invalid dataset (status() is FailedPrecondition); assign a real one over it.
  Dataset();

  // features: [rows, feature_dim] row-major; targets: [rows, target_dim] (see TensorSource).
  static StatusOr<Dataset> FromTensors(std::vector<float> features, int64_t feature_dim,
                                       std::vector<float> targets, int64_t target_dim,
                                       Schema schema = {});
  // Reads and parses the whole file now (data/csv.h); DescribeRow gives "path:line".
  static StatusOr<Dataset> FromCsv(const std::string& path, const CsvOptions& options);
  // .npy files mapped, not read whole (data/npy.h): features [rows] or [rows, feature_dim],
  // targets [rows] or [rows, target_dim]. DescribeRow gives "x.npy: row 12".
  static StatusOr<Dataset> FromNpy(const std::string& features_path,
                                   const std::string& targets_path);
  // A .npz archive of np.savez: the array named `target`, and the array named `features`
  // ("": the one other array of the archive).
  static StatusOr<Dataset> FromNpz(const std::string& path, const std::string& target,
                                   const std::string& features = "");
  // TFRecord files of tf.train.Example, indexed and checked now, decoded as batches ask
  // (data/tfrecord_source.h). DescribeRow gives "train.tfrecord: record 12".
  static StatusOr<Dataset> FromTfRecords(const std::vector<std::string>& paths,
                                         const TfRecordOptions& options);
  // "linreg" or "mlp" (data/synthetic.h).
  static StatusOr<Dataset> Synthetic(const SyntheticOptions& options);
  // Any other source.
  static StatusOr<Dataset> FromSource(std::shared_ptr<const Source> source);
  // Data read front to back (data/stream.h): every operation acts on the stream's elements;
  // num_rows() is -1 unless the stream knows its count; source() is null.
  static StatusOr<Dataset> FromStream(std::shared_ptr<const ElementStream> stream);

  // tf.data shuffle with a buffer of `buffer_size` elements (>= 1); reshuffles every epoch
  // (and every repetition under Repeat). A buffer of at least the element count gives a
  // uniform permutation; a buffer of 1 keeps the order.
  Dataset Shuffle(int64_t buffer_size, uint64_t seed) const;
  // Groups `batch_size` (>= 1) elements into one batch; the last batch of a pass may be
  // smaller unless `drop_remainder`. Only one Batch per pipeline.
  Dataset Batch(int64_t batch_size, bool drop_remainder = false) const;
  // `count` passes (-1: forever; 0: none).
  Dataset Repeat(int64_t count = -1) const;
  // Produces elements on a background thread, up to `buffer_batches` ahead (0: no thread).
  Dataset Prefetch(int64_t buffer_batches = 2) const;
  // The first `count` elements (-1: all).
  Dataset Take(int64_t count) const;
  // All but the first `count` elements (-1: all are skipped), e.g. to resume mid-epoch.
  Dataset Skip(int64_t count) const;

  // An iterator over one pass. `epoch` (>= 0) keys the reshuffling.
  StatusOr<std::unique_ptr<Iterator>> MakeIterator(int64_t epoch = 0) const;

  // Not OK for an invalid pipeline: the first invalid operation's InvalidArgument.
  Status status() const;

  const Schema& schema() const;
  int64_t feature_dim() const;
  int64_t target_dim() const;
  // Rows in the source; -1 for an endless one.
  int64_t num_rows() const;
  // Elements (batches, or rows before Batch) in one pass; -1 when endless.
  int64_t num_batches() const;
  // The Batch() size, or 0 for an unbatched dataset.
  int64_t batch_size() const;

  // Where source row `source_row` (Batch::source_rows) comes from: "data.csv:12", "row 12".
  std::string DescribeRow(int64_t source_row) const;
  // The pipeline, for logs: "Synthetic(linreg, rows=-1, seed=0).Shuffle(1000, 7).Batch(64)".
  std::string DebugString() const;

  const std::shared_ptr<const Source>& source() const;
  // The stream of a FromStream dataset, else null.
  const std::shared_ptr<const ElementStream>& stream() const;

 private:
  explicit Dataset(std::shared_ptr<const internal::Plan> plan);
  Dataset Append(const internal::Op& op) const;

  std::shared_ptr<const internal::Plan> plan_;
};

}  // namespace tower::data

#endif  // TOWER_DATA_DATASET_H_
