// Fibers: contexts of execution with stacks of their own, switched by hand on one OS thread
// (the threads of a kernel's block run as fibers on the stream's worker thread). x86-64 only:
// the switch saves the callee-saved registers and MXCSR, nothing else (not the x87 control
// word, whose fnstcw/fldcw pair tripled the switch's cost: device code does not use the x87
// unit), so it costs a few nanoseconds (ucontext's swapcontext makes a system call).
//
// Under AddressSanitizer and ThreadSanitizer every switch is annotated
// (__sanitizer_start/finish_switch_fiber, __tsan_switch_to_fiber), so both follow the
// fibers' stacks; TSan sees each switch as a happens-before edge.
#ifndef CUDAEMU_RUNTIME_FIBER_H_
#define CUDAEMU_RUNTIME_FIBER_H_

#include <cstddef>
#include <memory>

namespace cudaemu::internal {

class Fiber {
 public:
  // The stack size of every fiber: 256 KiB (512 KiB under ASan, whose frames are larger).
  static size_t StackBytes();

  // A fiber with a stack of its own (mmap'ed, with a guard page below), not yet started.
  // Fibers of different `color`s start their stacks at different offsets from the top, so
  // that their hot frames do not all fall into the same cache sets (the stacks are equally
  // aligned mappings).
  static std::unique_ptr<Fiber> Create(size_t color = 0);
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
  Entry entry_ = nullptr;
  void* arg_ = nullptr;

  static void Main(Fiber* fiber);
  void AfterSwitch();
};

}  // namespace cudaemu::internal

#endif  // CUDAEMU_RUNTIME_FIBER_H_
