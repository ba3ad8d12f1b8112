// cudaemu: a host emulation of NCCL, for the entry points Tower calls.
//
// Types, enum values and signatures follow NCCL 2.28's nccl.h; semantics follow NCCL's
// documentation. Ranks meet by unique id, within one process (threads, ncclCommInitAll) and
// across the processes of one host (Unix-domain sockets); a collective is work on the given
// stream that waits until every rank has contributed. Reductions are associated in rank order
// (((r0 op r1) op r2) ...), so results are the same bits on every run. Only what is declared
// here is emulated: a call missing here is a compile error, never a silent stub.
// Fault injection (CUDAEMU_NCCL_STALL, CUDAEMU_NCCL_DIE) and the emulation's counters: see
// cudaemu/nccl_testing.h.
#ifndef CUDAEMU_NCCL_H_
#define CUDAEMU_NCCL_H_

#include <cuda_runtime_api.h>
#include <limits.h>
#include <stddef.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

// Opaque handle to a communicator.
typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

// Communicator configuration (only `blocking` has an effect here). With blocking = 0,
// ncclCommInitRankConfig returns at once with ncclInProgress (ncclCommGetAsyncError says when
// every rank joined), and collectives, ncclGroupEnd and ncclCommFinalize may return
// ncclInProgress while NCCL's thread issues their work: poll ncclCommGetAsyncError until it
// is no longer ncclInProgress before any other call on the communicator (which NCCL refuses
// meanwhile with ncclInvalidArgument) and before trusting the stream. When they do is
// CUDAEMU_NCCL_IN_PROGRESS's choice (cudaemu/nccl_testing.h).
typedef struct ncclConfig_v22800 {
  // attributes that users should never touch.
  size_t size;
  unsigned int magic;
  unsigned int version;
  // attributes that users are able to customize.
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER {                                \
  sizeof(ncclConfig_t),                            /* size */        \
  0xcafebeef,                                      /* magic */       \
  NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */    \
  NCCL_CONFIG_UNDEF_INT,                           /* blocking */    \
  NCCL_CONFIG_UNDEF_INT,                           /* cgaClusterSize */ \
  NCCL_CONFIG_UNDEF_INT,                           /* minCTAs */     \
  NCCL_CONFIG_UNDEF_INT,                           /* maxCTAs */     \
  NCCL_CONFIG_UNDEF_PTR,                           /* netName */     \
  NCCL_CONFIG_UNDEF_INT,                           /* splitShare */  \
  NCCL_CONFIG_UNDEF_INT,                           /* trafficClass */ \
  NCCL_CONFIG_UNDEF_PTR,                           /* commName */    \
  NCCL_CONFIG_UNDEF_INT,                           /* collnetEnable */ \
  NCCL_CONFIG_UNDEF_INT,                           /* CTAPolicy */   \
  NCCL_CONFIG_UNDEF_INT,                           /* shrinkShare */ \
  NCCL_CONFIG_UNDEF_INT,                           /* nvlsCTAs */    \
  NCCL_CONFIG_UNDEF_INT,                           /* nChannelsPerNetPeer */ \
  NCCL_CONFIG_UNDEF_INT,                           /* nvlinkCentricSched */ \
}

// Reduction operations.
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

// Data types (ncclFloat8e4m3 and ncclFloat8e5m2 are refused with ncclInvalidArgument).
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

// NCCL_VERSION_CODE of the library.
ncclResult_t ncclGetVersion(int* version);

// An id naming a new communicator; hand it to every rank (by any means: MPI, a file).
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);

// Joins rank `rank` of `nranks` on the calling thread's current device. Blocks until every
// rank joined, unless inside ncclGroupStart/End (then ncclGroupEnd waits) or `config`
// says blocking = 0 (then it returns ncclInProgress; see ncclCommGetAsyncError).
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
// `ndev` ranks in this process, rank i on devlist[i] (on device i when devlist is NULL).
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

// Frees the communicator. Collectives already enqueued still complete.
ncclResult_t ncclCommDestroy(ncclComm_t comm);
// Flushes the communicator's collectives and ends its use (every call on it but
// ncclCommDestroy and ncclCommAbort is then refused). On a non-blocking communicator it may
// return ncclInProgress: poll ncclCommGetAsyncError until it is no longer, then destroy it.
ncclResult_t ncclCommFinalize(ncclComm_t comm);
// Frees the communicator and ends its collectives at once (their data is undefined); the
// other ranks then see ncclRemoteError from ncclCommGetAsyncError.
ncclResult_t ncclCommAbort(ncclComm_t comm);

const char* ncclGetErrorString(ncclResult_t result);
// A human-readable message of the calling thread's last NCCL error.
const char* ncclGetLastError(ncclComm_t comm);

// ncclInProgress while the communicator is joining or a non-blocking operation that returned
// ncclInProgress is not yet issued; the error of a failed initialisation, of a lost peer
// (ncclRemoteError) or of misuse (a call while an operation was in progress:
// ncclInvalidArgument); else ncclSuccess.
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

// Calls between ncclGroupStart and ncclGroupEnd are deferred to ncclGroupEnd, which enqueues
// the collectives (and waits for blocking initialisations): one thread can drive several
// ranks this way.
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // CUDAEMU_NCCL_H_
