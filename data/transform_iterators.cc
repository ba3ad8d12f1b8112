#include "data/transform_iterators.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "data/shuffle_buffer.h"
#include "data/transform_rules.h"

namespace tower::data {

namespace {

using Element = StatusOr<std::optional<Batch>>;

// Keeps the first error (and the end) so that later calls repeat it without going upstream.
class StickyIterator : public Iterator {
 public:
  Element Next() final {
    if (!status_.ok()) return status_;
    if (ended_) return std::optional<Batch>();
    Element element = Produce();
    if (!element.ok()) {
      status_ = element.status();
    } else if (!element->has_value()) {
      ended_ = true;
    }
    return element;
  }

 protected:
  virtual Element Produce() = 0;

 private:
  Status status_;
  bool ended_ = false;
};

class GatherIterator final : public StickyIterator {
 public:
  static constexpr int64_t kInitialRows = 1 << 16;

  GatherIterator(std::shared_ptr<const Source> source, std::unique_ptr<IndexStream> rows,
                 int64_t batch_size, bool drop_remainder)
      : source_(std::move(source)),
        rows_(std::move(rows)),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder),
        feature_dim_(source_->feature_dim()),
        target_dim_(source_->target_dim()) {}

 protected:
  Element Produce() override {
    Batch batch;
    // Room for the whole batch up front, except for huge batch sizes (a "whole dataset"
    // batch over fewer rows): those grow as rows arrive.
    batch.source_rows.resize(static_cast<size_t>(std::min(batch_size_, kInitialRows)));
    int64_t n = 0;
    while (n < batch_size_) {
      if (n == static_cast<int64_t>(batch.source_rows.size())) {
        batch.source_rows.resize(static_cast<size_t>(std::min(batch_size_, 2 * n)));
      }
      const int64_t got =
          rows_->Next(batch.source_rows.data() + n, static_cast<int64_t>(batch.source_rows.size()) - n);
      if (got == 0) break;
      n += got;
    }
    if (n == 0 || (drop_remainder_ && n < batch_size_)) return std::optional<Batch>();
    batch.source_rows.resize(static_cast<size_t>(n));
    batch.rows = n;
    batch.feature_dim = feature_dim_;
    batch.target_dim = target_dim_;
    batch.features.resize(static_cast<size_t>(n * feature_dim_));
    batch.targets.resize(static_cast<size_t>(n * target_dim_));
    TOWER_RETURN_IF_ERROR(source_->Read(batch.source_rows.data(), n, batch.features.data(),
                                        batch.targets.data()));
    return std::optional<Batch>(std::move(batch));
  }

 private:
  std::shared_ptr<const Source> source_;
  std::unique_ptr<IndexStream> rows_;
  int64_t batch_size_;
  bool drop_remainder_;
  int64_t feature_dim_;
  int64_t target_dim_;
};

class ConcatBatchIterator final : public StickyIterator {
 public:
  ConcatBatchIterator(std::unique_ptr<Iterator> upstream, int64_t batch_size, bool drop_remainder)
      : upstream_(std::move(upstream)), batch_size_(batch_size), drop_remainder_(drop_remainder) {}

 protected:
  Element Produce() override {
    Batch batch;
    int64_t elements = 0;
    while (elements < batch_size_) {
      TOWER_ASSIGN_OR_RETURN(std::optional<Batch> element, upstream_->Next());
      if (!element.has_value()) break;
      if (elements == 0) {
        batch.feature_dim = element->feature_dim;
        batch.target_dim = element->target_dim;
        const int64_t expected = std::min<int64_t>(batch_size_, 1 << 16) * element->rows;
        batch.features.reserve(static_cast<size_t>(expected * element->feature_dim));
        batch.targets.reserve(static_cast<size_t>(expected * element->target_dim));
        batch.source_rows.reserve(static_cast<size_t>(expected));
      }
      batch.rows += element->rows;
      batch.features.insert(batch.features.end(), element->features.begin(), element->features.end());
      batch.targets.insert(batch.targets.end(), element->targets.begin(), element->targets.end());
      batch.source_rows.insert(batch.source_rows.end(), element->source_rows.begin(),
                               element->source_rows.end());
      ++elements;
    }
    if (elements == 0 || (drop_remainder_ && elements < batch_size_)) {
      return std::optional<Batch>();
    }
    return std::optional<Batch>(std::move(batch));
  }

 private:
  std::unique_ptr<Iterator> upstream_;
  int64_t batch_size_;
  bool drop_remainder_;
};

class ShuffleIterator final : public StickyIterator {
 public:
  ShuffleIterator(std::unique_ptr<Iterator> upstream, int64_t buffer_size, uint64_t key)
      : upstream_(std::move(upstream)), buffer_(buffer_size, key) {}

 protected:
  Element Produce() override {
    while (buffer_.WantsMore()) {
      TOWER_ASSIGN_OR_RETURN(std::optional<Batch> element, upstream_->Next());
      if (!element.has_value()) {
        buffer_.UpstreamEnded();
        break;
      }
      buffer_.Push(std::move(*element));
    }
    if (buffer_.empty()) return std::optional<Batch>();
    return std::optional<Batch>(buffer_.Pop());
  }

 private:
  std::unique_ptr<Iterator> upstream_;
  ShuffleBuffer<Batch> buffer_;
};

class RepeatIterator final : public StickyIterator {
 public:
  RepeatIterator(IteratorFactory factory, int64_t count, uint64_t key, uint64_t salt)
      : factory_(std::move(factory)), schedule_(count, key, salt) {}

 protected:
  Element Produce() override {
    while (true) {
      if (current_ == nullptr) {
        const std::optional<uint64_t> key = schedule_.StartNext();
        if (!key.has_value()) return std::optional<Batch>();
        TOWER_ASSIGN_OR_RETURN(current_, factory_(*key));
      }
      TOWER_ASSIGN_OR_RETURN(std::optional<Batch> element, current_->Next());
      if (element.has_value()) {
        schedule_.Produced();
        return element;
      }
      current_.reset();
      schedule_.Finished();
    }
  }

 private:
  IteratorFactory factory_;
  RepeatSchedule schedule_;
  std::unique_ptr<Iterator> current_;
};

// Take and Skip: the elements in `window` (data/transform_rules.h).
class WindowIterator final : public StickyIterator {
 public:
  WindowIterator(std::unique_ptr<Iterator> upstream, PositionWindow window)
      : upstream_(std::move(upstream)), window_(window) {}

 protected:
  Element Produce() override {
    while (window_.ToDrop() > 0) {
      TOWER_ASSIGN_OR_RETURN(std::optional<Batch> element, upstream_->Next());
      if (!element.has_value()) return element;
      window_.Advance(1);
    }
    if (window_.Allow(1) == 0) return std::optional<Batch>();
    window_.Advance(1);
    return upstream_->Next();
  }

 private:
  std::unique_ptr<Iterator> upstream_;
  PositionWindow window_;
};

}  // namespace

std::unique_ptr<Iterator> MakeGatherIterator(std::shared_ptr<const Source> source,
                                             std::unique_ptr<IndexStream> rows,
                                             int64_t batch_size, bool drop_remainder) {
  return std::make_unique<GatherIterator>(std::move(source), std::move(rows), batch_size,
                                          drop_remainder);
}

std::unique_ptr<Iterator> MakeConcatBatchIterator(std::unique_ptr<Iterator> upstream,
                                                  int64_t batch_size, bool drop_remainder) {
  return std::make_unique<ConcatBatchIterator>(std::move(upstream), batch_size, drop_remainder);
}

std::unique_ptr<Iterator> MakeShuffleIterator(std::unique_ptr<Iterator> upstream,
                                              int64_t buffer_size, uint64_t key) {
  return std::make_unique<ShuffleIterator>(std::move(upstream), buffer_size, key);
}

std::unique_ptr<Iterator> MakeRepeatIterator(IteratorFactory factory, int64_t count,
                                             uint64_t key, uint64_t salt) {
  return std::make_unique<RepeatIterator>(std::move(factory), count, key, salt);
}

std::unique_ptr<Iterator> MakeTakeIterator(std::unique_ptr<Iterator> upstream, int64_t count) {
  return std::make_unique<WindowIterator>(std::move(upstream), PositionWindow::Take(count));
}

std::unique_ptr<Iterator> MakeSkipIterator(std::unique_ptr<Iterator> upstream, int64_t count) {
  return std::make_unique<WindowIterator>(std::move(upstream), PositionWindow::Skip(count));
}

}  // namespace tower::data
