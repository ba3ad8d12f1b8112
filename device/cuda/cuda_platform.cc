// The CUDA platform: physical GPUs as the CUDA runtime sees them (CUDA_VISIBLE_DEVICES
// applies, and renumbers them, exactly as for any CUDA program), memory from cudaMalloc.
//
// A machine without a GPU or driver has zero GPUs: cudaGetDeviceCount's error (usually
// "CUDA driver version is insufficient for CUDA runtime version") is kept in status().
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "device/cuda/cuda_status.h"
#include "device/cuda/cuda_stream.h"
#include "device/device_name.h"
#include "device/gpu_platform.h"
#include "util/strings.h"

namespace tower {
namespace {

std::string FormatUuid(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char text[64];
  std::snprintf(text, sizeof(text),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text;
}

std::string FormatVersion(int version) {  // 13000 -> "13.0"
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

class CudaMemorySource : public MemorySource {
 public:
  CudaMemorySource(int ordinal, std::string model)
      : ordinal_(ordinal), model_(std::move(model)) {}

  StatusOr<void*> Allocate(size_t bytes) override {
    ScopedCudaDevice device(ordinal_);
    TOWER_RETURN_IF_ERROR(device.status());
    void* ptr = nullptr;
    const cudaError_t error = cudaMalloc(&ptr, bytes);
    if (error != cudaSuccess) {
      IgnoreCudaError(error);  // cudaMalloc failures are not sticky
      return CudaError(error, "cudaMalloc(&ptr, " + std::to_string(bytes) + ")", __FILE__,
                       __LINE__, Describe());
    }
    return ptr;
  }

  void Free(void* region, size_t bytes) override {
    ScopedCudaDevice device(ordinal_);
    IgnoreCudaError(cudaFree(region));
  }

  std::string Describe() const override {
    return "cudaMalloc on GPU " + std::to_string(ordinal_) + " (" + model_ + ")";
  }

 private:
  const int ordinal_;
  const std::string model_;
};

class CudaPlatform : public Platform {
 public:
  CudaPlatform() {
    int runtime = 0;
    int driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    version_ = "CUDA runtime " + FormatVersion(runtime) + ", driver " +
               (driver > 0 ? FormatVersion(driver) : std::string("none"));

    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      IgnoreCudaError(error);
      status_ = UnavailableError(std::string("no usable GPU: cudaGetDeviceCount: ") +
                                 cudaGetErrorString(error) + " (" + cudaGetErrorName(error) +
                                 ")");
      return;
    }
    if (count == 0) {
      status_ = UnavailableError("no usable GPU: the CUDA runtime found no device");
      return;
    }
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp prop;
      const cudaError_t prop_error = cudaGetDeviceProperties(&prop, i);
      if (prop_error != cudaSuccess) {
        status_ = CudaError(prop_error, "cudaGetDeviceProperties(&prop, i)", __FILE__, __LINE__,
                            "GPU " + std::to_string(i));
        devices_.clear();
        return;
      }
      PhysicalDeviceInfo info;
      info.device_type = kDeviceTypeGpu;
      info.index = i;
      info.model = prop.name;
      info.uuid = FormatUuid(prop.uuid);
      char pci[32];
      std::snprintf(pci, sizeof(pci), "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID,
                    prop.pciDeviceID);
      info.pci_bus_id = pci;
      info.total_memory_bytes = prop.totalGlobalMem;
      info.compute_capability_major = prop.major;
      info.compute_capability_minor = prop.minor;
      info.cores = prop.multiProcessorCount;
      devices_.push_back(info);
    }
  }

  std::string device_type() const override { return kDeviceTypeGpu; }
  std::string name() const override { return "CUDA"; }
  Status status() const override { return status_; }
  std::string version() const override { return version_; }
  const std::vector<PhysicalDeviceInfo>& devices() const override { return devices_; }

  StatusOr<MemoryInfo> QueryMemoryInfo(int index) const override {
    ScopedCudaDevice device(index);
    TOWER_RETURN_IF_ERROR(device.status());
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    TOWER_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes),
                               "GPU " + std::to_string(index));
    return MemoryInfo{free_bytes, total_bytes};
  }

  StatusOr<std::unique_ptr<MemorySource>> CreateMemorySource(int index) override {
    return std::unique_ptr<MemorySource>(new CudaMemorySource(index, devices_[index].model));
  }

  StatusOr<std::unique_ptr<DeviceStream>> CreateStream(int index) override {
    TOWER_ASSIGN_OR_RETURN(std::unique_ptr<CudaStream> stream, CudaStream::Create(index));
    return std::unique_ptr<DeviceStream>(std::move(stream));
  }

 private:
  Status status_;
  std::string version_;
  std::vector<PhysicalDeviceInfo> devices_;
};

}  // namespace

std::unique_ptr<Platform> CreateGpuPlatform() { return std::make_unique<CudaPlatform>(); }

bool GpuPlatformCompiledIn() { return true; }

}  // namespace tower
