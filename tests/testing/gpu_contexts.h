// GPU test set-ups the CUDA tests share: a context over the real platforms (cards, or
// emulated ones under --config=cudaemu), and NCCL "processes" made of threads.
#ifndef TOWER_TESTS_TESTING_GPU_CONTEXTS_H_
#define TOWER_TESTS_TESTING_GPU_CONTEXTS_H_

#include <chrono>
#include <memory>
#include <vector>

#include "device/context.h"
#include "strategy/collectives/cross_device_ops.h"

namespace tower::testing {

// A fresh, initialized context over the CPU and GPU platforms; `virtual_gpus` > 0 splits card
// 0 into that many logical GPUs of 1 GiB. nullptr when `require_gpu` and there is no GPU.
std::unique_ptr<Context> RealGpuContext(int virtual_gpus = 0, bool require_gpu = true);

// One "process" of a cross-process NCCL job: its ops, or why they could not be made.
struct NcclWorker {
  std::unique_ptr<CrossDeviceOps> ops;
  Status status;
};
// Builds the cross-process NCCL ops of several "processes" at once (setup waits for every
// rank), each on a thread: worker w owns devices[w], its NCCL ranks numbered on from the
// previous worker's; its replicas are named "worker w replica r".
std::vector<NcclWorker> MakeNcclWorkers(const std::vector<std::vector<Device*>>& devices,
                                        std::chrono::milliseconds timeout);

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_GPU_CONTEXTS_H_
