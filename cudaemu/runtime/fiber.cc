#include "cudaemu/runtime/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDAEMU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define CUDAEMU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(CUDAEMU_ASAN)
#define CUDAEMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(CUDAEMU_TSAN)
#define CUDAEMU_TSAN 1
#endif

#ifdef CUDAEMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef CUDAEMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#if !defined(__x86_64__)
#error "cudaemu's fibers switch contexts with x86-64 code"
#endif

// cudaemu_fiber_switch(save, sp): pushes the callee-saved registers and MXCSR on the
// running stack, stores the stack pointer in *save, loads `sp` and pops
// the same from there. A fiber that has not run yet has a frame laid out by Fiber::Start
// whose return address is cudaemu_fiber_trampoline, which calls r13(r12).
extern "C" void cudaemu_fiber_switch(void** save, void* sp);
extern "C" void cudaemu_fiber_trampoline();

asm(R"(
  .pushsection .text
  .globl cudaemu_fiber_switch
  .hidden cudaemu_fiber_switch
  .type cudaemu_fiber_switch, @function
  .p2align 4
cudaemu_fiber_switch:
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
  .size cudaemu_fiber_switch, .-cudaemu_fiber_switch

  .globl cudaemu_fiber_trampoline
  .hidden cudaemu_fiber_trampoline
  .type cudaemu_fiber_trampoline, @function
  .p2align 4
cudaemu_fiber_trampoline:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size cudaemu_fiber_trampoline, .-cudaemu_fiber_trampoline
  .popsection
)");

namespace cudaemu::internal {
namespace {

// The context that switched to the running one (ASan reports its stack's bounds, which is
// how a thread's own stack gets known).
thread_local Fiber* switching_from = nullptr;

size_t PageBytes() {
  static const size_t bytes = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

}  // namespace

size_t Fiber::StackBytes() {
#ifdef CUDAEMU_ASAN
  return size_t{512} << 10;
#else
  return size_t{256} << 10;
#endif
}

std::unique_ptr<Fiber> Fiber::Create(size_t color) {
  std::unique_ptr<Fiber> fiber(new Fiber());
  // 17 cache lines apart (17 is prime to the 64 sets of a 4 KiB way), over 8 pages.
  fiber->top_offset_ = (color * 17 * 64) % (8 * 4096);
  const size_t guard = PageBytes();
  fiber->mapping_bytes_ = StackBytes() + guard;
  void* mapping = mmap(nullptr, fiber->mapping_bytes_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mapping == MAP_FAILED) {
    std::fprintf(stderr, "cudaemu: cannot map a fiber stack of %zu bytes\n",
                 fiber->mapping_bytes_);
    std::abort();
  }
  mprotect(mapping, guard, PROT_NONE);  // an overflow faults instead of corrupting a neighbour
  fiber->mapping_ = mapping;
  fiber->stack_bottom_ = static_cast<char*>(mapping) + guard;
  fiber->stack_bytes_ = StackBytes();
#ifdef CUDAEMU_TSAN
  fiber->tsan_fiber_ = __tsan_create_fiber(0);
  fiber->owns_tsan_fiber_ = true;
#endif
  return fiber;
}

std::unique_ptr<Fiber> Fiber::ForThread() {
  std::unique_ptr<Fiber> fiber(new Fiber());
  fiber->launched_ = true;
#ifdef CUDAEMU_TSAN
  fiber->tsan_fiber_ = __tsan_get_current_fiber();
#endif
  return fiber;
}

Fiber::~Fiber() {
#ifdef CUDAEMU_TSAN
  if (owns_tsan_fiber_) __tsan_destroy_fiber(tsan_fiber_);
#endif
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
}

void Fiber::Start(Entry entry, void* arg) {
  entry_ = entry;
  arg_ = arg;
  if (launched_) return;  // suspended in Main's loop, which runs the new entry
  // A first frame for cudaemu_fiber_switch to pop: MXCSR (the current thread's), r15, r14, r13 = Main, r12 = this, rbx, rbp = 0 (ends frame-pointer walks),
  // then the return address. After the ret the stack pointer is 16-byte aligned, as the
  // trampoline's call needs.
  char* top = static_cast<char*>(const_cast<void*>(stack_bottom_)) + stack_bytes_ - top_offset_;
  uint64_t* frame = reinterpret_cast<uint64_t*>(top - 80);
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
  frame[7] = reinterpret_cast<uintptr_t>(&cudaemu_fiber_trampoline);
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
#ifdef CUDAEMU_ASAN
  __sanitizer_start_switch_fiber(&asan_fake_stack_, to->stack_bottom_, to->stack_bytes_);
#endif
#ifdef CUDAEMU_TSAN
  __tsan_switch_to_fiber(to->tsan_fiber_, 0);  // 0: synchronises the two fibers
#endif
  cudaemu_fiber_switch(&sp_, to->sp_);
  AfterSwitch();
}

void Fiber::AfterSwitch() {
#ifdef CUDAEMU_ASAN
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
#ifdef CUDAEMU_ASAN
  // The abandoned frames' redzones stay poisoned; the next start reuses the stack.
  __asan_unpoison_memory_region(const_cast<void*>(stack_bottom_), stack_bytes_);
#endif
#ifdef CUDAEMU_TSAN
  // TSan's shadow call stack of the fiber still holds the abandoned frames.
  __tsan_destroy_fiber(tsan_fiber_);
  tsan_fiber_ = __tsan_create_fiber(0);
#endif
  launched_ = false;
  entry_ = nullptr;
  asan_fake_stack_ = nullptr;
  sp_ = nullptr;
}

}  // namespace cudaemu::internal
