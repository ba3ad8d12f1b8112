// The kernel launch and the execution of a grid on the host.
//
// A launch checks its configuration and stream, then enqueues the grid on the stream; the
// stream's worker thread runs the blocks one after another (x fastest, then y, then z). A
// block starts as a plain loop over its threads on one fiber (the "runner"), which costs a
// function call per thread. The first thread that calls __syncthreads or a warp primitive
// turns the block into fibers: the runner becomes that thread's fiber, every thread not yet
// run gets a fiber of its own, and the threads already run count as exited (they never
// synchronised, so a barrier does not wait for them). From then on the threads run
// round-robin, a thread running until it waits in a primitive or exits; the last thread to
// arrive at a barrier or warp collective releases the others. A block whose every live
// thread waits is a deadlock; a thread that waits where the others cannot follow (another
// __syncthreads, a lane of its mask exited) is a divergent barrier: both are faults that stop
// the kernel with cudaErrorLaunchFailure (sticky, as on a GPU) and one line on stderr.
//
// Fibers come from a pool per worker thread (util/fiber.h) and are reused from
// block to block and launch to launch.
#include <cudaemu/device_functions.h>
#include <cudaemu/kernel_launch.h>
#include <cudaemu/testing.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "util/fiber.h"
#include "cudaemu/runtime/core.h"
#include "cudaemu/runtime/internal.h"

#define CUDAEMU_COORDINATE __thread __attribute__((tls_model("initial-exec")))
CUDAEMU_COORDINATE uint3 threadIdx;
CUDAEMU_COORDINATE uint3 blockIdx;
CUDAEMU_COORDINATE dim3 blockDim;
CUDAEMU_COORDINATE dim3 gridDim;
#undef CUDAEMU_COORDINATE

namespace cudaemu::internal {
namespace {

using ::tower::Fiber;
using device::BarrierOp;
using device::WarpOp;

constexpr unsigned kWarpLanes = 32;

const char* WarpOpName(WarpOp op) {
  switch (op) {
    case device::kShflIdx:
      return "__shfl_sync";
    case device::kShflUp:
      return "__shfl_up_sync";
    case device::kShflDown:
      return "__shfl_down_sync";
    case device::kShflXor:
      return "__shfl_xor_sync";
    case device::kSyncWarp:
      return "__syncwarp";
    case device::kBallot:
      return "__ballot_sync";
    case device::kAny:
      return "__any_sync";
    case device::kAll:
      return "__all_sync";
  }
  return "a warp primitive";
}

const char* BarrierOpName(BarrierOp op) {
  switch (op) {
    case device::kBarrierPlain:
      return "__syncthreads";
    case device::kBarrierCount:
      return "__syncthreads_count";
    case device::kBarrierAnd:
      return "__syncthreads_and";
    case device::kBarrierOr:
      return "__syncthreads_or";
  }
  return "__syncthreads";
}

enum class Waiting : uint8_t { kNo, kBarrier, kWarp };

// A lane's call of a warp collective, while it waits for the rest of its mask.
struct LaneCall {
  WarpOp op = device::kSyncWarp;
  unsigned mask = 0;
  int bytes = 0;
  int arg = 0;
  int width = 0;
  uint64_t value = 0;
  uint64_t result = 0;
};

// Lanes of a warp (bit l: thread 32·w + l) waiting in a collective, and exited.
struct WarpState {
  unsigned pending = 0;
  unsigned exited = 0;
};

// Runs the blocks of kernels on one worker thread.
class BlockRunner {
 public:
  BlockRunner() : thread_fiber_(Fiber::ForThread()) {}

  // Runs one block of `kernel` (blockIdx, blockDim and gridDim are set);
  // false when it faulted (reported on stderr).
  bool Run(const char* kernel, const std::function<void()>* body);

  int SyncThreads(BarrierOp op, int predicate, const char* file, int line);
  uint64_t Warp(WarpOp op, unsigned mask, uint64_t bits, int bytes, int arg, int width);

 private:
  static Fiber* PlainEntry(void* self);
  static Fiber* ThreadEntry(void* self);

  Fiber* PoolFiber(size_t i);
  void ToFibers();
  void Push(unsigned thread);
  // The next thread to run (its coordinates set), or the worker's own context when none can.
  Fiber* Next();
  // Suspends the running thread until another releases it.
  void Wait();
  Fiber* ExitThread();
  int ReleaseBarrier();
  // Whether the waiting lanes of `mask` all wait in the running lane's collective.
  bool GroupReady(unsigned base, unsigned mask);
  void CompleteWarp(unsigned base, unsigned mask);

  void Report(unsigned thread, const char* what, const char* format, ...)
      __attribute__((format(printf, 4, 5)));
  // Reports a fault of the running thread and stops the block: never returns.
  [[noreturn]] void Stop();
  void ReportDeadlock();
  void AbandonAll();

  const std::unique_ptr<Fiber> thread_fiber_;
  std::vector<std::unique_ptr<Fiber>> pool_;

  // The block being run.
  const char* kernel_ = nullptr;
  const std::function<void()>* body_ = nullptr;
  dim3 dim_;
  unsigned threads_ = 0;
  unsigned current_ = 0;  // the running thread (linear index)
  bool fiber_mode_ = false;
  bool faulted_ = false;

  // Fiber mode, indexed by linear thread index (threads before `first_` ran in the loop).
  unsigned first_ = 0;
  unsigned live_ = 0;  // threads that have not exited
  std::vector<Fiber*> fibers_;
  std::vector<uint3> index_;
  std::vector<uint8_t> exited_;
  std::vector<Waiting> waiting_;
  std::vector<LaneCall> calls_;
  std::vector<WarpState> warps_;
  std::vector<int> barrier_result_;
  std::vector<unsigned> ready_;  // ring of runnable threads
  size_t ready_head_ = 0;
  size_t ready_count_ = 0;

  // The barrier's current round.
  unsigned barrier_arrived_ = 0;
  int barrier_true_ = 0;  // arrivals with a nonzero predicate
  BarrierOp barrier_op_ = device::kBarrierPlain;
  const char* barrier_file_ = nullptr;
  int barrier_line_ = 0;
  std::vector<unsigned> barrier_waiters_;
};

// The block runner active on this thread.
__thread BlockRunner* running __attribute__((tls_model("initial-exec"))) = nullptr;

Fiber* BlockRunner::PoolFiber(size_t i) {
  while (pool_.size() <= i) pool_.push_back(Fiber::Create(pool_.size()));
  return pool_[i].get();
}

bool BlockRunner::Run(const char* kernel, const std::function<void()>* body) {
  kernel_ = kernel;
  body_ = body;
  dim_ = ::blockDim;
  threads_ = dim_.x * dim_.y * dim_.z;
  current_ = 0;
  fiber_mode_ = false;
  faulted_ = false;
  ::threadIdx = uint3{0, 0, 0};
  Fiber* runner = PoolFiber(0);
  runner->Start(&BlockRunner::PlainEntry, this);
  BlockRunner* const outer = running;
  running = this;
  thread_fiber_->SwitchTo(runner);
  // Back when the block has finished, faulted, or (fiber mode) no thread can run.
  if (!faulted_ && fiber_mode_ && live_ > 0) ReportDeadlock();
  if (faulted_) AbandonAll();
  running = outer;
  return !faulted_;
}

Fiber* BlockRunner::PlainEntry(void* self) {
  BlockRunner* const block = static_cast<BlockRunner*>(self);
  const dim3 dim = block->dim_;
  uint3 index{0, 0, 0};
  for (unsigned thread = 0;;) {
    (*block->body_)();
    // The thread called a synchronising primitive: the block runs as fibers now, and this
    // fiber was that thread's.
    if (block->fiber_mode_) return block->ExitThread();
    if (++thread == block->threads_) break;
    if (++index.x == dim.x) {
      index.x = 0;
      if (++index.y == dim.y) {
        index.y = 0;
        ++index.z;
      }
    }
    block->current_ = thread;
    ::threadIdx = index;
  }
  return block->thread_fiber_.get();
}

Fiber* BlockRunner::ThreadEntry(void* self) {
  BlockRunner* const block = static_cast<BlockRunner*>(self);
  (*block->body_)();
  return block->ExitThread();
}

void BlockRunner::ToFibers() {
  fiber_mode_ = true;
  first_ = current_;
  const size_t n = threads_;
  if (fibers_.size() < n) {
    fibers_.resize(n);
    index_.resize(n);
    exited_.resize(n);
    waiting_.resize(n);
    calls_.resize(n);
    warps_.resize((n + kWarpLanes - 1) / kWarpLanes);
    barrier_result_.resize(n);
    ready_.resize(n);
  }
  for (unsigned t = 0; t < n; ++t) {
    index_[t] = uint3{t % dim_.x, (t / dim_.x) % dim_.y, t / (dim_.x * dim_.y)};
    exited_[t] = t < first_;
    waiting_[t] = Waiting::kNo;
    fibers_[t] = nullptr;
  }
  for (unsigned w = 0; w * kWarpLanes < n; ++w) {
    warps_[w].pending = 0;
    const unsigned base = w * kWarpLanes;
    warps_[w].exited = first_ >= base + kWarpLanes ? ~0u
                       : first_ <= base            ? 0u
                                                   : (1u << (first_ - base)) - 1;
  }
  ready_head_ = 0;
  ready_count_ = 0;
  fibers_[first_] = pool_[0].get();
  for (unsigned t = first_ + 1; t < n; ++t) {
    Fiber* fiber = PoolFiber(t - first_);
    fiber->Start(&BlockRunner::ThreadEntry, this);
    fibers_[t] = fiber;
    Push(t);
  }
  live_ = threads_ - first_;
  barrier_arrived_ = 0;
  barrier_true_ = 0;
  barrier_file_ = nullptr;
  barrier_waiters_.clear();
}

void BlockRunner::Push(unsigned thread) {
  size_t slot = ready_head_ + ready_count_;
  if (slot >= threads_) slot -= threads_;
  ready_[slot] = thread;
  ++ready_count_;
}

Fiber* BlockRunner::Next() {
  if (ready_count_ == 0) return thread_fiber_.get();
  const unsigned thread = ready_[ready_head_];
  if (++ready_head_ == threads_) ready_head_ = 0;
  --ready_count_;
  current_ = thread;
  ::threadIdx = index_[thread];
  return fibers_[thread];
}

void BlockRunner::Wait() {
  Fiber* const self = fibers_[current_];
  self->SwitchTo(Next());
  // Resumed by the thread that released this one (which set current_ and the coordinates).
}

Fiber* BlockRunner::ExitThread() {
  const unsigned thread = current_;
  exited_[thread] = 1;
  --live_;
  // A lane that waits for this one in a warp collective would wait forever.
  const unsigned lane = thread % kWarpLanes;
  const unsigned base = thread - lane;
  WarpState& warp = warps_[thread / kWarpLanes];
  warp.exited |= 1u << lane;
  for (unsigned rest = warp.pending; rest != 0; rest &= rest - 1) {
    const unsigned l = static_cast<unsigned>(__builtin_ctz(rest));
    const LaneCall& call = calls_[base + l];
    if (((call.mask >> lane) & 1u) != 0) {
      Report(base + l, WarpOpName(call.op),
             "lane %u of its mask 0x%08x exited without calling it (divergent warp)", lane,
             call.mask);
      faulted_ = true;
      return thread_fiber_.get();
    }
  }
  if (barrier_arrived_ > 0 && barrier_arrived_ == live_) ReleaseBarrier();
  return Next();
}

int BlockRunner::SyncThreads(BarrierOp op, int predicate, const char* file, int line) {
  if (!fiber_mode_) ToFibers();
  const unsigned thread = current_;
  if (barrier_arrived_ == 0) {
    barrier_op_ = op;
    barrier_file_ = file;
    barrier_line_ = line;
    barrier_true_ = 0;
  } else if (op != barrier_op_ || line != barrier_line_ ||
             (file != barrier_file_ && std::strcmp(file, barrier_file_) != 0)) {
    Report(thread, BarrierOpName(op),
           "divergent barrier: this thread calls it at %s:%d while %u threads wait in %s at "
           "%s:%d",
           file, line, barrier_arrived_, BarrierOpName(barrier_op_), barrier_file_,
           barrier_line_);
    Stop();
  }
  ++barrier_arrived_;
  if (predicate != 0) ++barrier_true_;
  if (barrier_arrived_ == live_) return ReleaseBarrier();
  waiting_[thread] = Waiting::kBarrier;
  barrier_waiters_.push_back(thread);
  Wait();
  return barrier_result_[thread];
}

int BlockRunner::ReleaseBarrier() {
  int result = 0;
  switch (barrier_op_) {
    case device::kBarrierPlain:
      break;
    case device::kBarrierCount:
      result = barrier_true_;
      break;
    case device::kBarrierAnd:
      result = static_cast<unsigned>(barrier_true_) == barrier_arrived_ ? 1 : 0;
      break;
    case device::kBarrierOr:
      result = barrier_true_ > 0 ? 1 : 0;
      break;
  }
  for (const unsigned waiter : barrier_waiters_) {
    barrier_result_[waiter] = result;
    waiting_[waiter] = Waiting::kNo;
    Push(waiter);
  }
  barrier_waiters_.clear();
  barrier_arrived_ = 0;
  barrier_true_ = 0;
  return result;
}

uint64_t BlockRunner::Warp(WarpOp op, unsigned mask, uint64_t bits, int bytes, int arg,
                           int width) {
  if (!fiber_mode_) ToFibers();
  const unsigned thread = current_;
  const unsigned lane = thread % kWarpLanes;
  const unsigned base = thread - lane;
  const char* const what = WarpOpName(op);
  if (((mask >> lane) & 1u) == 0) {
    Report(thread, what, "its mask 0x%08x leaves out the calling lane %u", mask, lane);
    Stop();
  }
  if (width < 1 || width > static_cast<int>(kWarpLanes) || (width & (width - 1)) != 0) {
    Report(thread, what, "width %d is not a power of two from 1 to 32", width);
    Stop();
  }
  const unsigned self = 1u << lane;
  WarpState& warp = warps_[thread / kWarpLanes];
  const unsigned exists = threads_ - base >= kWarpLanes ? ~0u : (1u << (threads_ - base)) - 1;
  if ((mask & ~exists) != 0) {
    Report(thread, what, "lane %d of its mask 0x%08x does not exist (the block has %u threads)",
           __builtin_ctz(mask & ~exists), mask, threads_);
    Stop();
  }
  if ((mask & warp.exited) != 0) {
    Report(thread, what, "lane %d of its mask 0x%08x has exited (divergent warp)",
           __builtin_ctz(mask & warp.exited), mask);
    Stop();
  }
  LaneCall& mine = calls_[thread];
  mine.op = op;
  mine.mask = mask;
  mine.bytes = bytes;
  mine.arg = arg;
  mine.width = width;
  mine.value = bits;
  if (((warp.pending | self) & mask) == mask && GroupReady(base, mask)) {
    CompleteWarp(base, mask);
    return mine.result;
  }
  warp.pending |= self;
  waiting_[thread] = Waiting::kWarp;
  Wait();
  return calls_[thread].result;
}

bool BlockRunner::GroupReady(unsigned base, unsigned mask) {
  const unsigned thread = current_;
  const unsigned lane = thread - base;
  const LaneCall& mine = calls_[thread];
  bool ready = true;
  for (unsigned rest = mask & ~(1u << lane); rest != 0; rest &= rest - 1) {
    const unsigned l = static_cast<unsigned>(__builtin_ctz(rest));
    const LaneCall& call = calls_[base + l];
    if (call.op == mine.op && call.mask == mask && call.width == mine.width &&
        call.bytes == mine.bytes) {
      continue;
    }
    // A lane waiting in another collective: one that does not involve this lane may still
    // complete (and the lane come here); one that does never can (each waits for the other).
    if (((call.mask >> lane) & 1u) != 0) {
      const char* what = WarpOpName(mine.op);
      Report(thread, what,
             "divergent warp: lane %u waits in %s with mask 0x%08x, this lane calls %s with "
             "mask 0x%08x",
             l, WarpOpName(call.op), call.mask, what, mask);
      Stop();
    }
    ready = false;
  }
  return ready;
}

void BlockRunner::CompleteWarp(unsigned base, unsigned mask) {
  const LaneCall& caller = calls_[current_];
  const WarpOp op = caller.op;
  const unsigned width = static_cast<unsigned>(caller.width);
  unsigned ballot = 0;
  if (op == device::kBallot || op == device::kAny || op == device::kAll) {
    for (unsigned rest = mask; rest != 0; rest &= rest - 1) {
      const unsigned l = static_cast<unsigned>(__builtin_ctz(rest));
      if (calls_[base + l].value != 0) ballot |= 1u << l;
    }
  }
  for (unsigned rest = mask; rest != 0; rest &= rest - 1) {
    const unsigned l = static_cast<unsigned>(__builtin_ctz(rest));
    LaneCall& call = calls_[base + l];
    const unsigned segment_lane = l & (width - 1);  // the lane's index in its segment
    const unsigned arg = static_cast<unsigned>(call.arg);
    unsigned source = l;
    switch (op) {
      case device::kShflIdx:
        source = (l - segment_lane) | (arg & (width - 1));
        break;
      case device::kShflUp:
        source = arg <= segment_lane ? l - arg : l;
        break;
      case device::kShflDown:
        source = arg <= width - 1 - segment_lane ? l + arg : l;
        break;
      case device::kShflXor:
        source = l ^ arg;
        if (source > (l | (width - 1))) source = l;  // a later segment: the caller's own value
        break;
      default:
        break;
    }
    switch (op) {
      case device::kSyncWarp:
        call.result = 0;
        break;
      case device::kBallot:
        call.result = ballot;
        break;
      case device::kAny:
        call.result = ballot != 0 ? 1 : 0;
        break;
      case device::kAll:
        call.result = ballot == mask ? 1 : 0;
        break;
      default:
        // A source lane outside the mask has no value to give: the caller keeps its own.
        call.result = (source < kWarpLanes && ((mask >> source) & 1u) != 0)
                          ? calls_[base + source].value
                          : call.value;
        break;
    }
  }
  warps_[current_ / kWarpLanes].pending &= ~mask;
  for (unsigned rest = mask; rest != 0; rest &= rest - 1) {
    const unsigned other = base + static_cast<unsigned>(__builtin_ctz(rest));
    if (other != current_) {
      waiting_[other] = Waiting::kNo;
      Push(other);
    }
  }
}

void BlockRunner::Report(unsigned thread, const char* what, const char* format, ...) {
  char detail[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(detail, sizeof(detail), format, args);
  va_end(args);
  const uint3 block = ::blockIdx;
  const uint3 index = fiber_mode_ ? index_[thread] : ::threadIdx;
  std::fprintf(stderr,
               "cudaemu: kernel %s faulted (cudaErrorLaunchFailure) in block (%u,%u,%u) thread "
               "(%u,%u,%u): %s: %s\n",
               kernel_, block.x, block.y, block.z, index.x, index.y, index.z, what, detail);
}

void BlockRunner::Stop() {
  faulted_ = true;
  Fiber* const self = fiber_mode_ ? fibers_[current_] : pool_[0].get();
  self->SwitchTo(thread_fiber_.get());
  // Never resumed: the block's fibers are abandoned.
  __builtin_trap();
}

void BlockRunner::ReportDeadlock() {
  unsigned at_barrier = 0, in_warp = 0, example = threads_;
  for (unsigned t = first_; t < threads_; ++t) {
    if (waiting_[t] == Waiting::kNo) continue;
    (waiting_[t] == Waiting::kBarrier ? at_barrier : in_warp) += 1;
    if (example == threads_) example = t;
  }
  if (example == threads_) example = first_;
  const char* what = waiting_[example] == Waiting::kWarp ? WarpOpName(calls_[example].op)
                                                         : BarrierOpName(barrier_op_);
  char barrier[320] = "";
  if (at_barrier > 0) {
    std::snprintf(barrier, sizeof(barrier), " (%s at %s:%d)", BarrierOpName(barrier_op_),
                  barrier_file_, barrier_line_);
  }
  Report(example, what,
         "deadlock (divergent barrier): every live thread waits and none can proceed: %u at "
         "the block barrier%s, %u in warp collectives",
         at_barrier, barrier, in_warp);
  faulted_ = true;
}

void BlockRunner::AbandonAll() {
  if (!fiber_mode_) {
    pool_[0]->Abandon();
    return;
  }
  for (unsigned t = first_; t < threads_; ++t) {
    if (exited_[t] == 0) fibers_[t]->Abandon();
  }
}

cudaError_t RunGrid(const char* kernel, dim3 grid, dim3 block,
                    const std::function<void()>& body) {
  thread_local std::unique_ptr<BlockRunner> runner;
  if (runner == nullptr) runner = std::make_unique<BlockRunner>();
  ::gridDim = grid;
  ::blockDim = block;
  cudaError_t result = cudaSuccess;
  for (unsigned z = 0; z < grid.z && result == cudaSuccess; ++z) {
    for (unsigned y = 0; y < grid.y && result == cudaSuccess; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        ::blockIdx = uint3{x, y, z};
        if (!runner->Run(kernel, &body)) {
          result = cudaErrorLaunchFailure;
          break;
        }
      }
    }
  }
  return result;
}

bool ValidConfiguration(dim3 grid, dim3 block, size_t shared_bytes) {
  if (block.x == 0 || block.y == 0 || block.z == 0) return false;
  if (block.x > 1024 || block.y > 1024 || block.z > 64) return false;
  if (uint64_t{block.x} * block.y * block.z > 1024) return false;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return false;
  if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) return false;
  return shared_bytes <= 48 * 1024;
}

std::atomic<int64_t> launches{0};
std::atomic<int64_t> fail_launch_at{0};  // FailLaunch's target (0: none)

// HoldLaunch's hold: one at a time, each a generation of its own, so that a new hold never
// catches the launch of an earlier one that was released but has not woken yet. The held
// launch's work waits (on its stream's worker) until its generation is released or its limit
// passes, so its stream holds everything queued behind it.
struct Hold {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;           // the current hold's
  int64_t at = 0;                    // its launch's number (0: none)
  std::chrono::milliseconds limit{0};
  uint64_t reached = 0;              // the latest generation whose stream waits at its launch
  uint64_t released = 0;             // generations up to this one are released
  bool timed_out = false;            // the current hold's launch ran because its limit passed
};
Hold& TheHold() {
  static Hold* const hold = new Hold();  // never destroyed (detached stream workers)
  return *hold;
}

void WaitAtHold(const std::string& kernel, uint64_t generation,
                std::chrono::milliseconds limit) {
  Hold& hold = TheHold();
  std::unique_lock<std::mutex> lock(hold.mu);
  hold.reached = generation;
  hold.cv.notify_all();
  if (!hold.cv.wait_for(lock, limit, [&] { return hold.released >= generation; })) {
    if (generation == hold.generation) hold.timed_out = true;
    std::fprintf(stderr,
                 "cudaemu: kernel %s was held (cudaemu::testing::HoldLaunch) and nobody "
                 "released it within %lld ms: it runs now\n",
                 kernel.c_str(), static_cast<long long>(limit.count()));
  }
  if (hold.reached == generation) hold.reached = 0;  // it runs now: held no more
}

int64_t EnvFailLaunch() {
  static const int64_t nth = EnvInt("CUDAEMU_FAIL_LAUNCH", 0);
  return nth;
}

}  // namespace

void LaunchGrid(const char* name, dim3 grid, dim3 block, size_t shared_bytes,
                cudaStream_t stream, std::vector<const void*> pointers,
                std::function<void()> body) {
  const int64_t number = launches.fetch_add(1) + 1;
  if (!ValidConfiguration(grid, block, shared_bytes)) {
    Record(cudaErrorInvalidConfiguration);
    return;
  }
  std::shared_ptr<Stream> target;
  cudaError_t error = ResolveStream(stream, &target);
  if (error == cudaSuccess) error = Sticky(target->device());
  if (error != cudaSuccess) {
    Record(error);
    return;
  }
  const int64_t env_nth = EnvFailLaunch();
  const bool inject = (env_nth > 0 && number == env_nth) || number == fail_launch_at.load();
  uint64_t held = 0;  // the hold's generation, if this launch is held
  std::chrono::milliseconds limit{0};
  {
    Hold& hold = TheHold();
    std::lock_guard<std::mutex> lock(hold.mu);
    if (number == hold.at) {
      held = hold.generation;
      limit = hold.limit;
    }
  }
  std::string kernel = name != nullptr ? name : "kernel";
  // Each device owns its memory: a kernel reaches another device's only through peer access
  // (a GPU's memory system faults otherwise; here every device shares one address space).
  std::string illegal;
  const int device = target->device();
  for (size_t i = 0; i < pointers.size() && illegal.empty(); ++i) {
    const int owner = pointers[i] == nullptr ? -1 : DeviceOf(pointers[i], 1);
    if (owner >= 0 && owner != device && !PeerAccessEnabled(device, owner)) {
      illegal = "its pointer argument " + std::to_string(i + 1) + " of " +
                std::to_string(pointers.size()) + " is memory of CUDA device " +
                std::to_string(owner) + ", which device " + std::to_string(device) +
                " has no peer access to (cudaDeviceEnablePeerAccess(" + std::to_string(owner) +
                ", 0) with device " + std::to_string(device) + " current)";
    }
  }
  target->Enqueue(kernel, [kernel, grid, block, body = std::move(body), inject, held, limit,
                           illegal]() {
    if (held != 0) WaitAtHold(kernel, held, limit);
    if (!illegal.empty()) {
      std::fprintf(stderr, "cudaemu: kernel %s faulted (cudaErrorIllegalAddress): %s\n",
                   kernel.c_str(), illegal.c_str());
      return cudaErrorIllegalAddress;
    }
    if (inject) {
      std::fprintf(stderr,
                   "cudaemu: kernel %s faulted (cudaErrorLaunchFailure): injected launch "
                   "failure (CUDAEMU_FAIL_LAUNCH / cudaemu::testing::FailLaunch)\n",
                   kernel.c_str());
      return cudaErrorLaunchFailure;
    }
    return RunGrid(kernel.c_str(), grid, block, body);
  });
}

}  // namespace cudaemu::internal

namespace cudaemu::device {

int SyncThreads(BarrierOp op, int predicate, const char* file, int line) {
  internal::BlockRunner* const block = internal::running;
  if (block == nullptr) {
    std::fprintf(stderr, "cudaemu: %s called outside a kernel\n", internal::BarrierOpName(op));
    return 0;
  }
  return block->SyncThreads(op, predicate, file, line);
}

uint64_t WarpCollective(WarpOp op, unsigned mask, uint64_t bits, int bytes, int arg,
                        int width) {
  internal::BlockRunner* const block = internal::running;
  if (block == nullptr) {
    std::fprintf(stderr, "cudaemu: %s called outside a kernel\n", internal::WarpOpName(op));
    return bits;
  }
  return block->Warp(op, mask, bits, bytes, arg, width);
}

}  // namespace cudaemu::device

namespace cudaemu::testing {

int64_t KernelLaunches() { return internal::launches.load(); }

void FailLaunch(int64_t nth) {
  internal::fail_launch_at.store(nth > 0 ? internal::launches.load() + nth : 0);
}

void HoldLaunch(int64_t nth, std::chrono::milliseconds limit) {
  internal::Hold& hold = internal::TheHold();
  std::lock_guard<std::mutex> lock(hold.mu);
  hold.released = hold.generation;  // an earlier hold not released yet is, now
  ++hold.generation;
  hold.at = nth > 0 ? internal::launches.load() + nth : 0;
  hold.limit = limit;
  hold.timed_out = false;
  hold.cv.notify_all();
}

bool LaunchIsHeld() {
  internal::Hold& hold = internal::TheHold();
  std::lock_guard<std::mutex> lock(hold.mu);
  return hold.reached == hold.generation && hold.released < hold.generation;
}

bool ReleaseHeldLaunch() {
  internal::Hold& hold = internal::TheHold();
  std::lock_guard<std::mutex> lock(hold.mu);
  hold.released = hold.generation;
  hold.at = 0;
  hold.cv.notify_all();
  return !hold.timed_out;
}

}  // namespace cudaemu::testing
