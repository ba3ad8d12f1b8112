#include "data/prefetch.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace tower::data {

namespace {

using Element = StatusOr<std::optional<Batch>>;

class PrefetchIterator final : public Iterator {
 public:
  PrefetchIterator(std::unique_ptr<Iterator> upstream, int64_t buffer_size)
      : upstream_(std::move(upstream)), capacity_(static_cast<size_t>(buffer_size)) {}

  ~PrefetchIterator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  Status Start() {
    try {
      producer_ended_ = false;
      thread_ = std::thread([this] { Produce(); });
    } catch (const std::system_error& error) {
      return UnavailableError(std::string("Prefetch: cannot start the background thread: ") +
                              error.what());
    }
    return OkStatus();
  }

  // The producer stopped (what it made stays queued, its element in flight too), the queued
  // elements passed here, the rest by the upstream's own Skip (fast where the upstream can
  // skip without reading: a resumed run's fast-forward), and the producer started again.
  StatusOr<int64_t> Skip(int64_t n) override {
    if (finished_.has_value()) return Iterator::Skip(n);
    StopProducer();
    int64_t passed = 0;
    while (passed < n && !queue_.empty()) {
      Element element = std::move(queue_.front());
      queue_.pop_front();
      if (!element.ok() || !element->has_value()) {
        finished_ = element;
        if (!element.ok()) return element.status();
        return passed;
      }
      if ((*element)->rows > 0) ++passed;
    }
    if (passed < n && !producer_ended_) {
      StatusOr<int64_t> more = upstream_->Skip(n - passed);
      if (!more.ok()) {
        finished_ = Element(more.status());
        return more.status();
      }
      passed += *more;
    }
    if (!producer_ended_) TOWER_RETURN_IF_ERROR(Start());
    return passed;
  }

  Element Next() override {
    if (finished_.has_value()) return *finished_;
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [this] { return !queue_.empty(); });
    Element element = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    space_.notify_one();
    // The end and an error are the producer's last item: keep them for later calls.
    if (!element.ok() || !element->has_value()) finished_ = element;
    return element;
  }

 private:
  // Stops the producer and joins it; what it made is in queue_ (consumer side: Skip).
  void StopProducer() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    if (thread_.joinable()) thread_.join();
    stop_ = false;
  }

  void Produce() {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) return;
      }
      Element element = upstream_->Next();
      const bool last = !element.ok() || !element->has_value();
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock, [this] { return stop_ || queue_.size() < capacity_; });
      // Stopped: the element still goes in (past the bound), so that a Skip that stopped
      // the producer loses none of the sequence.
      queue_.push_back(std::move(element));
      if (last) producer_ended_ = true;
      if (stop_) return;
      lock.unlock();
      ready_.notify_one();
      if (last) return;
    }
  }

  std::unique_ptr<Iterator> upstream_;  // used by the producer thread only
  const size_t capacity_;
  std::mutex mutex_;
  std::condition_variable ready_;  // the queue is not empty
  std::condition_variable space_;  // the queue has room, or stop_
  std::deque<Element> queue_;
  bool stop_ = false;
  bool producer_ended_ = false;      // it queued the end or an error, and returned
  std::optional<Element> finished_;  // consumer side only
  std::thread thread_;
};

}  // namespace

StatusOr<std::unique_ptr<Iterator>> MakePrefetchIterator(std::unique_ptr<Iterator> upstream,
                                                         int64_t buffer_size) {
  TOWER_CHECK(buffer_size >= 1) << "Prefetch buffer " << buffer_size;
  auto iterator = std::make_unique<PrefetchIterator>(std::move(upstream), buffer_size);
  TOWER_RETURN_IF_ERROR(iterator->Start());
  return std::unique_ptr<Iterator>(std::move(iterator));
}

}  // namespace tower::data
