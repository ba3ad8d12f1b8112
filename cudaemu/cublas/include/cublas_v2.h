// cudaemu: a host emulation of the cuBLAS v2 API, for the entry points Tower calls.
//
// Names, enum values and signatures follow the CUDA 13 cuBLAS headers (cublas_api.h), and
// the macros map the plain names to the _v2 symbols as cublas_v2.h does; semantics follow
// the cuBLAS documentation. Only what Tower and its tests use is declared: a call missing
// here is a compile error, never a silent stub.
//
// Where the emulation has to choose (see cudaemu/cublas/cublas.cc for the details):
// - A handle belongs to the device current at cublasCreate. Its stream (NULL: the legacy
//   default stream of the calling thread's current device) must be a stream of that device
//   when a routine runs, else the routine returns CUBLAS_STATUS_EXECUTION_FAILED (the
//   kernel would fail to launch).
// - Matrix operands must lie in live device memory of the handle's device (cudaMalloc),
//   over the whole extent the routine reads or writes; otherwise the call returns
//   CUBLAS_STATUS_EXECUTION_FAILED at once and nothing runs (a GPU would fault later with
//   cudaErrorIllegalAddress). Memory freed between the call and its turn on the stream is
//   that fault: the stream's context gets the sticky cudaErrorIllegalAddress.
// - Routines run on the handle's stream in order with the rest of its work and return
//   without waiting for it (default pointer mode: alpha and beta are host values read at
//   the call).
// - cublasCreate allocates the default workspace (32 MiB, as on Hopper) from the device.
//   cublasSetWorkspace releases it and makes the handle use the user's buffer (size 0: no
//   workspace); cublasSetStream goes back to the default workspace as documented, which is
//   allocated again at the next routine that runs. A user workspace is used as scratch by
//   SGEMM when large enough, so that sharing one between concurrent streams is a data race
//   that ThreadSanitizer reports, as it would corrupt results on a GPU.
#ifndef CUDAEMU_CUBLAS_V2_H_
#define CUDAEMU_CUBLAS_V2_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#define CUBLAS_VER_MAJOR 13
#define CUBLAS_VER_MINOR 0
#define CUBLAS_VER_PATCH 0
#define CUBLAS_VER_BUILD 0
#define CUBLAS_VERSION (CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH)

#define CUBLASWINAPI
#define CUBLASAPI

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
  CUBLAS_OP_HERMITAN = 2, /* synonym of CUBLAS_OP_C */
  CUBLAS_OP_CONJG = 3     /* placeholder, not supported */
} cublasOperation_t;

typedef enum {
  CUBLAS_DEFAULT_MATH = 0,
  // Deprecated: SGEMM may convert its inputs to half precision (CUBLAS_COMPUTE_32F_FAST_16F);
  // the emulation rounds A and B to FP16.
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  // Single-precision routines may use TF32 tensor cores: the emulation rounds A and B to TF32
  // (unless NVIDIA_TF32_OVERRIDE=0 when the handle was created).
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
  // A flag to OR with the above.
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,
} cublasMath_t;

struct cublasContext;
typedef struct cublasContext* cublasHandle_t;

#define cublasCreate cublasCreate_v2
#define cublasDestroy cublasDestroy_v2
#define cublasGetVersion cublasGetVersion_v2
#define cublasSetWorkspace cublasSetWorkspace_v2
#define cublasSetStream cublasSetStream_v2
#define cublasGetStream cublasGetStream_v2
#define cublasSgemm cublasSgemm_v2
#define cublasSgemm_64 cublasSgemm_v2_64

extern "C" {

// Creates a handle on the calling thread's current device (creating its context if needed)
// with the default workspace. CUBLAS_STATUS_INVALID_VALUE for handle == NULL,
// CUBLAS_STATUS_NOT_INITIALIZED when the runtime has no usable device,
// CUBLAS_STATUS_ALLOC_FAILED when the device cannot hold the workspace.
cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle);
// Waits for the handle's queued work and frees its resources. CUBLAS_STATUS_NOT_INITIALIZED
// for a handle that is not live (never created, or already destroyed).
cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle);
cublasStatus_t CUBLASWINAPI cublasGetVersion_v2(cublasHandle_t handle, int* version);
// `workspace` must be aligned to 256 bytes (else CUBLAS_STATUS_INVALID_VALUE) and, when
// workspaceSizeInBytes > 0, lie in device memory of the handle's device.
cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                                  size_t workspaceSizeInBytes);
cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId);
cublasStatus_t CUBLASWINAPI cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId);
cublasStatus_t CUBLASWINAPI cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode);
cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status);
const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status);

// C = alpha * op(A) * op(B) + beta * C, column-major; op(A) is m x k, op(B) k x n, C m x n.
cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                                           cublasOperation_t transb, int m, int n, int k,
                                           const float* alpha, const float* A, int lda,
                                           const float* B, int ldb, const float* beta, float* C,
                                           int ldc);
cublasStatus_t CUBLASWINAPI cublasSgemm_v2_64(cublasHandle_t handle, cublasOperation_t transa,
                                              cublasOperation_t transb, int64_t m, int64_t n,
                                              int64_t k, const float* alpha, const float* A,
                                              int64_t lda, const float* B, int64_t ldb,
                                              const float* beta, float* C, int64_t ldc);

}  // extern "C"

#endif  // CUDAEMU_CUBLAS_V2_H_
