// The emulated machine (CUDAEMU_GPUS, CUDA_VISIBLE_DEVICES, CUDAEMU_NO_DRIVER), primary
// contexts, the calling thread's current device, and the device-level API.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cudaemu/runtime/core.h"
#include "cudaemu/testing.h"

namespace cudaemu::internal {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

struct Machine {
  cudaError_t driver_error = cudaSuccess;  // cudaErrorInsufficientDriver, cudaErrorNoDevice
  std::vector<std::unique_ptr<DeviceState>> devices;  // visible devices, in CUDA order
};

// FNV-1a, for UUIDs that are stable per host and physical index.
uint64_t Hash(const std::string& text, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string HostId() {
  const char* id = std::getenv("CUDAEMU_HOST_ID");
  if (id != nullptr && id[0] != '\0') return id;
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

void FillUuid(DeviceState& device, const std::string& host) {
  const uint64_t a = Hash(host + "/gpu/" + std::to_string(device.physical_index), 1);
  const uint64_t b = Hash(host + "/gpu/" + std::to_string(device.physical_index), 2);
  for (int i = 0; i < 8; ++i) {
    device.uuid_bytes[i] = static_cast<unsigned char>(a >> (8 * i));
    device.uuid_bytes[8 + i] = static_cast<unsigned char>(b >> (8 * i));
  }
  const unsigned char* u = device.uuid_bytes;
  char text[64];
  std::snprintf(text, sizeof(text),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  device.uuid = text;
}

// CUDAEMU_GPUS: "N" (N GPUs of 16 GiB) or "NxMiB" ("4x8192"); default 2. Anything else is
// reported once and treated as no device.
bool ParseGpus(const char* text, int* count, uint64_t* mib) {
  *count = 2;
  *mib = 16384;
  if (text == nullptr || text[0] == '\0') return true;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  if (end == text || n < 0 || n > 64) return false;
  *count = static_cast<int>(n);
  if (*end == '\0') return true;
  if (*end != 'x') return false;
  const char* m = end + 1;
  const long long memory = std::strtoll(m, &end, 10);
  if (end == m || *end != '\0' || memory <= 0) return false;
  *mib = static_cast<uint64_t>(memory);
  return true;
}

// CUDA_VISIBLE_DEVICES: indices or UUID prefixes, comma separated; the list ends at the
// first entry that names no device, as in CUDA.
std::vector<int> VisibleOrder(int count, const std::vector<std::string>& uuids) {
  std::vector<int> order;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) {
    for (int i = 0; i < count; ++i) order.push_back(i);
    return order;
  }
  std::string list = visible;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos
                                                                      : comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int found = -1;
    if (!item.empty() && item.rfind("GPU-", 0) == 0) {
      for (int i = 0; i < count; ++i) {
        if (uuids[i].rfind(item, 0) == 0) found = i;
      }
    } else if (!item.empty()) {
      char* end = nullptr;
      const long index = std::strtol(item.c_str(), &end, 10);
      if (*end == '\0' && index >= 0 && index < count) found = static_cast<int>(index);
    }
    if (found < 0) break;
    for (int seen : order) {
      if (seen == found) found = -1;
    }
    if (found < 0) break;
    order.push_back(found);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return order;
}

Machine* BuildMachine() {
  auto* machine = new Machine();  // never destroyed: streams may outlive static destructors
  const char* no_driver = std::getenv("CUDAEMU_NO_DRIVER");
  if (no_driver != nullptr && std::strcmp(no_driver, "1") == 0) {
    machine->driver_error = cudaErrorInsufficientDriver;
    return machine;
  }
  int count = 0;
  uint64_t mib = 0;
  if (!ParseGpus(std::getenv("CUDAEMU_GPUS"), &count, &mib)) {
    std::fprintf(stderr,
                 "cudaemu: CUDAEMU_GPUS='%s' is not N or NxMiB (e.g. 2 or 4x8192); no GPUs\n",
                 std::getenv("CUDAEMU_GPUS"));
    count = 0;
  }
  const std::string host = HostId();
  const char* model = std::getenv("CUDAEMU_GPU_NAME");
  std::vector<std::unique_ptr<DeviceState>> physical;
  std::vector<std::string> uuids;
  for (int i = 0; i < count; ++i) {
    auto device = std::make_unique<DeviceState>();
    device->physical_index = i;
    device->name = model != nullptr && model[0] != '\0' ? model : "cudaemu Emulated GPU";
    device->total_bytes = mib * kMiB;
    device->context_bytes =
        static_cast<uint64_t>(EnvInt("CUDAEMU_CONTEXT_MIB", 300)) * kMiB;
    FillUuid(*device, host);
    uuids.push_back(device->uuid);
    physical.push_back(std::move(device));
  }
  for (int index : VisibleOrder(count, uuids)) {
    machine->devices.push_back(std::move(physical[index]));
  }
  for (auto& device : machine->devices) device->peer_access.assign(machine->devices.size(), false);
  if (machine->devices.empty()) machine->driver_error = cudaErrorNoDevice;
  return machine;
}

Machine& GetMachine() {
  static Machine* const machine = BuildMachine();
  return *machine;
}

thread_local int current_device = -1;   // -1: never chosen (cudaGetDevice says 0)
thread_local int current_context = -1;  // the device whose context is current, or -1

int CuCtxGetCurrent(void** context) {
  *context = current_context < 0 ? nullptr : static_cast<void*>(Device(current_context));
  return 0;
}

}  // namespace

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || text[0] == '\0') return fallback;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (*end != '\0') {
    std::fprintf(stderr, "cudaemu: %s='%s' is not an integer; using %lld\n", name, text,
                 static_cast<long long>(fallback));
    return fallback;
  }
  return value;
}

DeviceState* Device(int device) {
  Machine& machine = GetMachine();
  if (device < 0 || device >= static_cast<int>(machine.devices.size())) return nullptr;
  return machine.devices[device].get();
}

cudaError_t DeviceCount(int* count) {
  Machine& machine = GetMachine();
  *count = static_cast<int>(machine.devices.size());
  return machine.driver_error;
}

std::string DeviceUuid(int device) {
  DeviceState* state = Device(device);
  return state == nullptr ? std::string() : state->uuid;
}

cudaError_t EnsureContext(int device) {
  int count = 0;
  const cudaError_t driver = DeviceCount(&count);
  if (driver != cudaSuccess) return driver;
  DeviceState* state = Device(device);
  if (state == nullptr) return cudaErrorInvalidDevice;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    if (!state->context_alive) {
      state->context_alive = true;
      ++state->contexts_created;
    }
  }
  return static_cast<cudaError_t>(state->sticky.load());
}

cudaError_t CurrentContext(int* device) {
  const int d = current_device < 0 ? 0 : current_device;
  const cudaError_t error = EnsureContext(d);
  if (error == cudaErrorInsufficientDriver || error == cudaErrorNoDevice ||
      error == cudaErrorInvalidDevice) {
    return error;
  }
  current_context = d;  // the runtime binds the primary context to the thread
  *device = d;
  return error;
}

int CurrentDeviceOrZero() { return current_device < 0 ? 0 : current_device; }

namespace {
std::atomic<int64_t> host_waits{0};
}  // namespace

void CountHostWait() { ++host_waits; }

bool PeerAccessEnabled(int device, int peer) {
  DeviceState* state = Device(device);
  if (state == nullptr || peer < 0 || peer >= static_cast<int>(state->peer_access.size())) {
    return false;
  }
  std::lock_guard<std::mutex> lock(state->mu);
  return state->peer_access[peer];
}

}  // namespace cudaemu::internal

namespace cudaemu::testing {
int64_t HostWaits() { return internal::host_waits.load(); }

int PrimaryContextsCreated(int device) {
  internal::DeviceState* state = internal::Device(device);
  if (state == nullptr) return 0;
  std::lock_guard<std::mutex> lock(state->mu);
  return state->contexts_created;
}
}  // namespace cudaemu::testing

using namespace cudaemu::internal;  // NOLINT: the C API below is the runtime's surface

extern "C" {

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return Record(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return Record(cudaErrorInvalidValue);
  int count = 0;
  *version = DeviceCount(&count) == cudaErrorInsufficientDriver ? 0 : CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return Record(cudaErrorInvalidValue);
  const cudaError_t error = DeviceCount(count);
  if (error != cudaSuccess) *count = 0;
  return Record(error);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return Record(cudaErrorInvalidValue);
  int count = 0;
  const cudaError_t driver = DeviceCount(&count);
  if (driver != cudaSuccess) return Record(driver);
  DeviceState* state = Device(device);
  if (state == nullptr) return Record(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "%s", state->name.c_str());
  std::memcpy(prop->uuid.bytes, state->uuid_bytes, sizeof(prop->uuid.bytes));
  prop->totalGlobalMem = state->total_bytes;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->pciDomainID = 0;
  prop->pciBusID = 0x10 + state->physical_index;
  prop->pciDeviceID = 0;
  prop->unifiedAddressing = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return Record(cudaErrorInvalidValue);
  int count = 0;
  const cudaError_t driver = DeviceCount(&count);
  if (driver != cudaSuccess) return Record(driver);
  *device = current_device < 0 ? 0 : current_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  const cudaError_t error = EnsureContext(device);
  if (error == cudaErrorInsufficientDriver || error == cudaErrorNoDevice ||
      error == cudaErrorInvalidDevice) {
    return Record(error);
  }
  current_device = device;
  current_context = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  int device = 0;
  const cudaError_t error = CurrentContext(&device);
  if (error != cudaSuccess) return Record(error);
  CountHostWait();
  SynchronizeDevice(device);
  return Record(Sticky(device));
}

cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer_device) {
  if (can_access == nullptr) return Record(cudaErrorInvalidValue);
  int count = 0;
  const cudaError_t driver = DeviceCount(&count);
  if (driver != cudaSuccess) return Record(driver);
  if (Device(device) == nullptr || Device(peer_device) == nullptr) {
    return Record(cudaErrorInvalidDevice);
  }
  *can_access = device != peer_device ? 1 : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer_device, unsigned int flags) {
  int device = 0;
  const cudaError_t error = CurrentContext(&device);
  if (error != cudaSuccess) return Record(error);
  if (flags != 0) return Record(cudaErrorInvalidValue);
  if (Device(peer_device) == nullptr || peer_device == device) {
    return Record(cudaErrorInvalidDevice);
  }
  DeviceState* state = Device(device);
  std::lock_guard<std::mutex> lock(state->mu);
  if (state->peer_access[peer_device]) return Record(cudaErrorPeerAccessAlreadyEnabled);
  state->peer_access[peer_device] = true;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return Record(cudaErrorInvalidValue);
  int device = 0;
  const cudaError_t error = CurrentContext(&device);
  if (error != cudaSuccess) return Record(error);
  DeviceState* state = Device(device);
  const uint64_t used = state->bytes_in_use.load() + state->context_bytes;
  *total_bytes = state->total_bytes;
  *free_bytes = used >= state->total_bytes ? 0 : state->total_bytes - used;
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** function,
                                             unsigned int cuda_version, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status) {
  if (symbol == nullptr || function == nullptr) return Record(cudaErrorInvalidValue);
  int count = 0;
  const cudaError_t driver = DeviceCount(&count);
  if (driver == cudaErrorInsufficientDriver) return Record(driver);
  if (std::strcmp(symbol, "cuCtxGetCurrent") == 0) {
    *function = reinterpret_cast<void*>(&CuCtxGetCurrent);
    if (status != nullptr) *status = cudaDriverEntryPointSuccess;
    return cudaSuccess;
  }
  *function = nullptr;
  if (status != nullptr) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

}  // extern "C"
