// One process of the NCCL emulation's cross-process tests (started by nccl_process_test,
// directly or under mpirun). Its ranks are first_rank..first_rank+local-1 of nranks, rank r
// on device r % (device count); everything it learns is printed as "rank R: ...".
//
//   --mode=collectives  all-reduce, broadcast and all-gather with closed-form results
//   --mode=survive      one all-reduce waited for under --deadline_ms: prints whether it
//                       completed, or the asynchronous error, or that the deadline passed (and
//                       aborts the communicator), then whether the stream was released
//   --id=HEX (the ncclUniqueId) --nranks=N --first_rank=R --local=L
//   --mpi: first_rank = OMPI_COMM_WORLD_RANK * local
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/cudaemu/nccl/nccl_test_util.h"

namespace tower::nccl_test {
namespace {

struct Flags {
  std::string mode = "collectives";
  std::string id;
  int nranks = 0;
  int first_rank = 0;
  int local = 1;
  bool mpi = false;
  int deadline_ms = 10000;
  size_t size = 100003;
};

bool Parse(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name, std::string* out) {
      const std::string prefix = std::string("--") + name + "=";
      if (arg.compare(0, prefix.size(), prefix) != 0) return false;
      *out = arg.substr(prefix.size());
      return true;
    };
    std::string v;
    if (value("mode", &v)) {
      flags->mode = v;
    } else if (value("id", &v)) {
      flags->id = v;
    } else if (value("nranks", &v)) {
      flags->nranks = std::atoi(v.c_str());
    } else if (value("first_rank", &v)) {
      flags->first_rank = std::atoi(v.c_str());
    } else if (value("local", &v)) {
      flags->local = std::atoi(v.c_str());
    } else if (value("deadline_ms", &v)) {
      flags->deadline_ms = std::atoi(v.c_str());
    } else if (value("size", &v)) {
      flags->size = static_cast<size_t>(std::atoll(v.c_str()));
    } else if (arg == "--mpi") {
      flags->mpi = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return false;
    }
  }
  return flags->nranks > 0 && flags->local > 0;
}

int Fail(int rank, const std::string& what) {
  std::printf("rank %d: FAILED: %s\n", rank, what.c_str());
  std::fflush(stdout);
  return 1;
}

int Collectives(const Flags& f, const std::vector<ncclComm_t>& comms,
                const std::vector<int>& devices) {
  const int n = f.nranks, local = f.local;
  const size_t size = f.size;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> sums;
  std::vector<std::unique_ptr<DeviceBuffer<int32_t>>> casts, gathered, mine;
  std::vector<std::unique_ptr<DeviceStream>> streams;
  for (int l = 0; l < local; ++l) {
    const int rank = f.first_rank + l;
    sums.push_back(std::make_unique<DeviceBuffer<float>>(devices[l], size));
    casts.push_back(std::make_unique<DeviceBuffer<int32_t>>(devices[l], size));
    mine.push_back(std::make_unique<DeviceBuffer<int32_t>>(devices[l], 3));
    gathered.push_back(std::make_unique<DeviceBuffer<int32_t>>(devices[l], 3 * n));
    streams.push_back(std::make_unique<DeviceStream>(devices[l]));
    std::vector<float> values(size);
    for (size_t i = 0; i < size; ++i) values[i] = static_cast<float>((rank + 1) * (i % 5 + 1));
    sums[l]->Upload(values);
    std::vector<int32_t> ints(size);
    for (size_t i = 0; i < size; ++i) ints[i] = static_cast<int32_t>(rank * 1000000 + i);
    casts[l]->Upload(ints);
    mine[l]->Upload({rank, 10 * rank, 100 * rank});
  }
  if (ncclGroupStart() != ncclSuccess) return Fail(f.first_rank, "ncclGroupStart");
  for (int l = 0; l < local; ++l) {
    if (ncclAllReduce(sums[l]->get(), sums[l]->get(), size, ncclFloat, ncclSum, comms[l],
                      streams[l]->get()) != ncclSuccess ||
        ncclBroadcast(casts[l]->get(), casts[l]->get(), size, ncclInt32, n - 1, comms[l],
                      streams[l]->get()) != ncclSuccess ||
        ncclAllGather(mine[l]->get(), gathered[l]->get(), 3, ncclInt32, comms[l],
                      streams[l]->get()) != ncclSuccess) {
      return Fail(f.first_rank + l, std::string("enqueue: ") + ncclGetLastError(nullptr));
    }
  }
  if (ncclGroupEnd() != ncclSuccess) {
    return Fail(f.first_rank, std::string("ncclGroupEnd: ") + ncclGetLastError(nullptr));
  }
  for (int l = 0; l < local; ++l) {
    const int rank = f.first_rank + l;
    if (cudaStreamSynchronize(streams[l]->get()) != cudaSuccess) return Fail(rank, "synchronize");
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comms[l], &async);
    if (async != ncclSuccess) {
      return Fail(rank, std::string("async error: ") + ncclGetLastError(nullptr));
    }
    const std::vector<float> sum = sums[l]->Download();
    for (size_t i = 0; i < size; ++i) {
      const float want = static_cast<float>((i % 5 + 1) * n * (n + 1) / 2);
      if (sum[i] != want) {
        return Fail(rank, "all-reduce [" + std::to_string(i) + "] = " + std::to_string(sum[i]) +
                              ", want " + std::to_string(want));
      }
    }
    const std::vector<int32_t> cast = casts[l]->Download();
    for (size_t i = 0; i < size; ++i) {
      if (cast[i] != static_cast<int32_t>((n - 1) * 1000000 + i)) {
        return Fail(rank, "broadcast [" + std::to_string(i) + "] = " + std::to_string(cast[i]));
      }
    }
    const std::vector<int32_t> all = gathered[l]->Download();
    for (int s = 0; s < n; ++s) {
      if (all[3 * s] != s || all[3 * s + 1] != 10 * s || all[3 * s + 2] != 100 * s) {
        return Fail(rank, "all-gather from rank " + std::to_string(s));
      }
    }
    std::printf("rank %d: collectives OK (%d ranks, pid %d)\n", rank, n,
                static_cast<int>(getpid()));
  }
  std::fflush(stdout);
  return 0;
}

int Survive(const Flags& f, ncclComm_t comm, int device) {
  const int rank = f.first_rank;
  DeviceBuffer<float> buffer(device, f.size);
  buffer.Upload(std::vector<float>(f.size, 1.0f));
  DeviceStream stream(device);
  const ncclResult_t enqueued =
      ncclAllReduce(buffer.get(), buffer.get(), f.size, ncclFloat, ncclSum, comm, stream.get());
  if (enqueued != ncclSuccess && enqueued != ncclRemoteError) {
    return Fail(rank, std::string("enqueue: ") + ncclGetLastError(nullptr));
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(f.deadline_ms);
  auto elapsed_ms = [&] {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - start)
                                      .count());
  };
  bool aborted = false;
  if (enqueued == ncclRemoteError) {  // a peer failed before this rank got here
    std::printf("rank %d: async error at enqueue: %s: %s\n", rank, ncclGetErrorString(enqueued),
                ncclGetLastError(comm));
    ncclCommAbort(comm);
    aborted = true;
  }
  while (!aborted) {
    const cudaError_t done = cudaStreamQuery(stream.get());
    if (done == cudaSuccess) {
      const float first = buffer.Download()[0];
      std::printf("rank %d: collective completed (%g)\n", rank, first);
      break;
    }
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess)
      return Fail(rank, "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress) {
      std::printf("rank %d: async error after %lld ms: %s: %s\n", rank, elapsed_ms(),
                  ncclGetErrorString(async), ncclGetLastError(comm));
      ncclCommAbort(comm);
      aborted = true;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("rank %d: deadline passed: aborting\n", rank);
      ncclCommAbort(comm);
      aborted = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (aborted) {
    const auto released_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (cudaStreamQuery(stream.get()) != cudaSuccess) {
      if (std::chrono::steady_clock::now() > released_by) return Fail(rank, "stream not released");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::printf("rank %d: stream released\n", rank);
  } else {
    ncclCommDestroy(comm);
  }
  std::fflush(stdout);
  return 0;
}

int Main(int argc, char** argv) {
  alarm(120);  // a worker that hangs ends anyway (SIGALRM)
  Flags f;
  if (!Parse(argc, argv, &f)) {
    std::fprintf(stderr,
                 "usage: nccl_worker --id=HEX --nranks=N [--first_rank=R] [--local=L] "
                 "[--mpi] [--mode=collectives|survive] [--deadline_ms=D] [--size=S]\n");
    return 2;
  }
  if (f.mpi) {
    const char* world_rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (world_rank == nullptr) return Fail(-1, "--mpi without OMPI_COMM_WORLD_RANK");
    f.first_rank = std::atoi(world_rank) * f.local;
  }
  ncclUniqueId id;
  if (!Unhex(f.id, &id)) return Fail(f.first_rank, "bad --id");
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) return Fail(f.first_rank, "no GPUs");
  std::vector<ncclComm_t> comms(f.local, nullptr);
  std::vector<int> devices(f.local);
  if (ncclGroupStart() != ncclSuccess) return Fail(f.first_rank, "ncclGroupStart");
  for (int l = 0; l < f.local; ++l) {
    devices[l] = (f.first_rank + l) % gpus;
    cudaSetDevice(devices[l]);
    if (ncclCommInitRank(&comms[l], f.nranks, id, f.first_rank + l) != ncclSuccess) {
      return Fail(f.first_rank + l, std::string("ncclCommInitRank: ") + ncclGetLastError(nullptr));
    }
  }
  if (ncclGroupEnd() != ncclSuccess) {
    return Fail(f.first_rank, std::string("init: ") + ncclGetLastError(nullptr));
  }
  cudaSetDevice(devices[0]);
  std::printf("rank %d: joined (pid %d)\n", f.first_rank, static_cast<int>(getpid()));
  std::fflush(stdout);
  if (f.mode == "survive") return Survive(f, comms[0], devices[0]);
  const int result = Collectives(f, comms, devices);
  for (ncclComm_t comm : comms) ncclCommDestroy(comm);
  return result;
}

}  // namespace
}  // namespace tower::nccl_test

int main(int argc, char** argv) { return tower::nccl_test::Main(argc, argv); }
