// NCCL errors as Status values that carry the failing statement, file:line, where (a replica
// or the job) and NCCL's own messages, e.g.
//   INTERNAL: ncclGroupEnd failed at strategy/collectives/cuda/nccl_all_reduce.cc:502 on replica 0
//   (/job:worker/replica:0/task:0/device:GPU:0): remote process exited or there was a network
//   error (<ncclGetLastError's text>)
#ifndef TOWER_STRATEGY_COLLECTIVES_CUDA_NCCL_STATUS_H_
#define TOWER_STRATEGY_COLLECTIVES_CUDA_NCCL_STATUS_H_

#include <nccl.h>

#include <string>

#include "util/status.h"

namespace tower {

// Misuse (ncclInvalidArgument, ncclInvalidUsage) → InvalidArgument; else Internal. `comm`
// (may be null) is asked for NCCL's last error text.
Status NcclError(ncclResult_t result, const char* statement, const char* file, int line,
                 const std::string& where, ncclComm_t comm = nullptr);

}  // namespace tower

#define TOWER_NCCL_RETURN_IF_ERROR(statement, where)                               \
  do {                                                                             \
    const ncclResult_t tower_nccl_result_ = (statement);                           \
    if (tower_nccl_result_ != ncclSuccess) {                                       \
      return ::tower::NcclError(tower_nccl_result_, #statement, __FILE__, __LINE__, \
                                where);                                            \
    }                                                                              \
  } while (0)

#endif  // TOWER_STRATEGY_COLLECTIVES_CUDA_NCCL_STATUS_H_
