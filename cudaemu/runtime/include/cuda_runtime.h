// cudaemu's cuda_runtime.h: the runtime API (cuda_runtime_api.h) plus what .cu files use on
// the device side (cudaemu/device_functions.h: __global__, threadIdx, __syncthreads, warp
// shuffles, atomics, intrinsics) and the kernel launch (cudaemu/kernel_launch.h), so that
// CUDA sources compile with the host compiler and their kernels run on the host.
#ifndef CUDAEMU_CUDA_RUNTIME_H_
#define CUDAEMU_CUDA_RUNTIME_H_

#include <cuda_runtime_api.h>

#include <cmath>

#include <cudaemu/device_functions.h>
#include <cudaemu/kernel_launch.h>

#endif  // CUDAEMU_CUDA_RUNTIME_H_
