// The message of a failed library call (CUDA runtime, cuBLAS, NCCL), one format for all:
//   <statement> failed at <file>:<line> on <where>: <the library's text> (<detail>)
// e.g. "cudaMalloc(&ptr, bytes) failed at device/cuda/cuda_platform.cc:97 on GPU:0: out of
// memory (cudaErrorMemoryAllocation)". An empty `where` or `detail` is left out.
#ifndef TOWER_UTIL_FAILED_CALL_H_
#define TOWER_UTIL_FAILED_CALL_H_

#include <string>
#include <string_view>

namespace tower {

std::string FailedCallMessage(std::string_view statement, const char* file, int line,
                              std::string_view where, std::string_view text,
                              std::string_view detail);

}  // namespace tower

#endif  // TOWER_UTIL_FAILED_CALL_H_
