#include "ops/cuda/cublas_handle.h"

#include <cuda_runtime_api.h>

#include "device/cuda/cuda_status.h"
#include "ops/cuda/cublas_status.h"

namespace tower {
namespace {

// cuBLAS's own default workspace size: 32 MiB on Hopper and later, 4 MiB before.
size_t WorkspaceBytes(const Device& device) {
  return device.physical().compute_capability_major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
}

class CublasResource : public Device::Resource {
 public:
  CublasResource(Device& device) : device_(device) {}
  ~CublasResource() override {
    ScopedCudaDevice current(device_.physical().index);
    if (handle_ != nullptr) cublasDestroy(handle_);  // waits for the handle's work
    if (workspace_ != nullptr) device_.allocator().Deallocate(workspace_);
  }

  Status Init() {
    const std::string& where = device_.full_name();
    TOWER_CUBLAS_RETURN_IF_ERROR(cublasCreate(&handle_), where);
    // True FP32 products: no TF32 tensor-op math, whatever the library's default becomes.
    TOWER_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), where);
    // Every call of this device runs on its stream: bound once.
    TOWER_CUBLAS_RETURN_IF_ERROR(
        cublasSetStream(handle_, static_cast<cudaStream_t>(device_.stream().native_handle())),
        where);
    const size_t bytes = WorkspaceBytes(device_);
    TOWER_ASSIGN_OR_RETURN(workspace_, device_.allocator().Allocate(bytes));
    TOWER_CUBLAS_RETURN_IF_ERROR(cublasSetWorkspace(handle_, workspace_, bytes), where);
    return OkStatus();
  }

  cublasHandle_t handle() const { return handle_; }

 private:
  Device& device_;
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace

StatusOr<cublasHandle_t> CublasHandleFor(Device& device) {
  TOWER_ASSIGN_OR_RETURN(
      Device::Resource * resource,
      device.GetOrCreateResource("cublas", [&]() -> StatusOr<std::unique_ptr<Device::Resource>> {
        auto made = std::make_unique<CublasResource>(device);
        TOWER_RETURN_IF_ERROR(made->Init());
        return std::unique_ptr<Device::Resource>(std::move(made));
      }));
  return static_cast<CublasResource*>(resource)->handle();
}

}  // namespace tower
