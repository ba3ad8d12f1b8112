// ReplicaBarrier: where the replica threads of one process meet, once per collective phase.
//
// Reusable (generation-counted). A waiter spins briefly — replicas usually arrive within
// microseconds of each other, and a futex wake costs more than that — then blocks. It never
// hangs: Abort() releases every waiter with the abort reason (a replica failed), and a
// deadline turns a missing replica into DeadlineExceeded naming it. A replica running as a
// fiber (more host replicas than threads) yields its thread to the others while it waits.
#ifndef TOWER_STRATEGY_COLLECTIVES_REPLICA_BARRIER_H_
#define TOWER_STRATEGY_COLLECTIVES_REPLICA_BARRIER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "util/cache_line.h"
#include "util/status.h"

namespace tower {

class ReplicaBarrier {
 public:
  // `names[r]` describes replica r in errors ("replica 1 (/job:.../device:CPU:1)").
  // `spin` = whether to spin before blocking (off when replicas outnumber cores).
  ReplicaBarrier(std::vector<std::string> names, std::chrono::milliseconds timeout, bool spin);

  // Returns once all replicas have called Wait for this generation; or the abort reason;
  // or DeadlineExceeded naming the replicas that did not arrive within the timeout. At half
  // the timeout, one waiter logs a warning naming the replicas not arrived yet.
  Status Wait(int replica);
  // As Wait, but the last replica to arrive first calls `on_last()`, and opens the barrier
  // only when it returns: one replica's work on what every replica left before arriving (the
  // writes of all of them are visible to it), finished before any replica leaves. What
  // `on_last` returns (a uint64_t) every replica gets in `*word`, from the cache line it
  // reads to leave: a decision for all that costs no further line from another core.
  // `on_last` is not called, and `*word` not set, when the wait fails. No allocation:
  // `on_last` is passed by reference.
  template <typename OnLast>
  Status Wait(int replica, OnLast& on_last, uint64_t* word) {
    return WaitRunning(
        replica, [](void* f) -> uint64_t { return (*static_cast<OnLast*>(f))(); }, &on_last,
        word);
  }

  // Releases all current and future waiters with `reason` until Reset().
  void Abort(const Status& reason);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  // Ready for the next run: clears the abort and the arrival count.
  void Reset();

  int size() const { return static_cast<int>(names_.size()); }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  // Both Waits: `last(context)`, where `last` is not null, runs as Wait(replica, on_last,
  // word) says.
  Status WaitRunning(int replica, uint64_t (*last)(void*), void* context, uint64_t* word);
  // A waiter's wait for the barrier of `generation` to open (or fail).
  Status AwaitOpen(int replica, uint64_t generation);
  Status AbortStatus();
  // A replica fiber's wait (strategy/runtime/replica_scheduler.h): yields to the other fibers of
  // its thread instead of blocking it.
  Status WaitOnFiber(int replica, uint64_t generation);
  // Whether the barrier of `generation` has opened or been aborted (what a blocked waiter
  // waits for).
  bool OpenOrAborted(uint64_t generation) const;
  // The names of the replicas that have not arrived in `generation`.
  std::vector<std::string> Missing(uint64_t generation) const;
  // Logs, once per generation, who has not arrived at half the deadline.
  void WarnLate(int replica, uint64_t generation);
  // The deadline passed: aborts the barrier with DeadlineExceeded naming the missing
  // replicas (unless it opened or was aborted meanwhile).
  Status GiveUp(int replica, uint64_t generation);

  const std::vector<std::string> names_;
  const std::chrono::milliseconds timeout_;
  const bool spin_;

  // Apart, on cache lines of their own: every arrival writes arrived_, every waiter polls
  // generation_, and each replica writes its own arrival_ slot.
  alignas(kCacheLineBytes) std::atomic<int> arrived_{0};
  alignas(kCacheLineBytes) std::atomic<uint64_t> generation_{0};
  // What the last arrival's work returned, on generation_'s line: written before the
  // generation is advanced, read after it is seen.
  std::atomic<uint64_t> word_{0};
  alignas(kCacheLineBytes) std::atomic<bool> aborted_{false};
  // Waiters blocked (or about to block) on cv_: only then does opening take the lock.
  std::atomic<int> blocked_{0};
  // The generation (plus one) whose stall warning was logged: one warning per collective.
  std::atomic<uint64_t> warned_generation_{0};
  // arrival_[r] = the generation replica r last arrived in, plus one.
  struct alignas(kCacheLineBytes) Arrival {
    std::atomic<uint64_t> generation{0};
  };
  std::vector<Arrival> arrival_;

  std::mutex mu_;
  std::condition_variable cv_;
  Status abort_status_;  // guarded by mu_
};

}  // namespace tower

#endif  // TOWER_STRATEGY_COLLECTIVES_REPLICA_BARRIER_H_
