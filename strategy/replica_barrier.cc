#include "strategy/replica_barrier.h"

#include <immintrin.h>
#include <sched.h>

#include "util/logging.h"
#include "util/strings.h"

namespace tower {

ReplicaBarrier::ReplicaBarrier(std::vector<std::string> names, std::chrono::milliseconds timeout,
                               bool spin)
    : names_(std::move(names)), timeout_(timeout), spin_(spin), arrival_(names_.size()) {
  for (auto& a : arrival_) a.store(0, std::memory_order_relaxed);
}

Status ReplicaBarrier::AbortStatus() {
  std::lock_guard<std::mutex> lock(mu_);
  return abort_status_;
}

Status ReplicaBarrier::Wait(int replica) {
  if (aborted()) return AbortStatus();
  const int n = size();
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  arrival_[replica].store(generation + 1, std::memory_order_relaxed);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
    // Last to arrive: open the barrier for everyone.
    arrived_.store(0, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);
      generation_.store(generation + 1, std::memory_order_release);
    }
    cv_.notify_all();
    return OkStatus();
  }
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
  auto missing_now = [&] {
    std::vector<std::string> missing;
    for (int r = 0; r < n; ++r) {
      if (arrival_[r].load(std::memory_order_relaxed) != generation + 1) {
        missing.push_back(names_[r]);
      }
    }
    return missing;
  };
  auto open_or_aborted = [&] {
    return generation_.load(std::memory_order_acquire) != generation ||
           aborted_.load(std::memory_order_acquire);
  };
  std::unique_lock<std::mutex> lock(mu_);
  // Half the deadline: one waiter says who is late, while there is still time to look.
  bool released = cv_.wait_for(lock, timeout_ / 2, open_or_aborted);
  if (!released) {
    uint64_t warned = warned_generation_.load(std::memory_order_relaxed);
    if (warned != generation + 1 &&
        warned_generation_.compare_exchange_strong(warned, generation + 1)) {
      TOWER_LOG(WARNING) << "a collective has waited " << (timeout_ / 2).count()
                         << " ms, half its deadline: " << names_[replica] << " waits for "
                         << Join(missing_now(), ", ") << "; it gives up at "
                         << timeout_.count() << " ms";
    }
    released = cv_.wait_for(lock, timeout_ - timeout_ / 2, open_or_aborted);
  }
  if (generation_.load(std::memory_order_acquire) != generation) return OkStatus();
  if (aborted_.load(std::memory_order_acquire)) return abort_status_;
  if (!released) {
    const std::vector<std::string> missing = missing_now();
    const Status timeout = DeadlineExceededError(
        "collective timed out after " + std::to_string(timeout_.count()) + " ms: " +
        names_[replica] + " waited for " + Join(missing, ", ") + ", which never arrived");
    // Release everyone else too: nobody waits for a replica that is not coming.
    abort_status_ = timeout;
    aborted_.store(true, std::memory_order_release);
    lock.unlock();
    cv_.notify_all();
    return timeout;
  }
  return abort_status_;
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
