// Fibers: contexts of execution with stacks of their own, switched by hand on one OS thread
// (the CUDA emulation runs the threads of a kernel's block as fibers on the stream's worker
// thread; MirroredStrategy runs more host replicas than cores as fibers on one thread per
// core, strategy/runtime/replica_scheduler.h). x86-64 only:
// the switch saves the callee-saved registers and MXCSR, nothing else (not the x87 control
// word, whose fnstcw/fldcw pair tripled the switch's cost: device code does not use the x87
// unit), so it costs a few nanoseconds (ucontext's swapcontext makes a system call).
//
// Under AddressSanitizer and ThreadSanitizer every switch is annotated
// (__sanitizer_start/finish_switch_fiber, __tsan_switch_to_fiber), so both follow the
// fibers' stacks; TSan sees each switch as a happens-before edge.
#ifndef TOWER_UTIL_FIBER_H_
#define TOWER_UTIL_FIBER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "util/cache_line.h"

namespace tower {

// Values of FiberLocals held by one fiber or one thread (see FiberLocal below).
class FiberLocalValues {
 public:
  FiberLocalValues() = default;
  FiberLocalValues(const FiberLocalValues&) = delete;
  FiberLocalValues& operator=(const FiberLocalValues&) = delete;
  ~FiberLocalValues();
  // The storage of `slot` in the running fiber's values, or the running thread's.
  static void*& Running(int slot);
  static int NewSlot();
  void SetDeleter(int slot, void (*deleter)(void*)) { deleters_[slot] = deleter; }
  static void SetRunningDeleter(int slot, void (*deleter)(void*));

 private:
  static FiberLocalValues& RunningValues();
  void*& At(int slot);
  std::vector<void*> values_;
  std::vector<void (*)(void*)> deleters_;
};

class Fiber {
 public:
  // The default stack size: 256 KiB (512 KiB under ASan, whose frames are larger).
  static size_t StackBytes();

  // A fiber with a stack of its own (mmap'ed, with a guard page below), not yet started.
  // Fibers of different `color`s start their stacks at different offsets from the top, so
  // that their hot frames do not all fall into the same cache sets (the stacks are equally
  // aligned mappings).
  // `stack_bytes` 0: StackBytes(); under ASan any size given is doubled.
  static std::unique_ptr<Fiber> Create(size_t color = 0, size_t stack_bytes = 0);
  // The calling OS thread's own context, to switch from and back to.
  static std::unique_ptr<Fiber> ForThread();

  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
  ~Fiber();

  // What a fiber runs: entry(arg) returns the context to switch to once it is done.
  using Entry = Fiber* (*)(void* arg);

  // Makes the next switch to this fiber run entry(arg). Not for a fiber that is running or
  // suspended inside an entry (Abandon that first); a fiber whose entry has returned can be
  // started again (its stack is reused as it is: nothing is mapped or unwound).
  void Start(Entry entry, void* arg);
  // Suspends the running context, which must be `this`, and resumes `to`; returns when
  // something switches back to `this`.
  void SwitchTo(Fiber* to);
  // Forgets a suspended fiber that will never be resumed (its kernel thread faulted or waits
  // forever), so that it can be started again.
  void Abandon();

 private:
  Fiber() = default;

  void* sp_ = nullptr;  // the saved stack pointer while suspended
  void* mapping_ = nullptr;  // the stack's mapping, guard page included (none for a thread)
  size_t mapping_bytes_ = 0;
  // The usable stack (for ASan; a thread's own stack is learned at the first switch from it).
  const void* stack_bottom_ = nullptr;
  size_t stack_bytes_ = 0;
  size_t top_offset_ = 0;  // unused bytes above the first frame (the color)
  void* asan_fake_stack_ = nullptr;
  [[maybe_unused]] void* tsan_fiber_ = nullptr;
  [[maybe_unused]] bool owns_tsan_fiber_ = false;
  bool launched_ = false;  // its stack holds Main's frame
  FiberLocalValues locals_;  // used only by fibers with a stack of their own
  Entry entry_ = nullptr;
  void* arg_ = nullptr;

  static void Main(Fiber* fiber);
  void AfterSwitch();
  friend class FiberLocalValues;
};

// Storage per fiber: code running on a fiber made by Fiber::Create sees its own T; code on a
// thread's own stack sees the thread's. For thread-local state that must follow its fiber
// when several fibers share a thread (each replica's device scopes, say). A T is made
// (value-initialised) at its first use in each fiber or thread and lives as long as that
// fiber or thread. Declare one as a static: `static FiberLocal<Stack> stack; stack.Get()`.
// Each T is alone on its cache lines: the values of different threads (replicas running in
// step on different cores, writing theirs all the time) never share a line, wherever the
// heap put them.
template <typename T>
class FiberLocal {
 public:
  FiberLocal() : slot_(FiberLocalValues::NewSlot()) {}
  FiberLocal(const FiberLocal&) = delete;
  FiberLocal& operator=(const FiberLocal&) = delete;

  T& Get() const {
    void*& value = FiberLocalValues::Running(slot_);
    if (value == nullptr) {
      value = new CacheLinePadded<T>();
      FiberLocalValues::SetRunningDeleter(
          slot_, [](void* v) { delete static_cast<CacheLinePadded<T>*>(v); });
    }
    return static_cast<CacheLinePadded<T>*>(value)->value;
  }

 private:
  const int slot_;
};

}  // namespace tower

#endif  // TOWER_UTIL_FIBER_H_
