// The last example of TensorFlow's GPU guide: replicate a computation by hand on every logical device, then
// add the results up on the CPU.
//
//   for gpu in gpus:
//     with tf.device(gpu.name): c.append(tf.matmul(a, b))
//   with tf.device('/CPU:0'): matmul_sum = tf.add_n(c)
//
// Without a GPU it replicates on logical CPUs (--virtual-cpus, default 2).
#include <iostream>

#include "device/config.h"
#include "device/device_flags.h"
#include "device/placement.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "util/flags.h"

int main(int argc, char** argv) {
  tower::DeviceFlags device_flags;
  tower::FlagParser parser("manual_replication");
  tower::AddDeviceFlags(&parser, &device_flags);
  tower::Status status = parser.Parse(argc, argv, 1);
  if (status.ok() && tower::config::ListPhysicalDevices("GPU").empty() &&
      device_flags.virtual_cpus == 0) {
    device_flags.virtual_cpus = 2;
  }
  if (status.ok()) status = tower::ApplyDeviceFlags(device_flags, tower::Context::Global());
  if (!status.ok() || parser.help_requested()) {
    std::cerr << (status.ok() ? "" : "error: " + status.message() + "\n") << parser.Usage();
    return status.ok() ? 0 : 2;
  }
  tower::config::SetLogDevicePlacement(true);
  auto run = []() -> tower::Status {
    TOWER_ASSIGN_OR_RETURN(std::vector<tower::LogicalDevice> gpus,
                           tower::config::ListLogicalDevices("GPU"));
    if (gpus.empty()) {
      TOWER_ASSIGN_OR_RETURN(gpus, tower::config::ListLogicalDevices("CPU"));
    }
    std::vector<tower::Tensor> c;
    for (const tower::LogicalDevice& gpu : gpus) {
      tower::DeviceScope scope(gpu.name);
      TOWER_ASSIGN_OR_RETURN(tower::Tensor a, tower::ops::Constant({1, 2, 3, 4, 5, 6}, tower::Shape{2, 3}));
      TOWER_ASSIGN_OR_RETURN(tower::Tensor b, tower::ops::Constant({1, 2, 3, 4, 5, 6}, tower::Shape{3, 2}));
      TOWER_ASSIGN_OR_RETURN(tower::Tensor product, tower::ops::MatMul(a, b));
      c.push_back(product);
    }
    tower::DeviceScope scope("/CPU:0");
    TOWER_ASSIGN_OR_RETURN(tower::Tensor matmul_sum, tower::ops::AddN(c));
    std::cout << matmul_sum.DebugString() << "\n";
    return tower::OkStatus();
  };
  status = run();
  if (!status.ok()) {
    std::cerr << "error: " << status << "\n";
    return 1;
  }
  return 0;
}
