#include "strategy/collectives/cuda/nccl_status.h"

#include "util/failed_call.h"

namespace tower {

Status NcclError(ncclResult_t result, const char* statement, const char* file, int line,
                 const std::string& where, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  const std::string message = FailedCallMessage(statement, file, line, where,
                                                ncclGetErrorString(result),
                                                last != nullptr ? last : "");
  return result == ncclInvalidArgument || result == ncclInvalidUsage
             ? InvalidArgumentError(message)
             : InternalError(message);
}

}  // namespace tower
