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

// Evaluates to the launch's error (cudaGetLastError after the launch).
#define TOWER_LAUNCH_KERNEL(...)                 \
  ([&]() -> cudaError_t {                        \
    TOWER_KERNEL_CALL(__VA_ARGS__);              \
    return cudaGetLastError();                   \
  }())

#endif  // TOWER_DEVICE_CUDA_KERNEL_LAUNCH_H_
