#include "device/testing/fake_gpu_platform.h"

#include <mutex>

#include "device/cpu_platform.h"
#include "device/host_memory_source.h"
#include "util/strings.h"

namespace tower::testing {

struct FakeGpuPlatform::Cards {
  std::mutex mu;
  std::vector<uint64_t> capacity;  // free at start
  std::vector<uint64_t> taken;
};

namespace {

class FakeGpuMemorySource : public MemorySource {
 public:
  FakeGpuMemorySource(std::shared_ptr<void> keep_alive, std::mutex* mu,
                      uint64_t* taken, uint64_t capacity, int index)
      : keep_alive_(std::move(keep_alive)), mu_(mu), taken_(taken), capacity_(capacity),
        index_(index) {}

  StatusOr<void*> Allocate(size_t bytes) override {
    {
      std::lock_guard<std::mutex> lock(*mu_);
      if (*taken_ + bytes > capacity_) {
        return ResourceExhaustedError("out of memory (fake cudaMalloc of " +
                                      BytesWithExact(bytes) + ", " +
                                      HumanBytes(capacity_ - *taken_) + " left on the card)");
      }
      *taken_ += bytes;
    }
    StatusOr<void*> region = host_.Allocate(bytes);
    if (!region.ok()) {
      std::lock_guard<std::mutex> lock(*mu_);
      *taken_ -= bytes;
    }
    return region;
  }

  void Free(void* region, size_t bytes) override {
    host_.Free(region, bytes);
    std::lock_guard<std::mutex> lock(*mu_);
    *taken_ -= bytes;
  }

  std::string Describe() const override {
    return "fake cudaMalloc on GPU " + std::to_string(index_);
  }

 private:
  std::shared_ptr<void> keep_alive_;
  std::mutex* mu_;
  uint64_t* taken_;
  const uint64_t capacity_;
  const int index_;
  HostMemorySource host_;
};

}  // namespace

FakeGpuPlatform::FakeGpuPlatform(std::vector<FakeGpuSpec> gpus)
    : cards_(std::make_shared<Cards>()) {
  for (size_t i = 0; i < gpus.size(); ++i) {
    PhysicalDeviceInfo info;
    info.device_type = "GPU";
    info.index = static_cast<int>(i);
    info.model = gpus[i].model;
    info.uuid = gpus[i].uuid.empty() ? "GPU-fake-" + std::to_string(i) : gpus[i].uuid;
    info.pci_bus_id = "0000:0" + std::to_string(i) + ":00.0";
    info.total_memory_bytes = gpus[i].total_bytes;
    info.compute_capability_major = 9;
    info.compute_capability_minor = 0;
    info.cores = 132;
    devices_.push_back(info);
    cards_->capacity.push_back(gpus[i].free_bytes ? gpus[i].free_bytes : gpus[i].total_bytes);
    cards_->taken.push_back(0);
  }
}

FakeGpuPlatform::~FakeGpuPlatform() = default;

Status FakeGpuPlatform::status() const {
  return devices_.empty() ? UnavailableError("no usable GPU: no fake GPU configured")
                          : OkStatus();
}

StatusOr<MemoryInfo> FakeGpuPlatform::QueryMemoryInfo(int index) const {
  std::lock_guard<std::mutex> lock(cards_->mu);
  return MemoryInfo{cards_->capacity[index] - cards_->taken[index],
                    devices_[index].total_memory_bytes};
}

StatusOr<std::unique_ptr<MemorySource>> FakeGpuPlatform::CreateMemorySource(int index) {
  return std::unique_ptr<MemorySource>(new FakeGpuMemorySource(
      cards_, &cards_->mu, &cards_->taken[index], cards_->capacity[index], index));
}

StatusOr<std::unique_ptr<DeviceStream>> FakeGpuPlatform::CreateStream(int index) {
  return std::unique_ptr<DeviceStream>(new HostStream());
}

uint64_t FakeGpuPlatform::bytes_taken(int index) const {
  std::lock_guard<std::mutex> lock(cards_->mu);
  return cards_->taken[index];
}

std::unique_ptr<Context> MakeContextWithFakeGpus(std::vector<FakeGpuSpec> gpus,
                                                 ContextOptions options) {
  std::vector<std::unique_ptr<Platform>> platforms;
  platforms.push_back(CreateCpuPlatform());
  platforms.push_back(std::make_unique<FakeGpuPlatform>(std::move(gpus)));
  return std::make_unique<Context>(std::move(platforms), std::move(options));
}

std::unique_ptr<Context> MakeContextWithLogicalCpus(int n) {
  auto context = MakeContextWithFakeGpus({});
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0], std::vector<LogicalDeviceConfiguration>(n)));
  TOWER_CHECK_OK(context->EnsureInitialized());
  return context;
}

}  // namespace tower::testing
