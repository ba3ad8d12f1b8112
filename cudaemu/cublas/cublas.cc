// cuBLAS handles: creation and destruction, stream, math mode and workspace, versions and
// status strings. The handle value is an id, never reused and never dereferenced, so a
// destroyed or made-up handle is always recognised (CUBLAS_STATUS_NOT_INITIALIZED).
#include <cublas_v2.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "cudaemu/cublas/handle.h"
#include "cudaemu/cublas_testing.h"
#include "cudaemu/runtime/internal.h"

namespace cudaemu::cublas {

std::atomic<int64_t> gemm_calls{0};

namespace {

// cuBLAS's default workspace on Hopper (the cuBLAS documentation's table of
// cublasSetWorkspace sizes): what the emulated GPUs (H100s) get.
constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;
constexpr uintptr_t kHandleBase = 0xcb1a5000;

struct Registry {
  std::mutex mu;
  uint64_t next_id = 1;
  std::unordered_map<uintptr_t, std::shared_ptr<Handle>> handles;
};

Registry& TheRegistry() {
  static Registry* const registry = new Registry();  // never destroyed: used at exit
  return *registry;
}

// The default workspace size: CUBLAS_WORKSPACE_CONFIG=:SIZE_KIB:COUNT[:SIZE_KIB:COUNT...]
// when set and well formed (as cuBLAS reads it), else 32 MiB.
size_t DefaultWorkspaceBytes() {
  const char* config = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  if (config == nullptr || *config == '\0') return kDefaultWorkspaceBytes;
  uint64_t total = 0;
  const char* p = config;
  while (*p != '\0') {
    uint64_t pair[2];
    for (uint64_t& value : pair) {
      if (*p != ':') return kDefaultWorkspaceBytes;
      ++p;
      if (*p < '0' || *p > '9') return kDefaultWorkspaceBytes;
      value = 0;
      while (*p >= '0' && *p <= '9') {
        value = value * 10 + static_cast<uint64_t>(*p - '0');
        if (value > (uint64_t{1} << 32)) return kDefaultWorkspaceBytes;
        ++p;
      }
    }
    total += pair[0] * 1024 * pair[1];
    if (total > (uint64_t{1} << 40)) return kDefaultWorkspaceBytes;
  }
  return static_cast<size_t>(total);
}

bool Tf32Allowed() {
  const char* value = std::getenv("NVIDIA_TF32_OVERRIDE");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

bool ValidMathMode(int mode) {
  const int base = mode & ~static_cast<int>(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  return base == CUBLAS_DEFAULT_MATH || base == CUBLAS_TENSOR_OP_MATH ||
         base == CUBLAS_PEDANTIC_MATH || base == CUBLAS_TF32_TENSOR_OP_MATH;
}

}  // namespace

std::shared_ptr<Handle> Lookup(cublasHandle_t handle) {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.handles.find(reinterpret_cast<uintptr_t>(handle));
  return it == registry.handles.end() ? nullptr : it->second;
}

cublasStatus_t Handle::EnsureDefaultWorkspace() {
  if (user_workspace || default_workspace != nullptr || default_workspace_bytes == 0) {
    return CUBLAS_STATUS_SUCCESS;
  }
  void* ptr = nullptr;
  if (internal::AllocateDevice(device, default_workspace_bytes, &ptr) != cudaSuccess) {
    return CUBLAS_STATUS_ALLOC_FAILED;
  }
  default_workspace = ptr;
  return CUBLAS_STATUS_SUCCESS;
}

void Handle::NoteQueued(const std::shared_ptr<internal::Stream>& stream, uint64_t position) {
  bool found = false;
  for (auto it = queued.begin(); it != queued.end();) {
    std::shared_ptr<internal::Stream> other = it->first.lock();
    if (other == stream) {
      it->second = position;
      found = true;
    } else if (other == nullptr || other->Reached(it->second)) {
      it = queued.erase(it);
      continue;
    }
    ++it;
  }
  if (!found) queued.emplace_back(stream, position);
}

}  // namespace cudaemu::cublas

namespace cudaemu::testing {

int64_t CublasLiveHandles() {
  cublas::Registry& registry = cublas::TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  return static_cast<int64_t>(registry.handles.size());
}

uint64_t CublasInternalWorkspaceBytes(int device) {
  cublas::Registry& registry = cublas::TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  uint64_t bytes = 0;
  for (const auto& entry : registry.handles) {
    cublas::Handle& handle = *entry.second;
    std::lock_guard<std::mutex> handle_lock(handle.mu);
    if (handle.device == device && handle.default_workspace != nullptr) {
      bytes += handle.default_workspace_bytes;
    }
  }
  return bytes;
}

int64_t CublasGemmCalls() { return cublas::gemm_calls.load(); }

}  // namespace cudaemu::testing

using cudaemu::cublas::Handle;
using cudaemu::cublas::Lookup;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int device = -1;
  if (cudaemu::internal::CurrentContext(&device) != cudaSuccess ||
      cudaemu::internal::Sticky(device) != cudaSuccess) {
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  auto state = std::make_shared<Handle>(device, cudaemu::cublas::Tf32Allowed(),
                                        cudaemu::cublas::DefaultWorkspaceBytes());
  {
    std::lock_guard<std::mutex> lock(state->mu);
    const cublasStatus_t status = state->EnsureDefaultWorkspace();
    if (status != CUBLAS_STATUS_SUCCESS) return status;
  }
  cudaemu::cublas::Registry& registry = cudaemu::cublas::TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  const uintptr_t id = cudaemu::cublas::kHandleBase + 16 * registry.next_id++;
  registry.handles.emplace(id, std::move(state));
  *handle = reinterpret_cast<cublasHandle_t>(id);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  std::shared_ptr<Handle> state;
  {
    cudaemu::cublas::Registry& registry = cudaemu::cublas::TheRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    auto it = registry.handles.find(reinterpret_cast<uintptr_t>(handle));
    if (it == registry.handles.end()) return CUBLAS_STATUS_NOT_INITIALIZED;
    state = std::move(it->second);
    registry.handles.erase(it);
  }
  std::lock_guard<std::mutex> lock(state->mu);
  state->live = false;
  // cublasDestroy synchronises: the handle's queued work finishes before its resources go.
  for (const auto& [weak_stream, position] : state->queued) {
    if (auto stream = weak_stream.lock()) stream->WaitFor(position);
  }
  state->queued.clear();
  if (state->default_workspace != nullptr) {
    cudaemu::internal::FreeDevice(state->default_workspace);
    state->default_workspace = nullptr;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  // As documented: a NULL `version` is CUBLAS_STATUS_NOT_INITIALIZED; the handle is not used.
  if (version == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                     size_t workspaceSizeInBytes) {
  std::shared_ptr<Handle> state = Lookup(handle);
  if (state == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(state->mu);
  if (!state->live) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (workspaceSizeInBytes > 0 &&
      (workspace == nullptr ||
       cudaemu::internal::DeviceOf(workspace, workspaceSizeInBytes) != state->device)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  state->user_workspace = true;
  state->workspace = workspaceSizeInBytes > 0 ? workspace : nullptr;
  state->workspace_bytes = workspaceSizeInBytes;
  if (state->default_workspace != nullptr) {
    cudaemu::internal::FreeDevice(state->default_workspace);
    state->default_workspace = nullptr;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  std::shared_ptr<Handle> state = Lookup(handle);
  if (state == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(state->mu);
  if (!state->live) return CUBLAS_STATUS_NOT_INITIALIZED;
  state->stream = streamId;
  // "cublasSetStream() unconditionally resets the cuBLAS library workspace back to the
  // default workspace pool": allocated again by the next routine that runs.
  state->user_workspace = false;
  state->workspace = nullptr;
  state->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId) {
  std::shared_ptr<Handle> state = Lookup(handle);
  if (state == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (streamId == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state->mu);
  if (!state->live) return CUBLAS_STATUS_NOT_INITIALIZED;
  *streamId = state->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  std::shared_ptr<Handle> state = Lookup(handle);
  if (state == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state->mu);
  if (!state->live) return CUBLAS_STATUS_NOT_INITIALIZED;
  *mode = state->math;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  std::shared_ptr<Handle> state = Lookup(handle);
  if (state == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!cudaemu::cublas::ValidMathMode(static_cast<int>(mode))) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(state->mu);
  if (!state->live) return CUBLAS_STATUS_NOT_INITIALIZED;
  state->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unrecognized status";
}

// The descriptions libcublas gives.
const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "the function requires an architectural feature absent from the device";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the function failed to launch on the GPU";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the requested functionality is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "the license check failed";
  }
  return "unrecognized status";
}

}  // extern "C"
