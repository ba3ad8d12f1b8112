// The first program of TensorFlow's GPU guide, in C++: list the devices, ask for memory growth on every GPU,
// look at the logical devices, and see what configuring too late says.
//
//   ./bazelw run //examples:list_devices
//   ./bazelw run //examples:list_devices -- --virtual-cpus=4
//   ./bazelw run --config=cuda //examples:list_devices -- --virtual-gpus=2 --memory-limit=1024
#include <iostream>

#include "device/config.h"
#include "device/device_flags.h"
#include "util/flags.h"
#include "util/strings.h"

int main(int argc, char** argv) {
  tower::DeviceFlags device_flags;
  tower::FlagParser parser("list_devices");
  tower::AddDeviceFlags(&parser, &device_flags);
  tower::Status status = parser.Parse(argc, argv, 1);
  if (!status.ok() || parser.help_requested()) {
    std::cerr << (status.ok() ? "" : "error: " + status.message() + "\n") << parser.Usage();
    return status.ok() ? 0 : 2;
  }

  // gpus = tf.config.list_physical_devices(device_type='GPU')
  const auto gpus = tower::config::ListPhysicalDevices("GPU");
  const auto cpus = tower::config::ListPhysicalDevices("CPU");
  std::cout << "[" << tower::Join(gpus, ", ") << "] [" << tower::Join(cpus, ", ") << "]\n";

  // for gpu in gpus: tf.config.experimental.set_memory_growth(gpu, True)
  for (const auto& gpu : gpus) {
    status = tower::config::SetMemoryGrowth(gpu, true);
    if (!status.ok()) std::cerr << status << "\n";
  }
  status = tower::ApplyDeviceFlags(device_flags, tower::Context::Global());
  if (!status.ok()) {
    std::cerr << "error: " << status.message() << "\n";
    return 2;
  }

  // logical_gpus = tf.config.list_logical_devices('GPU')  (this initialises the runtime)
  auto logical = tower::config::ListLogicalDevices();
  if (!logical.ok()) {
    std::cerr << "error: " << logical.status() << "\n";
    return 1;
  }
  int logical_gpus = 0;
  for (const auto& device : *logical) logical_gpus += device.device_type == "GPU";
  std::cout << gpus.size() << " Physical GPUs, " << logical_gpus << " Logical GPUs\n";
  for (const auto& device : *logical) std::cout << "  " << device << "\n";
  if (gpus.empty()) {
    auto details = tower::Context::Global().GetPlatform("GPU");
    if (details != nullptr) std::cout << "No GPU: " << details->status().message() << "\n";
  }

  // Configuring now is too late, exactly as in TensorFlow.
  status = tower::config::SetLogicalDeviceConfiguration(
      cpus[0], {tower::LogicalDeviceConfiguration{}, tower::LogicalDeviceConfiguration{},
                tower::LogicalDeviceConfiguration{}});
  std::cout << "Configuring after initialization: " << status.message() << "\n";
  return 0;
}
