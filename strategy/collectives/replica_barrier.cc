#include "strategy/collectives/replica_barrier.h"

#include <immintrin.h>
#include <sched.h>

#include "strategy/runtime/replica_scheduler.h"
#include "strategy/collectives/flight_recorder.h"
#include "util/logging.h"
#include "util/strings.h"
#include "util/trace.h"

namespace tower {

ReplicaBarrier::ReplicaBarrier(std::vector<std::string> names, std::chrono::milliseconds timeout,
                               bool spin)
    : names_(std::move(names)), timeout_(timeout), spin_(spin), arrival_(names_.size()) {}

Status ReplicaBarrier::AbortStatus() {
  std::lock_guard<std::mutex> lock(mu_);
  return abort_status_;
}

namespace {

// Counts a waiter that blocks on the condition variable, from before its last look at the
// generation (sequentially consistent, as the opener's store and load are) until it is done.
class BlockedWaiter {
 public:
  explicit BlockedWaiter(std::atomic<int>& count) : count_(count) {
    count_.fetch_add(1, std::memory_order_seq_cst);
  }
  ~BlockedWaiter() { count_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  std::atomic<int>& count_;
};

}  // namespace

Status ReplicaBarrier::Wait(int replica) {
  return WaitRunning(replica, nullptr, nullptr, nullptr);
}

Status ReplicaBarrier::WaitRunning(int replica, uint64_t (*last)(void*), void* context,
                                   uint64_t* word) {
  if (aborted()) return AbortStatus();
  const int n = size();
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  arrival_[replica].generation.store(generation + 1, std::memory_order_relaxed);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
    // Last to arrive (the acquire sees every earlier arrival's writes: the fetch_adds form
    // one release sequence): run the caller's work, then open the barrier for everyone.
    if (last != nullptr) {
      *word = last(context);
      word_.store(*word, std::memory_order_relaxed);  // published by the generation's store
    }
    arrived_.store(0, std::memory_order_relaxed);
    generation_.store(generation + 1, std::memory_order_seq_cst);
    if (blocked_.load(std::memory_order_seq_cst) > 0) {
      // Through the lock: a waiter between its last look and its wait cannot miss this.
      { std::lock_guard<std::mutex> lock(mu_); }
      cv_.notify_all();
    }
    return OkStatus();
  }
  const Status opened = AwaitOpen(replica, generation);
  // Seen open, so the word is this generation's: the next one's last arrival, which could
  // overwrite it, waits for this replica.
  if (opened.ok() && word != nullptr) *word = word_.load(std::memory_order_relaxed);
  return opened;
}

Status ReplicaBarrier::AwaitOpen(int replica, uint64_t generation) {
  trace::Span waiting("wait for replicas", trace::Category::kWait);
  if (ReplicaScheduler::OnReplicaFiber()) return WaitOnFiber(replica, generation);
  if (spin_) {
    // About 20-50 µs of polling: far longer than replicas that run in step need.
    for (int i = 0; i < 4096; ++i) {
      if (generation_.load(std::memory_order_acquire) != generation) return OkStatus();
      if (aborted()) return AbortStatus();
      _mm_pause();
    }
  } else {
    for (int i = 0; i < 16; ++i) {
      if (generation_.load(std::memory_order_acquire) != generation) return OkStatus();
      sched_yield();
    }
  }
  auto open_or_aborted = [&] { return OpenOrAborted(generation); };
  BlockedWaiter blocked(blocked_);
  std::unique_lock<std::mutex> lock(mu_);
  // Half the deadline: one waiter says who is late, while there is still time to look.
  bool released = cv_.wait_for(lock, timeout_ / 2, open_or_aborted);
  if (!released) {
    WarnLate(replica, generation);
    released = cv_.wait_for(lock, timeout_ - timeout_ / 2, open_or_aborted);
  }
  if (generation_.load(std::memory_order_acquire) != generation) return OkStatus();
  if (aborted_.load(std::memory_order_acquire)) return abort_status_;
  lock.unlock();
  return GiveUp(replica, generation);
}

Status ReplicaBarrier::WaitOnFiber(int replica, uint64_t generation) {
  // The replicas this one waits for may be fibers of this very thread: hand them the
  // thread until the barrier opens. Deadlines as on a thread of its own.
  const auto start = std::chrono::steady_clock::now();
  bool warned = false;
  for (uint32_t polls = 1;; ++polls) {
    if (generation_.load(std::memory_order_acquire) != generation) return OkStatus();
    if (aborted()) return AbortStatus();
    if (polls % 256 == 0) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (!warned && waited >= timeout_ / 2) {
        WarnLate(replica, generation);
        warned = true;
      }
      if (waited >= timeout_) return GiveUp(replica, generation);
      if (polls >= (1u << 14)) {
        // Long wait (well over 100 µs): every fiber of this thread waits too (each poll of
        // this one follows a turn of all the others), so block the thread a little rather
        // than spin. A barrier opening wakes it; one elsewhere after at most 100 µs.
        BlockedWaiter blocked(blocked_);
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::microseconds(100),
                     [&] { return OpenOrAborted(generation); });
      }
    }
    ReplicaScheduler::YieldToOtherReplicas();
    _mm_pause();
  }
}

bool ReplicaBarrier::OpenOrAborted(uint64_t generation) const {
  // Sequentially consistent: read after the waiter counted itself in blocked_.
  return generation_.load(std::memory_order_seq_cst) != generation ||
         aborted_.load(std::memory_order_acquire);
}

std::vector<std::string> ReplicaBarrier::Missing(uint64_t generation) const {
  std::vector<std::string> missing;
  for (int r = 0; r < size(); ++r) {
    if (arrival_[r].generation.load(std::memory_order_relaxed) != generation + 1) {
      missing.push_back(names_[r]);
    }
  }
  return missing;
}

void ReplicaBarrier::WarnLate(int replica, uint64_t generation) {
  uint64_t warned = warned_generation_.load(std::memory_order_relaxed);
  if (warned != generation + 1 &&
      warned_generation_.compare_exchange_strong(warned, generation + 1)) {
    TOWER_LOG(WARNING) << "a collective has waited " << (timeout_ / 2).count()
                       << " ms, half its deadline: " << names_[replica] << " waits for "
                       << Join(Missing(generation), ", ") << "; it gives up at "
                       << timeout_.count() << " ms";
  }
}

Status ReplicaBarrier::GiveUp(int replica, uint64_t generation) {
  const Status timeout = DeadlineExceededError(
      "collective timed out after " + std::to_string(timeout_.count()) + " ms: " +
      names_[replica] + " waited for " + Join(Missing(generation), ", ") +
      ", which never arrived");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation_.load(std::memory_order_acquire) != generation) return OkStatus();
    if (aborted_.load(std::memory_order_acquire)) return abort_status_;
    // Release everyone else too: nobody waits for a replica that is not coming.
    abort_status_ = timeout;
    aborted_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  // What every collective of this process was doing, for `tower doctor`.
  const Status dumped = FlightRecorder::Get().Dump(timeout.message());
  if (!dumped.ok()) TOWER_LOG(WARNING) << dumped.message();
  return timeout;
}

void ReplicaBarrier::Abort(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.load(std::memory_order_relaxed)) return;  // the first reason wins
    abort_status_ = reason;
    aborted_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void ReplicaBarrier::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_.store(false, std::memory_order_release);
  abort_status_ = OkStatus();
  arrived_.store(0, std::memory_order_relaxed);
  generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

}  // namespace tower
