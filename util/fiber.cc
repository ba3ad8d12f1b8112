#include "util/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TOWER_FIBER_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define TOWER_FIBER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(TOWER_FIBER_ASAN)
#define TOWER_FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(TOWER_FIBER_TSAN)
#define TOWER_FIBER_TSAN 1
#endif

#ifdef TOWER_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef TOWER_FIBER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#if !defined(__x86_64__)
#error "Tower's fibers switch contexts with x86-64 code"
#endif

// tower_fiber_switch(save, sp): pushes the callee-saved registers and MXCSR on the
// running stack, stores the stack pointer in *save, loads `sp` and pops
// the same from there. A fiber that has not run yet has a frame laid out by Fiber::Start
// whose return address is tower_fiber_trampoline, which calls r13(r12).
extern "C" void tower_fiber_switch(void** save, void* sp);
extern "C" void tower_fiber_trampoline();

asm(R"(
  .pushsection .text
  .globl tower_fiber_switch
  .hidden tower_fiber_switch
  .type tower_fiber_switch, @function
  .p2align 4
tower_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tower_fiber_switch, .-tower_fiber_switch

  .globl tower_fiber_trampoline
  .hidden tower_fiber_trampoline
  .type tower_fiber_trampoline, @function
  .p2align 4
tower_fiber_trampoline:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size tower_fiber_trampoline, .-tower_fiber_trampoline
  .popsection
)");

namespace tower {
namespace {

// The context that switched to the running one (ASan reports its stack's bounds, which is
// how a thread's own stack gets known).
thread_local Fiber* switching_from = nullptr;
// The fiber with a stack of its own running on this thread; nullptr on the thread's stack.
thread_local Fiber* running_fiber = nullptr;
// The FiberLocal values of code on this thread's own stack.
thread_local FiberLocalValues thread_values;
std::atomic<int> next_slot{0};

size_t PageBytes() {
  static const size_t bytes = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

}  // namespace

size_t Fiber::StackBytes() {
#ifdef TOWER_FIBER_ASAN
  return size_t{512} << 10;
#else
  return size_t{256} << 10;
#endif
}

FiberLocalValues::~FiberLocalValues() {
  for (size_t i = 0; i < values_.size(); ++i) {
    if (values_[i] != nullptr) deleters_[i](values_[i]);
  }
}

int FiberLocalValues::NewSlot() { return next_slot.fetch_add(1, std::memory_order_relaxed); }

void*& FiberLocalValues::At(int slot) {
  if (static_cast<size_t>(slot) >= values_.size()) {
    // Sized for every slot made so far: grows only while new FiberLocals appear.
    const size_t size = std::max<size_t>(slot + 1, next_slot.load(std::memory_order_relaxed));
    values_.resize(size, nullptr);
    deleters_.resize(size, nullptr);
  }
  return values_[slot];
}

FiberLocalValues& FiberLocalValues::RunningValues() {
  Fiber* fiber = running_fiber;
  return fiber != nullptr ? fiber->locals_ : thread_values;
}

void*& FiberLocalValues::Running(int slot) { return RunningValues().At(slot); }

void FiberLocalValues::SetRunningDeleter(int slot, void (*deleter)(void*)) {
  RunningValues().SetDeleter(slot, deleter);
}

std::unique_ptr<Fiber> Fiber::Create(size_t color, size_t stack_bytes) {
  if (stack_bytes == 0) {
    stack_bytes = StackBytes();
  } else {
#ifdef TOWER_FIBER_ASAN
    stack_bytes *= 2;
#endif
  }
  std::unique_ptr<Fiber> fiber(new Fiber());
  // 17 cache lines apart (17 is prime to the 64 sets of a 4 KiB way), over 8 pages.
  fiber->top_offset_ = (color * 17 * 64) % (8 * 4096);
  const size_t guard = PageBytes();
  stack_bytes = (stack_bytes + guard - 1) / guard * guard;
  fiber->mapping_bytes_ = stack_bytes + guard;
  void* mapping = mmap(nullptr, fiber->mapping_bytes_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mapping == MAP_FAILED) {
    std::fprintf(stderr, "tower: cannot map a fiber stack of %zu bytes\n",
                 fiber->mapping_bytes_);
    std::abort();
  }
  mprotect(mapping, guard, PROT_NONE);  // an overflow faults instead of corrupting a neighbour
#ifdef TOWER_FIBER_ASAN
  // A stack mapped where an earlier fiber's stack was may inherit that stack's poisoned
  // redzones in ASan's shadow (frames that were live when it was unmapped): start clean.
  __asan_unpoison_memory_region(static_cast<char*>(mapping) + guard, stack_bytes);
#endif
  fiber->mapping_ = mapping;
  fiber->stack_bottom_ = static_cast<char*>(mapping) + guard;
  fiber->stack_bytes_ = stack_bytes;
#ifdef TOWER_FIBER_TSAN
  fiber->tsan_fiber_ = __tsan_create_fiber(0);
  fiber->owns_tsan_fiber_ = true;
#endif
  return fiber;
}

std::unique_ptr<Fiber> Fiber::ForThread() {
  std::unique_ptr<Fiber> fiber(new Fiber());
  fiber->launched_ = true;
#ifdef TOWER_FIBER_TSAN
  fiber->tsan_fiber_ = __tsan_get_current_fiber();
#endif
  return fiber;
}

Fiber::~Fiber() {
#ifdef TOWER_FIBER_TSAN
  if (owns_tsan_fiber_) __tsan_destroy_fiber(tsan_fiber_);
#endif
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
}

void Fiber::Start(Entry entry, void* arg) {
  entry_ = entry;
  arg_ = arg;
  if (launched_) return;  // suspended in Main's loop, which runs the new entry
  // A first frame for tower_fiber_switch to pop: MXCSR (the current thread's), r15, r14, r13 = Main, r12 = this, rbx, rbp = 0 (ends frame-pointer walks),
  // then the return address. After the ret the stack pointer is 16-byte aligned, as the
  // trampoline's call needs.
  char* top = static_cast<char*>(const_cast<void*>(stack_bottom_)) + stack_bytes_ - top_offset_;
  uint64_t* frame = reinterpret_cast<uint64_t*>(top - 80);
#ifdef TOWER_FIBER_ASAN
  __asan_unpoison_memory_region(frame, 80);  // written here, not by a compiled frame
#endif
  uint32_t mxcsr = 0;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  frame[0] = 0;
  std::memcpy(&frame[0], &mxcsr, sizeof(mxcsr));
  frame[1] = 0;
  frame[2] = 0;
  frame[3] = reinterpret_cast<uintptr_t>(&Fiber::Main);
  frame[4] = reinterpret_cast<uintptr_t>(this);
  frame[5] = 0;
  frame[6] = 0;
  frame[7] = reinterpret_cast<uintptr_t>(&tower_fiber_trampoline);
  sp_ = frame;
  asan_fake_stack_ = nullptr;
  launched_ = true;
}

void Fiber::Main(Fiber* self) {
  self->AfterSwitch();
  while (true) {
    Fiber* next = self->entry_(self->arg_);
    self->entry_ = nullptr;
    self->SwitchTo(next);  // resumed by the next Start + switch, with a new entry
  }
}

void Fiber::SwitchTo(Fiber* to) {
  switching_from = this;
#ifdef TOWER_FIBER_ASAN
  __sanitizer_start_switch_fiber(&asan_fake_stack_, to->stack_bottom_, to->stack_bytes_);
#endif
#ifdef TOWER_FIBER_TSAN
  __tsan_switch_to_fiber(to->tsan_fiber_, 0);  // 0: synchronises the two fibers
#endif
  tower_fiber_switch(&sp_, to->sp_);
  AfterSwitch();
}

void Fiber::AfterSwitch() {
  // A thread's own context keeps its FiberLocals with the thread (and may be destroyed
  // while the thread goes on).
  running_fiber = mapping_ != nullptr ? this : nullptr;
#ifdef TOWER_FIBER_ASAN
  const void* from_bottom = nullptr;
  size_t from_bytes = 0;
  __sanitizer_finish_switch_fiber(asan_fake_stack_, &from_bottom, &from_bytes);
  Fiber* from = switching_from;
  if (from != nullptr && from->mapping_ == nullptr) {  // a thread's own stack
    from->stack_bottom_ = from_bottom;
    from->stack_bytes_ = from_bytes;
  }
#endif
}

void Fiber::Abandon() {
  if (mapping_ == nullptr) return;
#ifdef TOWER_FIBER_ASAN
  // The abandoned frames' redzones stay poisoned; the next start reuses the stack.
  __asan_unpoison_memory_region(const_cast<void*>(stack_bottom_), stack_bytes_);
#endif
#ifdef TOWER_FIBER_TSAN
  // TSan's shadow call stack of the fiber still holds the abandoned frames.
  __tsan_destroy_fiber(tsan_fiber_);
  tsan_fiber_ = __tsan_create_fiber(0);
#endif
  launched_ = false;
  entry_ = nullptr;
  asan_fake_stack_ = nullptr;
  sp_ = nullptr;
}

}  // namespace tower
