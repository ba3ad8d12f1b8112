// Intra-op parallelism: how many threads one CPU kernel call may use here, and the pool of
// threads it borrows them from.
//
// The budget. CurrentIntraOpThreads() is what a kernel call running here may use: the
// innermost ScopedIntraOpThreads of the thread (of the replica fiber, where replicas share a
// thread), else the process's intra-op setting (tower::config::SetIntraOpParallelismThreads;
// 0 = one thread per usable core). Workers of the pool have a budget of 1. A strategy
// whose replicas already occupy the cores gives each replica its share (max(1, cores /
// concurrent replicas) when the setting is 0), so that kernels split only into idle cores.
//
// The pool. IntraOpPool::Global() starts at its first use with (resolved intra-op setting
// - 1) workers; the calling thread runs chunks too. ParallelFor runs a fixed list of chunks:
// the kernel decides the chunks from the shapes and its budget only, never from which
// thread is free, so the result is the same bits whoever runs which chunk. One call holds
// the pool at a time; a call that finds it held (another replica's kernel) runs every chunk
// on its own thread: the same chunks, the same bits, no waiting. A call allocates nothing.
#ifndef TOWER_DEVICE_INTRA_OP_H_
#define TOWER_DEVICE_INTRA_OP_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace tower {

// Threads a kernel call running here may use (>= 1). The one place that reads the budget,
// which is per thread, and per replica fiber where replicas share a thread.
int CurrentIntraOpThreads();

// The process's intra-op setting with 0 resolved to UsableCores() (device/cpu_platform.h).
int ResolvedIntraOpThreads();
// The process's inter-op setting with 0 resolved to UsableCores(): how many OS threads may
// run CPU replicas at once.
int ResolvedInterOpThreads();

// Makes CurrentIntraOpThreads() return `threads` on this thread (this fiber, on a replica
// fiber) while alive (0: back to the process's resolved setting). Nests; destroy in reverse
// order.
class ScopedIntraOpThreads {
 public:
  explicit ScopedIntraOpThreads(int threads);
  ~ScopedIntraOpThreads();
  ScopedIntraOpThreads(const ScopedIntraOpThreads&) = delete;
  ScopedIntraOpThreads& operator=(const ScopedIntraOpThreads&) = delete;

 private:
  int previous_;
};

class IntraOpPool {
 public:
  // What a chunk runs: fn(context, chunk). A plain function and a pointer, so that a call
  // allocates nothing (no std::function).
  using ChunkFn = void (*)(void* context, int chunk);

  // The process's pool, started at the first call with ResolvedIntraOpThreads() - 1
  // workers (at most kMaxWorkers). Never destroyed: at exit its workers are stopped and
  // joined, and later calls (from destructors of statics) run on the caller.
  static IntraOpPool& Global();
  static constexpr int kMaxWorkers = 255;

  // A pool of its own (tests); `workers` >= 0 threads start now.
  explicit IntraOpPool(int workers);
  // Stops and joins the workers.
  ~IntraOpPool();
  IntraOpPool(const IntraOpPool&) = delete;
  IntraOpPool& operator=(const IntraOpPool&) = delete;

  // Runs fn(context, c) once for every c in [0, chunks) and returns when all have returned:
  // on the caller and the workers when the pool is free, else (or beyond 65535 chunks) on
  // the caller alone. Which thread runs which chunk varies; each chunk must write only its
  // own part of the output.
  void ParallelFor(int chunks, ChunkFn fn, void* context);
  // The same with a callable f(int chunk), taken by reference (nothing is copied).
  template <typename F>
  void ParallelFor(int chunks, const F& f) {
    ParallelFor(
        chunks, [](void* context, int chunk) { (*static_cast<const F*>(context))(chunk); },
        const_cast<void*>(static_cast<const void*>(&f)));
  }

  int workers() const { return static_cast<int>(threads_.size()); }
  // Calls with more than one chunk so far, and those of them that found the pool held by
  // another call and ran on their caller alone (for tests and diagnostics).
  uint64_t split_calls() const { return split_calls_.load(std::memory_order_relaxed); }
  uint64_t busy_fallbacks() const { return busy_fallbacks_.load(std::memory_order_relaxed); }
  // Stops and joins the workers (idempotent); later calls run on the caller.
  void Stop();
  bool stopped() const { return stopping_.load(std::memory_order_acquire); }

 private:
  void WorkerLoop();
  // Claims and runs chunks of job `generation` until none is left (none at all if that job
  // has already finished and another begun).
  void RunChunks(uint32_t generation);

  // The job: claim_ packs (generation << 32) | (chunks << 16) | next, so that a worker
  // claims a chunk of the job it saw, or learns that the job has moved on, in one CAS.
  // fn_ and context_ are written before the job's claim_ (release) and never while a chunk
  // of the job is claimed and unfinished.
  static constexpr int kMaxChunks = 0xffff;
  std::atomic<uint64_t> claim_{0};
  ChunkFn fn_ = nullptr;
  void* context_ = nullptr;
  std::atomic<int> done_{0};        // chunks of the current job finished
  std::atomic<bool> busy_{false};   // a ParallelFor holds the pool
  std::atomic<bool> stopping_{false};
  std::atomic<int> started_{0};     // workers that have set up (the constructor waits for all)
  std::atomic<uint64_t> split_calls_{0};
  std::atomic<uint64_t> busy_fallbacks_{0};

  // Idle workers block here after spinning; the caller notifies only when one sleeps.
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  std::vector<std::thread> threads_;
  std::mutex stop_mu_;  // serialises Stop
};

// fn(context, c) for c in [0, chunks): one chunk runs on the caller without touching the
// pool; more go to IntraOpPool::Global().
void ParallelFor(int chunks, IntraOpPool::ChunkFn fn, void* context);
template <typename F>
void ParallelFor(int chunks, const F& f) {
  if (chunks == 1) {
    f(0);
    return;
  }
  if (chunks > 1) IntraOpPool::Global().ParallelFor(chunks, f);
}

}  // namespace tower

#endif  // TOWER_DEVICE_INTRA_OP_H_
