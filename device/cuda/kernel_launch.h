// TOWER_LAUNCH_KERNEL: the one way Tower launches a CUDA kernel, for nvcc and for cudaemu
// (the host emulation, whose compiler has no <<<>>> syntax).
//
//   cudaError_t error = TOWER_LAUNCH_KERNEL(Kernel<Op>, grid, block, shared_bytes, stream,
//                                           arg0, arg1, ...);
//
// Template kernels are named with their arguments. Included only by .cu files.
#ifndef TOWER_DEVICE_CUDA_KERNEL_LAUNCH_H_
#define TOWER_DEVICE_CUDA_KERNEL_LAUNCH_H_

#include <cuda_runtime.h>

#if defined(CUDAEMU)
#define TOWER_KERNEL_CALL(kernel, grid, block, shared_bytes, stream, ...) \
  ::cudaemu::LaunchKernel(kernel, #kernel, grid, block, shared_bytes, stream, __VA_ARGS__)
#else
#define TOWER_KERNEL_CALL(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<grid, block, shared_bytes, stream>>>(__VA_ARGS__)
#endif

// Evaluates to this launch's own error. The launch reports through the thread's last error,
// which may still hold an earlier, unrelated one (a stream query's cudaErrorNotReady, a
// cleanup call's failure): that one is cleared first, so it is never blamed on this kernel.
// It was returned by the call that made it; a sticky error survives the clear (the runtime
// keeps reporting it) and fails the launch, as it must.
#define TOWER_LAUNCH_KERNEL(...)    \
  ([&]() -> cudaError_t {           \
    (void)cudaGetLastError();       \
    TOWER_KERNEL_CALL(__VA_ARGS__); \
    return cudaGetLastError();      \
  }())

#endif  // TOWER_DEVICE_CUDA_KERNEL_LAUNCH_H_
