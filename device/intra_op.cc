#include "device/intra_op.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "device/context.h"
#include "device/cpu_platform.h"
#include "util/check.h"
#include "util/fiber.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TOWER_CPU_RELAX() _mm_pause()
#else
#define TOWER_CPU_RELAX() std::this_thread::yield()
#endif

namespace tower {
namespace {

// How long an idle worker polls for the next job before it blocks. The kernels of one
// training step follow each other within tens of µs (elementwise ops between the
// products); a worker that blocked would pay a futex wake-up (10-50 µs) per product.
constexpr auto kWorkerSpin = std::chrono::microseconds(100);
// Pause instructions the caller spends waiting for the workers' last chunks before it
// starts yielding its core (chunks are equal shares, so the wait is normally short).
constexpr int kCallerSpins = 1 << 12;

// Counted once: every kernel call reads it (sched_getaffinity is a system call).
int CachedUsableCores() {
  static const int cores = std::max(1, UsableCores());
  return cores;
}

// The budget of the code running here: per thread, and per replica fiber when replicas
// share a thread (util/fiber.h), so that each replica's ScopedIntraOpThreads stays its own.
// 0: no ScopedIntraOpThreads.
int& BudgetSlot() {
  static FiberLocal<int> slot;
  return slot.Get();
}

constexpr uint64_t Pack(uint32_t generation, int chunks, int next) {
  return (uint64_t{generation} << 32) | (static_cast<uint64_t>(chunks) << 16) |
         static_cast<uint64_t>(next);
}
constexpr uint32_t GenerationOf(uint64_t claim) { return static_cast<uint32_t>(claim >> 32); }
constexpr int ChunksOf(uint64_t claim) { return static_cast<int>((claim >> 16) & 0xffff); }
constexpr int NextOf(uint64_t claim) { return static_cast<int>(claim & 0xffff); }

void RunInline(int chunks, IntraOpPool::ChunkFn fn, void* context) {
  for (int c = 0; c < chunks; ++c) fn(context, c);
}

}  // namespace

int CurrentIntraOpThreads() {
  const int budget = BudgetSlot();
  return budget > 0 ? budget : ResolvedIntraOpThreads();
}

int ResolvedIntraOpThreads() {
  const int setting = Context::Global().GetIntraOpParallelismThreads();
  return setting > 0 ? setting : CachedUsableCores();
}

int ResolvedInterOpThreads() {
  const int setting = Context::Global().GetInterOpParallelismThreads();
  return setting > 0 ? setting : CachedUsableCores();
}

ScopedIntraOpThreads::ScopedIntraOpThreads(int threads) : previous_(BudgetSlot()) {
  TOWER_CHECK(threads >= 0) << "intra-op threads must be >= 0, got " << threads;
  BudgetSlot() = threads;
}

ScopedIntraOpThreads::~ScopedIntraOpThreads() { BudgetSlot() = previous_; }

IntraOpPool& IntraOpPool::Global() {
  // Built at the first use and never destroyed: kernels may run in destructors of statics,
  // after exit has stopped the workers (they then run on the caller).
  static IntraOpPool* const pool = [] {
    const int threads = std::min(ResolvedIntraOpThreads(), kMaxWorkers + 1);
    auto* created = new IntraOpPool(threads - 1);
    // Joined at exit, so that no worker still runs while the process tears down.
    std::atexit([] { Global().Stop(); });
    return created;
  }();
  return *pool;
}

IntraOpPool::IntraOpPool(int workers) {
  TOWER_CHECK(workers >= 0 && workers <= kMaxWorkers) << "workers=" << workers;
  threads_.reserve(static_cast<size_t>(workers));
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { WorkerLoop(); });
  // Returns with every worker set up (its thread-local state made): no worker makes
  // anything later, during some call.
  while (started_.load(std::memory_order_acquire) < workers) std::this_thread::yield();
}

IntraOpPool::~IntraOpPool() { Stop(); }

void IntraOpPool::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  stopping_.store(true, std::memory_order_seq_cst);
  {
    std::lock_guard<std::mutex> lock(mu_);  // a worker between its check and its wait
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) {
    if (!thread.joinable()) continue;
    // Stop run on a worker (the process ending from inside a chunk, whose exit handlers
    // stop the pool): that worker cannot join itself.
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();
    } else {
      thread.join();
    }
  }
}

void IntraOpPool::RunChunks(uint32_t generation) {
  uint64_t claim = claim_.load(std::memory_order_acquire);
  while (GenerationOf(claim) == generation && NextOf(claim) < ChunksOf(claim)) {
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // `claim` now holds the current value
    }
    // The job cannot finish (nor fn_ change) before this chunk is counted done.
    fn_(context_, NextOf(claim));
    done_.fetch_add(1, std::memory_order_release);
    claim = claim_.load(std::memory_order_acquire);
  }
}

void IntraOpPool::WorkerLoop() {
  // Kernels inside a chunk do not split again.
  ScopedIntraOpThreads one(1);
  started_.fetch_add(1, std::memory_order_release);
  uint32_t seen = 0;  // the generation of no job: the first job (1) is news, however late
                      // this thread starts
  auto has_news = [&] {
    return GenerationOf(claim_.load(std::memory_order_seq_cst)) != seen ||
           stopping_.load(std::memory_order_seq_cst);
  };
  while (true) {
    bool news = false;
    const auto spin_until = std::chrono::steady_clock::now() + kWorkerSpin;
    for (uint32_t polls = 1; !(news = has_news()); ++polls) {
      TOWER_CPU_RELAX();
      if (polls % 64 == 0 && std::chrono::steady_clock::now() >= spin_until) break;
    }
    if (!news) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, has_news);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = GenerationOf(claim_.load(std::memory_order_acquire));
    RunChunks(seen);
  }
}

void IntraOpPool::ParallelFor(int chunks, ChunkFn fn, void* context) {
  if (chunks > 1) split_calls_.fetch_add(1, std::memory_order_relaxed);
  if (chunks <= 1 || chunks > kMaxChunks || threads_.empty() ||
      stopping_.load(std::memory_order_relaxed)) {
    RunInline(chunks, fn, context);
    return;
  }
  if (busy_.exchange(true, std::memory_order_acquire)) {
    // Another call (another replica's kernel) holds the workers: the same chunks, here.
    busy_fallbacks_.fetch_add(1, std::memory_order_relaxed);
    RunInline(chunks, fn, context);
    return;
  }
  fn_ = fn;
  context_ = context;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t generation = GenerationOf(claim_.load(std::memory_order_relaxed)) + 1;
  claim_.store(Pack(generation, chunks, 0), std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    // Through the lock: a worker between its last look and its wait cannot miss this.
    { std::lock_guard<std::mutex> lock(mu_); }
    wake_.notify_all();
  }
  RunChunks(generation);
  // The chunks the workers claimed: wait until they are done.
  for (int spins = 0; done_.load(std::memory_order_acquire) < chunks; ++spins) {
    if (spins < kCallerSpins) {
      TOWER_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  busy_.store(false, std::memory_order_release);
}

void ParallelFor(int chunks, IntraOpPool::ChunkFn fn, void* context) {
  if (chunks == 1) {
    fn(context, 0);
  } else if (chunks > 1) {
    IntraOpPool::Global().ParallelFor(chunks, fn, context);
  }
}

}  // namespace tower
