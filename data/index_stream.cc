#include "data/index_stream.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "data/shuffle_buffer.h"
#include "data/transform_rules.h"

namespace tower::data {

int64_t IndexStream::Skip(int64_t n) {
  int64_t scratch[256];
  int64_t skipped = 0;
  while (skipped < n) {
    const int64_t got = Next(scratch, std::min<int64_t>(n - skipped, 256));
    if (got == 0) break;
    skipped += got;
  }
  return skipped;
}

namespace {

class RangeStream final : public IndexStream {
 public:
  explicit RangeStream(int64_t rows)
      : end_(rows < 0 ? std::numeric_limits<int64_t>::max() : rows) {}

  int64_t Next(int64_t* out, int64_t max) override {
    const int64_t n = std::min(max, end_ - next_);
    for (int64_t i = 0; i < n; ++i) out[i] = next_ + i;
    next_ += n;
    return n;
  }

  int64_t Skip(int64_t n) override {
    const int64_t skipped = std::min(n, end_ - next_);
    next_ += skipped;
    return skipped;
  }

 private:
  int64_t end_;
  int64_t next_ = 0;
};

class ShuffleStream final : public IndexStream {
 public:
  ShuffleStream(std::unique_ptr<IndexStream> upstream, int64_t buffer_size, uint64_t key)
      : upstream_(std::move(upstream)), buffer_(buffer_size, key) {}

  int64_t Next(int64_t* out, int64_t max) override {
    int64_t n = 0;
    while (n < max) {
      while (buffer_.WantsMore()) {
        if (staged_next_ == staged_.size()) {
          staged_.resize(kChunk);
          const int64_t got = upstream_->Next(staged_.data(), kChunk);
          staged_.resize(static_cast<size_t>(got));
          staged_next_ = 0;
          if (got == 0) {
            buffer_.UpstreamEnded();
            break;
          }
        }
        buffer_.Push(staged_[staged_next_++]);
      }
      if (buffer_.empty()) break;
      out[n++] = buffer_.Pop();
    }
    return n;
  }

 private:
  static constexpr int64_t kChunk = 256;

  std::unique_ptr<IndexStream> upstream_;
  ShuffleBuffer<int64_t> buffer_;
  std::vector<int64_t> staged_;
  size_t staged_next_ = 0;
};

class RepeatStream final : public IndexStream {
 public:
  RepeatStream(IndexStreamFactory factory, int64_t count, uint64_t key, uint64_t salt)
      : factory_(std::move(factory)), schedule_(count, key, salt) {}

  int64_t Next(int64_t* out, int64_t max) override {
    while (true) {
      if (current_ == nullptr) {
        const std::optional<uint64_t> key = schedule_.StartNext();
        if (!key.has_value()) return 0;
        current_ = factory_(*key);
      }
      const int64_t n = current_->Next(out, max);
      if (n > 0) {
        schedule_.Produced();
        return n;
      }
      current_.reset();
      schedule_.Finished();
    }
  }

 private:
  IndexStreamFactory factory_;
  RepeatSchedule schedule_;
  std::unique_ptr<IndexStream> current_;
};

// Take and Skip: the indices in `window` (data/transform_rules.h). Skip's leading drop goes
// through upstream's Skip, so that a range drops in O(1).
class WindowStream final : public IndexStream {
 public:
  WindowStream(std::unique_ptr<IndexStream> upstream, PositionWindow window)
      : upstream_(std::move(upstream)), window_(window) {}

  int64_t Next(int64_t* out, int64_t max) override {
    DropLeading();
    const int64_t allowed = window_.Allow(max);
    if (allowed == 0) return 0;
    const int64_t n = upstream_->Next(out, allowed);
    window_.Advance(n);
    if (n == 0) window_.UpstreamEnded();
    return n;
  }

  int64_t Skip(int64_t n) override {
    DropLeading();
    const int64_t allowed = window_.Allow(n);
    const int64_t skipped = upstream_->Skip(allowed);
    window_.Advance(skipped);
    if (skipped < allowed) window_.UpstreamEnded();  // Skip drops fewer only at the end
    return skipped;
  }

 private:
  void DropLeading() {
    const int64_t to_drop = window_.ToDrop();
    if (to_drop == 0) return;
    const int64_t dropped = upstream_->Skip(to_drop);
    window_.Advance(dropped);
    if (dropped < to_drop) window_.UpstreamEnded();
  }

  std::unique_ptr<IndexStream> upstream_;
  PositionWindow window_;
};

}  // namespace

std::unique_ptr<IndexStream> MakeRangeStream(int64_t rows) {
  return std::make_unique<RangeStream>(rows);
}

std::unique_ptr<IndexStream> MakeShuffleStream(std::unique_ptr<IndexStream> upstream,
                                               int64_t buffer_size, uint64_t key) {
  return std::make_unique<ShuffleStream>(std::move(upstream), buffer_size, key);
}

std::unique_ptr<IndexStream> MakeRepeatStream(IndexStreamFactory factory, int64_t count,
                                              uint64_t key, uint64_t salt) {
  return std::make_unique<RepeatStream>(std::move(factory), count, key, salt);
}

std::unique_ptr<IndexStream> MakeTakeStream(std::unique_ptr<IndexStream> upstream,
                                            int64_t count) {
  return std::make_unique<WindowStream>(std::move(upstream), PositionWindow::Take(count));
}

std::unique_ptr<IndexStream> MakeSkipStream(std::unique_ptr<IndexStream> upstream,
                                            int64_t count) {
  return std::make_unique<WindowStream>(std::move(upstream), PositionWindow::Skip(count));
}

}  // namespace tower::data
