// Device code on the host: CUDA's execution-space keywords, built-in variables and device
// functions, for kernels compiled by the host compiler and run by cudaemu::LaunchKernel
// (cudaemu/kernel_launch.h).
//
// How a kernel runs: the blocks of a grid one after another on the stream's worker thread;
// the threads of a block as a plain loop while none synchronises, and as fibers on that
// same OS thread from the first thread that calls __syncthreads or a warp primitive
// (cudaemu/runtime/kernel_launch.cc). Hence:
//   - threadIdx, blockIdx, blockDim, gridDim read the running kernel thread's values;
//   - __shared__ is `static thread_local`: one instance per worker thread, which is one per
//     running block; dynamic shared memory (extern __shared__) is not supported;
//   - __syncthreads waits for every thread of the block that has not exited, and faults
//     (cudaErrorLaunchFailure, one line on stderr) when threads wait at different
//     __syncthreads calls (a divergent barrier) or can never all arrive (a deadlock);
//   - a warp primitive waits for every lane of its mask, which must all call the same
//     primitive with the same mask; a lane of the mask that has exited, or a deadlock, is a
//     fault;
//   - atomics are real atomic instructions (kernels on different streams run concurrently).
#ifndef CUDAEMU_DEVICE_FUNCTIONS_H_
#define CUDAEMU_DEVICE_FUNCTIONS_H_

#include <cuda_runtime_api.h>
#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstring>
// libstdc++'s <memory> spells __attribute__((__noinline__)), which the __noinline__ macro
// below would break (as with CUDA's own host_defines.h): include it first.
#include <memory>

// ---- execution spaces and qualifiers ---------------------------------------------------------
#define __global__
#define __device__
#ifndef __host__
#define __host__
#endif
#define __constant__
#define __managed__
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
// __restrict__ is a keyword of clang and GCC already.
#define __launch_bounds__(...)
// One array per worker thread, i.e. per running block (see above).
#define __shared__ static thread_local

// ---- built-in variables ----------------------------------------------------------------------
struct uint3 {
  unsigned int x, y, z;
};

inline constexpr int warpSize = 32;

// The running kernel thread's coordinates, set by the launch before the thread runs (and
// at every switch between the threads of a block). Plain variables, as CUDA declares them,
// not macros, so that host code may still use the names; not const, because a compiler may
// assume that a const object never changes. initial-exec TLS: read without a call to
// __tls_get_addr (the runtime is linked, not dlopen'ed).
#define CUDAEMU_COORDINATE extern __thread __attribute__((tls_model("initial-exec")))
CUDAEMU_COORDINATE uint3 threadIdx;
CUDAEMU_COORDINATE uint3 blockIdx;
CUDAEMU_COORDINATE dim3 blockDim;
CUDAEMU_COORDINATE dim3 gridDim;
#undef CUDAEMU_COORDINATE

// ---- synchronisation (cudaemu/runtime/kernel_launch.cc) ---------------------------------------
namespace cudaemu::device {

enum WarpOp : int {
  kShflIdx = 0,
  kShflUp = 1,
  kShflDown = 2,
  kShflXor = 3,
  kSyncWarp = 4,
  kBallot = 5,
  kAny = 6,
  kAll = 7,
};
enum BarrierOp : int { kBarrierPlain = 0, kBarrierCount = 1, kBarrierAnd = 2, kBarrierOr = 3 };

// The block barrier called at file:line; returns the count / and / or of `predicate` over
// the block's threads for the reducing forms.
int SyncThreads(BarrierOp op, int predicate, const char* file, int line);
// A warp collective of the lanes of `mask`: `bits` is the caller's value (its bytes, of
// `bytes` bytes), `arg` the source lane, delta or lane mask, `width` the shuffle's segment.
uint64_t WarpCollective(WarpOp op, unsigned mask, uint64_t bits, int bytes, int arg, int width);

template <typename T>
inline T Shuffle(WarpOp op, unsigned mask, T value, int arg, int width) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "shuffles move at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = WarpCollective(op, mask, bits, static_cast<int>(sizeof(T)), arg, width);
  T result;
  std::memcpy(&result, &bits, sizeof(T));
  return result;
}

}  // namespace cudaemu::device

inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::cudaemu::device::SyncThreads(::cudaemu::device::kBarrierPlain, 0, file, line);
}
inline int __syncthreads_count(int predicate, const char* file = __builtin_FILE(),
                               int line = __builtin_LINE()) {
  return ::cudaemu::device::SyncThreads(::cudaemu::device::kBarrierCount, predicate, file, line);
}
inline int __syncthreads_and(int predicate, const char* file = __builtin_FILE(),
                             int line = __builtin_LINE()) {
  return ::cudaemu::device::SyncThreads(::cudaemu::device::kBarrierAnd, predicate, file, line);
}
inline int __syncthreads_or(int predicate, const char* file = __builtin_FILE(),
                            int line = __builtin_LINE()) {
  return ::cudaemu::device::SyncThreads(::cudaemu::device::kBarrierOr, predicate, file, line);
}

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::cudaemu::device::WarpCollective(::cudaemu::device::kSyncWarp, mask, 0, 0, 0, warpSize);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return static_cast<unsigned>(::cudaemu::device::WarpCollective(
      ::cudaemu::device::kBallot, mask, predicate != 0 ? 1 : 0, 4, 0, warpSize));
}
inline int __any_sync(unsigned mask, int predicate) {
  return static_cast<int>(::cudaemu::device::WarpCollective(
      ::cudaemu::device::kAny, mask, predicate != 0 ? 1 : 0, 4, 0, warpSize));
}
inline int __all_sync(unsigned mask, int predicate) {
  return static_cast<int>(::cudaemu::device::WarpCollective(
      ::cudaemu::device::kAll, mask, predicate != 0 ? 1 : 0, 4, 0, warpSize));
}

// __shfl*_sync for the types CUDA overloads them for. Per the CUDA Programming Guide: a
// width below warpSize (a power of two) splits the warp into segments of `width` lanes; the
// source lane of __shfl_sync is taken modulo width within the caller's segment; __shfl_up /
// __shfl_down return the caller's own value when the source lane falls outside its segment;
// __shfl_xor_sync reads lane ^ laneMask, and the caller's own value when that lane lies in a
// later segment.
#define CUDAEMU_SHUFFLES(T)                                                                   \
  inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize) {             \
    return ::cudaemu::device::Shuffle<T>(::cudaemu::device::kShflIdx, mask, var, srcLane,      \
                                         width);                                               \
  }                                                                                            \
  inline T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize) {   \
    return ::cudaemu::device::Shuffle<T>(::cudaemu::device::kShflUp, mask, var,                \
                                         static_cast<int>(delta), width);                      \
  }                                                                                            \
  inline T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize) { \
    return ::cudaemu::device::Shuffle<T>(::cudaemu::device::kShflDown, mask, var,              \
                                         static_cast<int>(delta), width);                      \
  }                                                                                            \
  inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize) {        \
    return ::cudaemu::device::Shuffle<T>(::cudaemu::device::kShflXor, mask, var, laneMask,     \
                                         width);                                               \
  }
CUDAEMU_SHUFFLES(int)
CUDAEMU_SHUFFLES(unsigned int)
CUDAEMU_SHUFFLES(long)
CUDAEMU_SHUFFLES(unsigned long)
CUDAEMU_SHUFFLES(long long)
CUDAEMU_SHUFFLES(unsigned long long)
CUDAEMU_SHUFFLES(float)
CUDAEMU_SHUFFLES(double)
#undef CUDAEMU_SHUFFLES

// ---- memory fences, read-only loads -----------------------------------------------------------
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <typename T>
inline T __ldg(const T* address) {
  return *address;
}

// ---- atomics ---------------------------------------------------------------------------------
// Sequentially consistent read-modify-writes (CUDA's are relaxed; on x86-64 the cost is the
// same), each returning the old value.
namespace cudaemu::device {

template <typename T>
inline T AtomicMin(T* address, T value) {
  T old = __atomic_load_n(address, __ATOMIC_RELAXED);
  while (value < old && !__atomic_compare_exchange_n(address, &old, value, /*weak=*/true,
                                                      __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
  return old;
}
template <typename T>
inline T AtomicMax(T* address, T value) {
  T old = __atomic_load_n(address, __ATOMIC_RELAXED);
  while (value > old && !__atomic_compare_exchange_n(address, &old, value, /*weak=*/true,
                                                      __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
  return old;
}
// Floating-point addition by compare-and-swap of the bits.
template <typename T>
inline T AtomicAddFloat(T* address, T value) {
  T old;
  __atomic_load(address, &old, __ATOMIC_RELAXED);
  T sum = old + value;
  while (!__atomic_compare_exchange(address, &old, &sum, /*weak=*/true, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED)) {
    sum = old + value;
  }
  return old;
}
template <typename T>
inline T AtomicCas(T* address, T compare, T value) {
  __atomic_compare_exchange_n(address, &compare, value, /*weak=*/false, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
  return compare;  // the old value, whether or not it was replaced
}

}  // namespace cudaemu::device

#define CUDAEMU_INTEGER_ATOMICS(T)                                                      \
  inline T atomicAdd(T* address, T val) {                                               \
    return __atomic_fetch_add(address, val, __ATOMIC_SEQ_CST);                          \
  }                                                                                     \
  inline T atomicSub(T* address, T val) {                                               \
    return __atomic_fetch_sub(address, val, __ATOMIC_SEQ_CST);                          \
  }                                                                                     \
  inline T atomicExch(T* address, T val) {                                              \
    return __atomic_exchange_n(address, val, __ATOMIC_SEQ_CST);                         \
  }                                                                                     \
  inline T atomicMin(T* address, T val) { return ::cudaemu::device::AtomicMin(address, val); } \
  inline T atomicMax(T* address, T val) { return ::cudaemu::device::AtomicMax(address, val); } \
  inline T atomicCAS(T* address, T compare, T val) {                                    \
    return ::cudaemu::device::AtomicCas(address, compare, val);                         \
  }                                                                                     \
  inline T atomicAnd(T* address, T val) {                                               \
    return __atomic_fetch_and(address, val, __ATOMIC_SEQ_CST);                          \
  }                                                                                     \
  inline T atomicOr(T* address, T val) {                                                \
    return __atomic_fetch_or(address, val, __ATOMIC_SEQ_CST);                           \
  }                                                                                     \
  inline T atomicXor(T* address, T val) {                                               \
    return __atomic_fetch_xor(address, val, __ATOMIC_SEQ_CST);                          \
  }
CUDAEMU_INTEGER_ATOMICS(int)
CUDAEMU_INTEGER_ATOMICS(unsigned int)
CUDAEMU_INTEGER_ATOMICS(long long)
CUDAEMU_INTEGER_ATOMICS(unsigned long long)
#undef CUDAEMU_INTEGER_ATOMICS

inline float atomicAdd(float* address, float val) {
  return ::cudaemu::device::AtomicAddFloat(address, val);
}
inline double atomicAdd(double* address, double val) {
  return ::cudaemu::device::AtomicAddFloat(address, val);
}
inline float atomicExch(float* address, float val) {
  float old;
  __atomic_exchange(address, &val, &old, __ATOMIC_SEQ_CST);
  return old;
}
// atomicInc / atomicDec: ((old >= val) ? 0 : old + 1) and
// ((old == 0 || old > val) ? val : old − 1), as CUDA defines them.
inline unsigned int atomicInc(unsigned int* address, unsigned int val) {
  unsigned int old = __atomic_load_n(address, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(address, &old, old >= val ? 0u : old + 1, true,
                                      __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
  return old;
}
inline unsigned int atomicDec(unsigned int* address, unsigned int val) {
  unsigned int old = __atomic_load_n(address, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(address, &old, (old == 0 || old > val) ? val : old - 1,
                                      true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
  return old;
}

// ---- arithmetic intrinsics -------------------------------------------------------------------
// The _rn forms round once to nearest even; the contract(off) keeps the host compiler from
// fusing them with a neighbouring operation into an FMA, which is the point of writing them.
#define CUDAEMU_ROUNDED(T, name, expr)                \
  inline T name(T x, T y) {                           \
    _Pragma("clang fp contract(off)") return (expr);  \
  }
CUDAEMU_ROUNDED(float, __fmul_rn, x * y)
CUDAEMU_ROUNDED(float, __fadd_rn, x + y)
CUDAEMU_ROUNDED(float, __fsub_rn, x - y)
CUDAEMU_ROUNDED(float, __fdiv_rn, x / y)
CUDAEMU_ROUNDED(double, __dmul_rn, x * y)
CUDAEMU_ROUNDED(double, __dadd_rn, x + y)
CUDAEMU_ROUNDED(double, __dsub_rn, x - y)
CUDAEMU_ROUNDED(double, __ddiv_rn, x / y)
#undef CUDAEMU_ROUNDED
inline float __fmaf_rn(float x, float y, float z) { return ::fmaf(x, y, z); }
inline double __fma_rn(double x, double y, double z) { return ::fma(x, y, z); }
inline float __fsqrt_rn(float x) { return ::sqrtf(x); }
inline double __dsqrt_rn(double x) { return ::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline float rsqrtf(float x) { return 1.0f / ::sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / ::sqrt(x); }
// The fast approximations, exact here.
inline float __expf(float x) { return ::expf(x); }
inline float __logf(float x) { return ::logf(x); }
inline float __sinf(float x) { return ::sinf(x); }
inline float __cosf(float x) { return ::cosf(x); }
inline float __powf(float x, float y) { return ::powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }

#endif  // CUDAEMU_DEVICE_FUNCTIONS_H_
