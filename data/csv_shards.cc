#include "data/csv_shards.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "data/random.h"
#include "data/shuffle_buffer.h"
#include "util/strings.h"

namespace tower::data {

namespace {

constexpr int64_t kChunkRows = 4096;  // rows per element of SharePasses

// One share's rows, pass after pass without end, each pass shuffled through a buffer of
// `buffer` rows (0: file order), as elements of up to kChunkRows rows. Ends (nullopt) only
// when a pass has no rows. SkipRows passes rows as Next() would give them, finding their
// lines without parsing them; the rows a shuffled skip leaves in the buffer are then parsed
// where they are (CsvRowReader), so the state after it is the state after the Next() calls.
class SharePasses final : public Iterator {
 public:
  SharePasses(std::shared_ptr<const CsvFileSet> files, int64_t share, int64_t shares,
              int64_t buffer, uint64_t key)
      : files_(std::move(files)),
        share_(share),
        shares_(shares),
        buffer_(buffer),
        key_(key),
        f_(static_cast<int64_t>(files_->schema().feature_names.size())),
        t_(static_cast<int64_t>(files_->schema().target_names.size())) {}

  StatusOr<std::optional<Batch>> Next() override {
    if (!status_.ok()) return status_;
    StatusOr<std::optional<Batch>> next = buffer_ > 0 ? NextShuffled() : NextInOrder();
    if (!next.ok()) status_ = next.status();
    return next;
  }

  // Passes the next `rows` rows; false when a pass has no rows (the share is empty).
  StatusOr<bool> SkipRows(int64_t rows) {
    if (!status_.ok()) return status_;
    StatusOr<bool> skipped = buffer_ > 0 ? SkipShuffled(rows) : SkipInOrder(rows);
    if (!skipped.ok()) status_ = skipped.status();
    return skipped;
  }

 private:
  StatusOr<bool> SkipInOrder(int64_t rows) {
    while (rows > 0) {
      TOWER_RETURN_IF_ERROR(OpenPass());
      TOWER_ASSIGN_OR_RETURN(std::optional<Batch> found, pass_->NextUnparsed(rows));
      if (found.has_value()) {
        pass_rows_ += found->rows;
        rows -= found->rows;
      } else if (!EndPass()) {
        return false;
      }
    }
    return true;
  }

  StatusOr<bool> SkipShuffled(int64_t rows) {
    while (rows > 0) {
      TOWER_RETURN_IF_ERROR(OpenPass());
      TOWER_RETURN_IF_ERROR(TopUp(/*parse=*/false));
      if (shuffle_->empty()) {
        if (!EndPass()) return false;
        continue;
      }
      free_.push_back(shuffle_->Pop());
      --rows;
    }
    // The buffer's rows that were found and not parsed: parsed by where they are.
    std::vector<bool> free(ids_.size(), false);
    for (const int64_t slot : free_) free[static_cast<size_t>(slot)] = true;
    for (size_t slot = 0; slot < ids_.size(); ++slot) {
      if (free[slot] || parsed_[slot]) continue;
      if (!row_reader_.has_value()) row_reader_.emplace(files_);
      float* to = store_.data() + static_cast<int64_t>(slot) * (f_ + t_);
      TOWER_RETURN_IF_ERROR(row_reader_->Read(ids_[slot], to, to + f_));
      parsed_[slot] = true;
    }
    return true;
  }

  // Opens pass `pass_` when none is open.
  Status OpenPass() {
    if (pass_ != nullptr) return OkStatus();
    TOWER_ASSIGN_OR_RETURN(pass_, CsvShareStream(files_, share_, shares_, kChunkRows).OpenShare());
    pass_rows_ = 0;
    if (buffer_ > 0) shuffle_.emplace(buffer_, MixKey(key_, static_cast<uint64_t>(pass_number_)));
    return OkStatus();
  }

  // The pass ended: false when it had no rows (the share is empty), else the next opens.
  bool EndPass() {
    pass_.reset();
    ++pass_number_;
    return pass_rows_ > 0;
  }

  StatusOr<std::optional<Batch>> NextInOrder() {
    while (true) {
      TOWER_RETURN_IF_ERROR(OpenPass());
      TOWER_ASSIGN_OR_RETURN(std::optional<Batch> chunk, pass_->Next());
      if (chunk.has_value()) {
        pass_rows_ += chunk->rows;
        return chunk;
      }
      if (!EndPass()) return std::optional<Batch>();
    }
  }

  StatusOr<std::optional<Batch>> NextShuffled() {
    Batch out;
    out.feature_dim = f_;
    out.target_dim = t_;
    while (out.rows < kChunkRows) {
      TOWER_RETURN_IF_ERROR(OpenPass());
      TOWER_RETURN_IF_ERROR(TopUp(/*parse=*/true));
      if (shuffle_->empty()) {
        if (!EndPass()) break;
        if (out.rows > 0) break;  // a chunk never spans two passes
        continue;
      }
      const int64_t slot = shuffle_->Pop();
      const float* row = store_.data() + slot * (f_ + t_);
      out.features.insert(out.features.end(), row, row + f_);
      out.targets.insert(out.targets.end(), row + f_, row + f_ + t_);
      out.source_rows.push_back(ids_[static_cast<size_t>(slot)]);
      ++out.rows;
      free_.push_back(slot);
    }
    if (out.rows == 0) return std::optional<Batch>();
    return std::optional<Batch>(std::move(out));
  }

  // Pushes upstream rows into the buffer while it wants more: parsed, or (!parse) found
  // only, as many as it wants, so that no found-only row waits in pending_ for a later Next.
  Status TopUp(bool parse) {
    while (shuffle_->WantsMore()) {
      if (!pending_.has_value() || pending_used_ == pending_->rows) {
        if (parse) {
          TOWER_ASSIGN_OR_RETURN(pending_, pass_->Next());
        } else {
          TOWER_ASSIGN_OR_RETURN(pending_, pass_->NextUnparsed(buffer_ - shuffle_->size()));
        }
        pending_used_ = 0;
        if (!pending_.has_value()) {
          shuffle_->UpstreamEnded();
          return OkStatus();
        }
      }
      const bool row_parsed = !pending_->features.empty() || pending_->feature_dim == 0;
      int64_t slot;
      if (!free_.empty()) {
        slot = free_.back();
        free_.pop_back();
      } else {
        slot = static_cast<int64_t>(ids_.size());
        ids_.push_back(0);
        parsed_.push_back(false);
        store_.resize(static_cast<size_t>((slot + 1) * (f_ + t_)));
      }
      float* to = store_.data() + slot * (f_ + t_);
      if (row_parsed) {
        std::copy_n(pending_->features.data() + pending_used_ * f_, f_, to);
        std::copy_n(pending_->targets.data() + pending_used_ * t_, t_, to + f_);
      }
      parsed_[static_cast<size_t>(slot)] = row_parsed;
      ids_[static_cast<size_t>(slot)] = pending_->source_rows[static_cast<size_t>(pending_used_)];
      ++pending_used_;
      ++pass_rows_;
      shuffle_->Push(slot);
    }
    return OkStatus();
  }

  std::shared_ptr<const CsvFileSet> files_;
  const int64_t share_, shares_, buffer_;
  const uint64_t key_;
  const int64_t f_, t_;
  Status status_;

  std::unique_ptr<CsvShareIterator> pass_;  // the open pass's chunks
  int64_t pass_number_ = 0;
  int64_t pass_rows_ = 0;
  std::optional<ShuffleBuffer<int64_t>> shuffle_;  // slots of store_
  std::optional<Batch> pending_;                   // the chunk being pushed into the buffer
  int64_t pending_used_ = 0;
  std::vector<float> store_;   // [slots, f + t]: each buffered row's features, then targets
  std::vector<int64_t> ids_;   // [slots]: each buffered row's Batch::source_rows entry
  std::vector<int64_t> free_;  // slots free for the next row
  std::vector<bool> parsed_;   // [slots]: whether store_ holds the slot's row (see SkipRows)
  std::optional<CsvRowReader> row_reader_;  // for the rows a skip leaves in the buffer
};

// One share's endless rows, cut into local batches across its elements' boundaries.
struct ShareFeed {
  std::unique_ptr<SharePasses> rows;
  std::optional<Batch> current;
  int64_t used = 0;  // rows of `current` already taken
};

class ShardedBatchIterator final : public Iterator {
 public:
  ShardedBatchIterator(std::shared_ptr<const CsvFileSet> files, const ShardedBatchOptions& options,
                       std::vector<ShareFeed> feeds)
      : files_(std::move(files)), options_(options), feeds_(std::move(feeds)) {}

  StatusOr<std::optional<Batch>> Next() override {
    if (!status_.ok()) return status_;
    const int64_t g = options_.global_batch;
    const int64_t local = g / options_.shares;
    Batch batch;
    batch.rows = g;
    batch.feature_dim = static_cast<int64_t>(files_->schema().feature_names.size());
    batch.target_dim = static_cast<int64_t>(files_->schema().target_names.size());
    // Other workers' slots stay zero: their rows are never read here.
    batch.features.assign(static_cast<size_t>(g * batch.feature_dim), 0.0f);
    batch.targets.assign(static_cast<size_t>(g * batch.target_dim), 0.0f);
    batch.source_rows.assign(static_cast<size_t>(g), -1);
    for (size_t k = 0; k < feeds_.size(); ++k) {
      const int64_t share = options_.first_share + static_cast<int64_t>(k);
      Status status = Fill(feeds_[k], share, share * local, local, &batch);
      if (!status.ok()) {
        status_ = status;
        return status_;
      }
    }
    return std::optional<Batch>(std::move(batch));
  }

  // Each share passes n local batches of rows, found and not parsed (SharePasses::SkipRows);
  // the batches are endless, so all n are passed. The class ids of the rows passed are not
  // checked (the run that trained on them did).
  StatusOr<int64_t> Skip(int64_t n) override {
    if (!status_.ok()) return status_;
    const int64_t local = options_.global_batch / options_.shares;
    for (size_t k = 0; k < feeds_.size(); ++k) {
      ShareFeed& feed = feeds_[k];
      int64_t rows = n * local;
      if (feed.current.has_value()) {
        const int64_t taken = std::min(rows, feed.current->rows - feed.used);
        feed.used += taken;
        rows -= taken;
      }
      if (rows == 0) continue;
      feed.current.reset();
      feed.used = 0;
      StatusOr<bool> skipped = feed.rows->SkipRows(rows);
      if (skipped.ok() && !*skipped) {
        skipped = NoRows(options_.first_share + static_cast<int64_t>(k));
      }
      if (!skipped.ok()) {
        status_ = skipped.status();
        return status_;
      }
    }
    return n;
  }

 private:
  Status NoRows(int64_t share) const {
    return InvalidArgumentError("share " + std::to_string(share) + " of " +
                                std::to_string(options_.shares) + " of " +
                                Join(files_->options().files, ", ") +
                                " has no rows: give fewer shares (--shares) or more data");
  }

  Status Fill(ShareFeed& feed, int64_t share, int64_t first, int64_t count, Batch* batch) {
    const int64_t f = batch->feature_dim;
    const int64_t t = batch->target_dim;
    int64_t filled = 0;
    while (filled < count) {
      if (!feed.current.has_value() || feed.used == feed.current->rows) {
        TOWER_ASSIGN_OR_RETURN(feed.current, feed.rows->Next());
        feed.used = 0;
        if (!feed.current.has_value()) return NoRows(share);
      }
      const Batch& from = *feed.current;
      const int64_t n = std::min(count - filled, from.rows - feed.used);
      const int64_t to = first + filled;
      std::copy_n(from.features.data() + feed.used * f, n * f, batch->features.data() + to * f);
      std::copy_n(from.targets.data() + feed.used * t, n * t, batch->targets.data() + to * t);
      std::copy_n(from.source_rows.data() + feed.used, n, batch->source_rows.data() + to);
      feed.used += n;
      filled += n;
    }
    return CheckClassIds(*batch, first, count);
  }

  Status CheckClassIds(const Batch& batch, int64_t first, int64_t count) const {
    const int64_t classes = options_.class_count;
    if (classes <= 0) return OkStatus();
    for (int64_t r = first; r < first + count; ++r) {
      const float label = batch.targets[static_cast<size_t>(r * batch.target_dim)];
      if (!(label >= 0 && label < static_cast<float>(classes)) || std::floor(label) != label) {
        return InvalidArgumentError(files_->DescribeRow(batch.source_rows[static_cast<size_t>(r)]) +
                                    ": target " + std::to_string(label) +
                                    " is not a class id in [0, " + std::to_string(classes) +
                                    ") (the last layer has " + std::to_string(classes) + " units)");
      }
    }
    return OkStatus();
  }

  std::shared_ptr<const CsvFileSet> files_;
  ShardedBatchOptions options_;
  std::vector<ShareFeed> feeds_;
  Status status_;
};

}  // namespace

StatusOr<std::shared_ptr<const ShardedBatchStream>> ShardedBatchStream::Create(
    std::shared_ptr<const CsvFileSet> files, const ShardedBatchOptions& options) {
  const ShardedBatchOptions& o = options;
  if (o.shares < 1 || o.first_share < 0 || o.end_share <= o.first_share || o.end_share > o.shares) {
    return InvalidArgumentError("shares [" + std::to_string(o.first_share) + ", " +
                                std::to_string(o.end_share) + ") of " + std::to_string(o.shares) +
                                " is not a range of shares");
  }
  if (o.global_batch < o.shares || o.global_batch % o.shares != 0) {
    return InvalidArgumentError("--global-batch=" + std::to_string(o.global_batch) +
                                " must be a multiple of the " + std::to_string(o.shares) +
                                " shares (each share gives the same rows to every batch)");
  }
  if (o.shuffle_buffer < 0) return InvalidArgumentError("--shuffle-buffer must be 0 or more");
  return std::shared_ptr<const ShardedBatchStream>(new ShardedBatchStream(std::move(files), o));
}

StatusOr<std::unique_ptr<Iterator>> ShardedBatchStream::Open(uint64_t key) const {
  std::vector<ShareFeed> feeds;
  for (int64_t s = options_.first_share; s < options_.end_share; ++s) {
    ShareFeed feed;
    // Every share its own order: keyed by the share, never by the worker reading it.
    const uint64_t share_key = MixKey(MixKey(options_.seed, static_cast<uint64_t>(s)), key);
    feed.rows = std::make_unique<SharePasses>(files_, s, options_.shares, options_.shuffle_buffer,
                                              share_key);
    feeds.push_back(std::move(feed));
  }
  return std::unique_ptr<Iterator>(
      std::make_unique<ShardedBatchIterator>(files_, options_, std::move(feeds)));
}

std::string ShardedBatchStream::DescribeRow(int64_t source_row) const {
  return files_->DescribeRow(source_row);
}

std::string ShardedBatchStream::DebugString() const {
  return "CsvShards(" + Join(files_->options().files, ", ") + "; shares " +
         std::to_string(options_.first_share) + ".." + std::to_string(options_.end_share - 1) +
         " of " + std::to_string(options_.shares) + ", global batch " +
         std::to_string(options_.global_batch) + ", shuffle buffer " +
         std::to_string(options_.shuffle_buffer) + ")";
}

}  // namespace tower::data
