// ReplicaScheduler: runs one call per local replica on the strategy's threads, and lets a
// replica that waits for the others hand its thread to them.
//
// Two modes, fixed when the strategy is made:
//   - one OS thread per replica (replica 0 on the caller's thread): GPU replicas, and host
//     replicas that do not outnumber the threads. A waiting replica spins or blocks in its
//     barrier as before.
//   - fibers: host replicas that outnumber the threads run as fibers (util/fiber.h), replica
//     r on thread r % threads (thread 0 the caller's). A replica that waits in a collective
//     yields to the next fiber of its thread (a switch of a few ns) instead of blocking in the
//     kernel, so R replicas on C < R cores cost about what C do, not C context switches
//     through the kernel's scheduler per collective (which made 4 replicas on 2 cores 8×
//     slower than 2 on `linreg`).
// Same replica-to-work mapping in both modes: which replica sums which slice, and in which
// order, does not depend on the mode, so results are the same bits either way.
#ifndef TOWER_STRATEGY_RUNTIME_REPLICA_SCHEDULER_H_
#define TOWER_STRATEGY_RUNTIME_REPLICA_SCHEDULER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "util/cache_line.h"
#include "util/fiber.h"
#include "util/round_robin.h"

namespace tower {

class ReplicaScheduler {
 public:
  // `replicas` replicas on `threads` OS threads (1 <= threads <= replicas); fibers when
  // threads < replicas. `spin`: whether idle threads poll for the next run before blocking
  // (worth it only when every thread has a core).
  ReplicaScheduler(int replicas, int threads, bool spin);
  ~ReplicaScheduler();
  ReplicaScheduler(const ReplicaScheduler&) = delete;
  ReplicaScheduler& operator=(const ReplicaScheduler&) = delete;

  // What a run does for each replica: body(context, replica). A plain function and a
  // pointer, so a run allocates nothing.
  using Body = void (*)(void* context, int replica);
  // Runs body(context, r) for every replica r and returns once all have returned. One run
  // at a time; the caller's thread is thread 0.
  void Run(Body body, void* context);
  // Runs body(context, t) for the first replica of each of the first `threads` threads
  // only (replicas 0 … threads − 1, 1 <= threads <= threads()), each on its thread's own
  // stack, not on a fiber (so nothing can yield to it: the run is the threads' alone), and
  // returns once all have returned. What batched steps run
  // (MirroredStrategy::RunOnReplicaBatches). With threads == 1 only the caller runs: the
  // other threads are not woken, and their cores stay free for the batch's intra-op
  // threads. One run at a time, as Run.
  void RunFirstOfThreads(int threads, Body body, void* context);

  int replicas() const { return replicas_; }
  int threads() const { return threads_; }
  // Which thread runs which replica: replica r on thread r % threads. Folding's groups and
  // batched replicas' batches are dealt by this same rule.
  RoundRobin deal() const { return RoundRobin(replicas_, threads_); }
  bool uses_fibers() const { return threads_ < replicas_; }

  // For code that waits for other replicas (ReplicaBarrier). On a replica fiber: runs the
  // other fibers of this thread that are not done, in turn, and returns when this one is
  // resumed (at once if it is the only one left); returns true. Elsewhere: does nothing and
  // returns false (the caller waits its own way).
  static bool YieldToOtherReplicas();
  // Whether the caller runs on a replica fiber.
  static bool OnReplicaFiber();

 private:
  struct Thread;
  // The share whose fibers run on this thread now (fiber mode), else nullptr.
  static thread_local Thread* running_share_;
  void WorkerLoop(int thread);
  void RunThread(Thread& thread);
  // first_of_threads: 0 for Run, else RunFirstOfThreads' count.
  void Start(Body body, void* context, int first_of_threads);
  static Fiber* FiberEntry(void* slot);

  const int replicas_;
  const int threads_;
  const bool spin_;
  std::vector<std::unique_ptr<Thread>> thread_state_;

  // Dispatch to threads 1..threads-1: a run is a new generation. Everything a run's start
  // and end touch on both sides is on this one cache line: a worker that sees the new
  // generation finds the body and its context there (no second line from the caller's
  // core), and the caller that waits for the workers reads `pending_` there.
  alignas(kCacheLineBytes) std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  Body body_ = nullptr;
  void* context_ = nullptr;
  int first_of_threads_ = 0;  // RunFirstOfThreads' count; 0: Run
  std::atomic<bool> stopping_{false};
  // Blocked workers, and whether the caller blocks for them: the lock and the condition
  // variables are touched only then (a run back to back with the last costs no system call
  // and no lock).
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeps_{false};
  alignas(kCacheLineBytes) std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::vector<std::thread> workers_;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_RUNTIME_REPLICA_SCHEDULER_H_
