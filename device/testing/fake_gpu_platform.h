// A GPU platform for tests on machines without a GPU: cards of a chosen size whose memory
// is host memory, with cudaMalloc's behaviour of refusing what the card no longer has.
// Lets every configuration path (visible GPUs, growth, limits, fractions, virtual GPUs,
// "Memory growth cannot differ") run here exactly as it would on real cards.
#ifndef TOWER_DEVICE_TESTING_FAKE_GPU_PLATFORM_H_
#define TOWER_DEVICE_TESTING_FAKE_GPU_PLATFORM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/context.h"
#include "device/platform.h"

namespace tower::testing {

struct FakeGpuSpec {
  std::string model = "Fake GPU";
  uint64_t total_bytes = 1ull << 30;
  // What the card has free at start (other processes hold the rest); 0 = all of it.
  uint64_t free_bytes = 0;
  // Empty: "GPU-fake-<index>". Give two specs the same UUID to fake one card seen twice.
  std::string uuid;
};

class FakeGpuPlatform : public Platform {
 public:
  explicit FakeGpuPlatform(std::vector<FakeGpuSpec> gpus);
  ~FakeGpuPlatform() override;

  std::string device_type() const override { return "GPU"; }
  std::string name() const override { return "FakeCUDA"; }
  Status status() const override;
  std::string version() const override { return "fake"; }
  const std::vector<PhysicalDeviceInfo>& devices() const override { return devices_; }
  StatusOr<MemoryInfo> QueryMemoryInfo(int index) const override;
  StatusOr<std::unique_ptr<MemorySource>> CreateMemorySource(int index) override;
  // Host streams: fake GPU memory is host memory.
  StatusOr<std::unique_ptr<DeviceStream>> CreateStream(int index) override;

  // Bytes the memory sources hold on card `index` right now.
  uint64_t bytes_taken(int index) const;

 private:
  struct Cards;
  std::vector<PhysicalDeviceInfo> devices_;
  std::shared_ptr<Cards> cards_;
};

// A Context over the real CPU platform and fake GPUs.
std::unique_ptr<Context> MakeContextWithFakeGpus(std::vector<FakeGpuSpec> gpus,
                                                 ContextOptions options = ContextOptions());

// A Context whose CPU is split into `n` logical CPUs (no GPUs), initialised: the devices of
// n host replicas.
std::unique_ptr<Context> MakeContextWithLogicalCpus(int n);

}  // namespace tower::testing

#endif  // TOWER_DEVICE_TESTING_FAKE_GPU_PLATFORM_H_
