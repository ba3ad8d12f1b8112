#include "data/dataset.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "data/index_stream.h"
#include "data/npy.h"
#include "data/prefetch.h"
#include "data/random.h"
#include "data/tensor_source.h"
#include "data/transform_iterators.h"

namespace tower::data {

namespace internal {

struct Op {
  enum Kind { kShuffle, kBatch, kRepeat, kPrefetch, kTake, kSkip } kind;
  int64_t n = 0;          // buffer size, batch size or count
  uint64_t seed = 0;      // Shuffle
  bool drop_remainder = false;  // Batch
};

// Immutable once built; shared by every copy of a Dataset and by its iterators.
struct Plan {
  std::shared_ptr<const Source> source;
  std::shared_ptr<const ElementStream> stream;  // instead of source (FromStream)
  std::vector<Op> ops;
  Status status;  // the first invalid operation
  std::string description;
};

}  // namespace internal

namespace {

using internal::Op;
using internal::Plan;

constexpr int64_t kEndless = -1;

bool IsRowLevel(const Op& op) { return op.kind != Op::kBatch && op.kind != Op::kPrefetch; }

// Where the row-level prefix of the plan ends: the first Batch or Prefetch.
size_t RowLevelEnd(const Plan& plan) {
  size_t end = 0;
  while (end < plan.ops.size() && IsRowLevel(plan.ops[end])) ++end;
  return end;
}

// Repeat ops in ops[0..end): tells nested Repeats' keys apart the same way whether they run
// on indices or on elements.
uint64_t RepeatSalt(const Plan& plan, size_t end) {
  uint64_t salt = 0;
  for (size_t i = 0; i < end; ++i) salt += plan.ops[i].kind == Op::kRepeat;
  return salt;
}

// The row-index stream of ops[0..end), all row-level.
std::unique_ptr<IndexStream> BuildIndexStream(const std::shared_ptr<const Plan>& plan, size_t end,
                                              uint64_t key) {
  if (end == 0) return MakeRangeStream(plan->source->num_rows());
  const Op& op = plan->ops[end - 1];
  switch (op.kind) {
    case Op::kShuffle:
      return MakeShuffleStream(BuildIndexStream(plan, end - 1, key), op.n, MixKey(op.seed, key));
    case Op::kRepeat:
      return MakeRepeatStream(
          [plan, end](uint64_t repetition_key) {
            return BuildIndexStream(plan, end - 1, repetition_key);
          },
          op.n, key, RepeatSalt(*plan, end - 1));
    case Op::kTake:
      return op.n < 0 ? BuildIndexStream(plan, end - 1, key)
                      : MakeTakeStream(BuildIndexStream(plan, end - 1, key), op.n);
    case Op::kSkip:
      return op.n < 0 ? MakeTakeStream(BuildIndexStream(plan, end - 1, key), 0)
                      : MakeSkipStream(BuildIndexStream(plan, end - 1, key), op.n);
    case Op::kBatch:
    case Op::kPrefetch:
      break;
  }
  TOWER_CHECK(false) << "op " << op.kind << " is not row-level";
  return nullptr;
}

// The iterator of ops[0..end).
StatusOr<std::unique_ptr<Iterator>> BuildIterator(const std::shared_ptr<const Plan>& plan,
                                                  size_t end, uint64_t key) {
  // A stream has no row indices: every op acts on its elements.
  const bool stream = plan->stream != nullptr;
  if (stream && end == 0) return plan->stream->Open(key);
  const size_t row_end = stream ? 0 : std::min(end, RowLevelEnd(*plan));
  if (!stream && end == row_end) {
    // Unbatched: one-row elements.
    return MakeGatherIterator(plan->source, BuildIndexStream(plan, end, key), 1, false);
  }
  const Op& op = plan->ops[end - 1];
  if (!stream && end == row_end + 1 && op.kind == Op::kBatch) {
    // The fast path: indices straight into batches.
    return MakeGatherIterator(plan->source, BuildIndexStream(plan, row_end, key), op.n,
                              op.drop_remainder);
  }
  if (op.kind == Op::kRepeat) {
    return MakeRepeatIterator(
        [plan, end](uint64_t repetition_key) {
          return BuildIterator(plan, end - 1, repetition_key);
        },
        op.n, key, RepeatSalt(*plan, end - 1));
  }
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> upstream, BuildIterator(plan, end - 1, key));
  switch (op.kind) {
    case Op::kShuffle:
      return MakeShuffleIterator(std::move(upstream), op.n, MixKey(op.seed, key));
    case Op::kBatch:
      return MakeConcatBatchIterator(std::move(upstream), op.n, op.drop_remainder);
    case Op::kPrefetch:
      if (op.n == 0) return upstream;
      return MakePrefetchIterator(std::move(upstream), op.n);
    case Op::kTake:
      if (op.n < 0) return upstream;
      return MakeTakeIterator(std::move(upstream), op.n);
    case Op::kSkip:
      return MakeSkipIterator(std::move(upstream), op.n < 0 ? std::numeric_limits<int64_t>::max()
                                                            : op.n);
    case Op::kRepeat:
      break;
  }
  return InternalError("Dataset: unhandled operation");
}

// Elements per pass after `op`, given `count` before it (-1: endless).
int64_t CountAfter(const Op& op, int64_t count) {
  switch (op.kind) {
    case Op::kShuffle:
    case Op::kPrefetch:
      return count;
    case Op::kRepeat: {
      if (count == 0 || op.n == 0) return 0;
      if (count == kEndless || op.n < 0) return kEndless;
      int64_t total = 0;
      if (__builtin_mul_overflow(count, op.n, &total)) return kEndless;
      return total;
    }
    case Op::kTake:
      if (op.n < 0) return count;
      return count == kEndless ? op.n : std::min(count, op.n);
    case Op::kSkip:
      if (count == kEndless) return kEndless;
      if (op.n < 0) return 0;
      return std::max<int64_t>(0, count - op.n);
    case Op::kBatch:
      if (count == kEndless) return kEndless;
      return op.drop_remainder ? count / op.n : (count + op.n - 1) / op.n;
  }
  return count;
}

std::shared_ptr<const Plan> InvalidPlan() {
  auto plan = std::make_shared<Plan>();
  plan->status = FailedPreconditionError(
      "an empty Dataset (default-constructed); build one with Dataset::FromTensors, FromCsv, "
      "Synthetic or FromSource");
  plan->description = "Dataset()";
  return plan;
}

}  // namespace

Dataset::Dataset() : plan_(InvalidPlan()) {}

Dataset::Dataset(std::shared_ptr<const internal::Plan> plan) : plan_(std::move(plan)) {}

StatusOr<Dataset> Dataset::FromSource(std::shared_ptr<const Source> source) {
  if (source == nullptr) return InvalidArgumentError("Dataset::FromSource: null source");
  if (source->feature_dim() < 1 || source->target_dim() < 0 || source->num_rows() < kEndless) {
    return InvalidArgumentError("Dataset::FromSource: a source needs feature_dim >= 1, "
                                "target_dim >= 0 and num_rows >= -1");
  }
  auto plan = std::make_shared<Plan>();
  plan->source = std::move(source);
  plan->description = "Source(rows=" + std::to_string(plan->source->num_rows()) + ")";
  return Dataset(std::move(plan));
}

StatusOr<Dataset> Dataset::FromStream(std::shared_ptr<const ElementStream> stream) {
  if (stream == nullptr) return InvalidArgumentError("Dataset::FromStream: null stream");
  if (stream->feature_dim() < 1 || stream->batch_size() < 0) {
    return InvalidArgumentError(
        "Dataset::FromStream: a stream needs feature_dim >= 1 and "
        "batch_size >= 0");
  }
  auto plan = std::make_shared<Plan>();
  plan->stream = std::move(stream);
  plan->description = plan->stream->DebugString();
  return Dataset(std::move(plan));
}

StatusOr<Dataset> Dataset::FromTensors(std::vector<float> features, int64_t feature_dim,
                                       std::vector<float> targets, int64_t target_dim,
                                       Schema schema) {
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<const TensorSource> source,
                         TensorSource::Create(std::move(features), feature_dim,
                                              std::move(targets), target_dim, std::move(schema)));
  TOWER_ASSIGN_OR_RETURN(Dataset dataset, FromSource(source));
  auto plan = std::make_shared<Plan>(*dataset.plan_);
  plan->description = "FromTensors(rows=" + std::to_string(source->num_rows()) + ")";
  return Dataset(std::move(plan));
}

StatusOr<Dataset> Dataset::FromCsv(const std::string& path, const CsvOptions& options) {
  TOWER_ASSIGN_OR_RETURN(CsvTable table, ReadCsv(path, options));
  const int64_t feature_dim = static_cast<int64_t>(table.schema.feature_names.size());
  const int64_t target_dim = static_cast<int64_t>(table.schema.target_names.size());
  TOWER_ASSIGN_OR_RETURN(
      std::shared_ptr<const TensorSource> source,
      TensorSource::Create(std::move(table.features), feature_dim, std::move(table.targets),
                           target_dim, std::move(table.schema), path, std::move(table.lines)));
  TOWER_ASSIGN_OR_RETURN(Dataset dataset, FromSource(source));
  auto plan = std::make_shared<Plan>(*dataset.plan_);
  plan->description = "FromCsv(" + path + ")";
  return Dataset(std::move(plan));
}

StatusOr<Dataset> Dataset::FromNpy(const std::string& features_path,
                                   const std::string& targets_path) {
  TOWER_ASSIGN_OR_RETURN(NpyArray features, OpenNpy(features_path));
  TOWER_ASSIGN_OR_RETURN(NpyArray targets, OpenNpy(targets_path));
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<const NpySource> source,
                         NpySource::Create(std::move(features), std::move(targets)));
  TOWER_ASSIGN_OR_RETURN(Dataset dataset, FromSource(source));
  auto plan = std::make_shared<Plan>(*dataset.plan_);
  plan->description = "FromNpy(" + features_path + ", " + targets_path + ")";
  return Dataset(std::move(plan));
}

StatusOr<Dataset> Dataset::FromNpz(const std::string& path, const std::string& target,
                                   const std::string& features) {
  TOWER_ASSIGN_OR_RETURN(std::vector<NpyArray> arrays, OpenNpz(path));
  std::vector<std::string> names;
  for (const NpyArray& array : arrays) names.push_back(array.name.substr(path.size() + 1));
  const auto find = [&](const std::string& name) -> int {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return static_cast<int>(i);
    }
    return -1;
  };
  std::string listed;
  for (const std::string& name : names) listed += (listed.empty() ? "" : ", ") + name;
  const int y = find(target);
  if (y < 0) {
    return InvalidArgumentError(path + ": no array named '" + target + "' (the archive holds " +
                                listed + ")");
  }
  int x = features.empty() ? -1 : find(features);
  if (features.empty() && names.size() == 2) x = 1 - y;
  if (x < 0 && features.empty()) {
    return InvalidArgumentError(path + ": name the features' array (--features=NAME; the "
                                "archive holds " + listed + ")");
  }
  if (x < 0 || x == y) {
    return InvalidArgumentError(path + ": no features array named '" + features +
                                "' other than the target (the archive holds " + listed + ")");
  }
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<const NpySource> source,
                         NpySource::Create(std::move(arrays[x]), std::move(arrays[y])));
  TOWER_ASSIGN_OR_RETURN(Dataset dataset, FromSource(source));
  auto plan = std::make_shared<Plan>(*dataset.plan_);
  plan->description = "FromNpz(" + path + ", " + names[x] + " -> " + names[y] + ")";
  return Dataset(std::move(plan));
}

StatusOr<Dataset> Dataset::FromTfRecords(const std::vector<std::string>& paths,
                                         const TfRecordOptions& options) {
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<const TfRecordSource> source,
                         TfRecordSource::Open(paths, options));
  TOWER_ASSIGN_OR_RETURN(Dataset dataset, FromSource(source));
  auto plan = std::make_shared<Plan>(*dataset.plan_);
  plan->description = "FromTfRecords(" + std::to_string(paths.size()) + " file(s), " +
                      std::to_string(source->num_rows()) + " records)";
  return Dataset(std::move(plan));
}

StatusOr<Dataset> Dataset::Synthetic(const SyntheticOptions& options) {
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<const SyntheticSource> source,
                         SyntheticSource::Create(options));
  TOWER_ASSIGN_OR_RETURN(Dataset dataset, FromSource(source));
  auto plan = std::make_shared<Plan>(*dataset.plan_);
  plan->description = "Synthetic(" + options.name + ", rows=" + std::to_string(options.rows) +
                      ", seed=" + std::to_string(options.seed) + ")";
  return Dataset(std::move(plan));
}

Dataset Dataset::Append(const Op& op) const {
  auto plan = std::make_shared<Plan>(*plan_);
  plan->ops.push_back(op);
  std::string text;
  switch (op.kind) {
    case Op::kShuffle:
      text = "Shuffle(" + std::to_string(op.n) + ", " + std::to_string(op.seed) + ")";
      break;
    case Op::kBatch:
      text = "Batch(" + std::to_string(op.n) + (op.drop_remainder ? ", drop_remainder)" : ")");
      break;
    case Op::kRepeat:
      text = "Repeat(" + std::to_string(op.n) + ")";
      break;
    case Op::kPrefetch:
      text = "Prefetch(" + std::to_string(op.n) + ")";
      break;
    case Op::kTake:
      text = "Take(" + std::to_string(op.n) + ")";
      break;
    case Op::kSkip:
      text = "Skip(" + std::to_string(op.n) + ")";
      break;
  }
  plan->description += "." + text;
  if (!plan->status.ok()) return Dataset(std::move(plan));
  auto invalid = [&](const std::string& why) {
    plan->status = InvalidArgumentError(text + ": " + why + " (in " + plan->description + ")");
    return Dataset(std::move(plan));
  };
  switch (op.kind) {
    case Op::kShuffle:
      if (op.n < 1) return invalid("buffer_size must be at least 1");
      break;
    case Op::kBatch:
      if (op.n < 1) return invalid("batch_size must be at least 1");
      if (batch_size() > 0) {
        return invalid("the dataset is already batched; a pipeline takes one Batch (batches of "
                       "batches would need rank-3 elements)");
      }
      break;
    case Op::kRepeat:
      if (op.n < -1) return invalid("count must be -1 (forever) or at least 0");
      break;
    case Op::kPrefetch:
      if (op.n < 0) return invalid("buffer_batches must be at least 0");
      break;
    case Op::kTake:
    case Op::kSkip:
      if (op.n < -1) return invalid("count must be -1 (all) or at least 0");
      break;
  }
  return Dataset(std::move(plan));
}

Dataset Dataset::Shuffle(int64_t buffer_size, uint64_t seed) const {
  Op op{Op::kShuffle};
  op.n = buffer_size;
  op.seed = seed;
  return Append(op);
}

Dataset Dataset::Batch(int64_t batch_size, bool drop_remainder) const {
  Op op{Op::kBatch};
  op.n = batch_size;
  op.drop_remainder = drop_remainder;
  return Append(op);
}

Dataset Dataset::Repeat(int64_t count) const {
  Op op{Op::kRepeat};
  op.n = count;
  return Append(op);
}

Dataset Dataset::Prefetch(int64_t buffer_batches) const {
  Op op{Op::kPrefetch};
  op.n = buffer_batches;
  return Append(op);
}

Dataset Dataset::Take(int64_t count) const {
  Op op{Op::kTake};
  op.n = count;
  return Append(op);
}

Dataset Dataset::Skip(int64_t count) const {
  Op op{Op::kSkip};
  op.n = count;
  return Append(op);
}

StatusOr<std::unique_ptr<Iterator>> Dataset::MakeIterator(int64_t epoch) const {
  TOWER_RETURN_IF_ERROR(plan_->status);
  if (epoch < 0) {
    return InvalidArgumentError("MakeIterator: epoch must be 0 or more, got " +
                                std::to_string(epoch));
  }
  return BuildIterator(plan_, plan_->ops.size(), EpochKey(epoch));
}

Status Dataset::status() const { return plan_->status; }

const Schema& Dataset::schema() const {
  static const Schema* const kEmpty = new Schema();
  if (plan_->stream != nullptr) return plan_->stream->schema();
  return plan_->source != nullptr ? plan_->source->schema() : *kEmpty;
}

int64_t Dataset::feature_dim() const {
  if (plan_->stream != nullptr) return plan_->stream->feature_dim();
  return plan_->source != nullptr ? plan_->source->feature_dim() : 0;
}

int64_t Dataset::target_dim() const {
  if (plan_->stream != nullptr) return plan_->stream->target_dim();
  return plan_->source != nullptr ? plan_->source->target_dim() : 0;
}

int64_t Dataset::num_rows() const {
  if (plan_->stream != nullptr) {
    const int64_t n = plan_->stream->num_elements();
    return n < 0 || plan_->stream->batch_size() == 0 ? n : kEndless;
  }
  return plan_->source != nullptr ? plan_->source->num_rows() : 0;
}

int64_t Dataset::num_batches() const {
  int64_t count = plan_->stream != nullptr ? plan_->stream->num_elements() : num_rows();
  for (const Op& op : plan_->ops) count = CountAfter(op, count);
  return count;
}

int64_t Dataset::batch_size() const {
  for (const Op& op : plan_->ops) {
    if (op.kind == Op::kBatch) return op.n;
  }
  return plan_->stream != nullptr ? plan_->stream->batch_size() : 0;
}

std::string Dataset::DescribeRow(int64_t source_row) const {
  if (plan_->stream != nullptr) return plan_->stream->DescribeRow(source_row);
  if (plan_->source == nullptr) return "row " + std::to_string(source_row);
  return plan_->source->DescribeRow(source_row);
}

std::string Dataset::DebugString() const { return plan_->description; }

const std::shared_ptr<const Source>& Dataset::source() const { return plan_->source; }

const std::shared_ptr<const ElementStream>& Dataset::stream() const { return plan_->stream; }

}  // namespace tower::data
