#include "tests/testing/gpu_contexts.h"

#include <string>
#include <thread>

#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "strategy/collectives/gpu_collectives.h"

namespace tower::testing {

std::unique_ptr<Context> RealGpuContext(int virtual_gpus, bool require_gpu) {
  std::vector<std::unique_ptr<Platform>> platforms;
  platforms.push_back(CreateCpuPlatform());
  platforms.push_back(CreateGpuPlatform());
  auto context = std::make_unique<Context>(std::move(platforms));
  const std::vector<PhysicalDevice> gpus = context->ListPhysicalDevices("GPU");
  if (gpus.empty() && require_gpu) return nullptr;
  if (virtual_gpus > 0 && !gpus.empty()) {
    TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
        gpus[0], std::vector<LogicalDeviceConfiguration>(virtual_gpus,
                                                         LogicalDeviceConfiguration{1024})));
  }
  TOWER_CHECK_OK(context->EnsureInitialized());
  return context;
}

std::vector<NcclWorker> MakeNcclWorkers(const std::vector<std::vector<Device*>>& devices,
                                        std::chrono::milliseconds timeout) {
  const std::string id = *NewNcclUniqueId();
  int world = 0;
  for (const auto& local : devices) world += static_cast<int>(local.size());
  std::vector<NcclWorker> workers(devices.size());
  std::vector<std::thread> threads;
  int first = 0;
  for (size_t w = 0; w < devices.size(); ++w) {
    threads.emplace_back([&, w, first] {
      std::vector<std::string> names;
      for (size_t r = 0; r < devices[w].size(); ++r) {
        names.push_back("worker " + std::to_string(w) + " replica " + std::to_string(r));
      }
      StatusOr<std::unique_ptr<CrossDeviceOps>> ops =
          MakeNcclAllReduceAcrossProcesses(devices[w], names, timeout, id, first, world);
      workers[w].status = ops.status();
      if (ops.ok()) workers[w].ops = std::move(*ops);
    });
    first += static_cast<int>(devices[w].size());
  }
  for (auto& thread : threads) thread.join();
  return workers;
}

}  // namespace tower::testing
