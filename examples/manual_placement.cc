// The placement walkthrough of TensorFlow's "Use a GPU" guide, in C++, on whatever
// devices this machine has:
//   1. log where ops run;  2. place tensors on the CPU and let MatMul go elsewhere (inputs are
//   copied);  3. an op with only a CPU kernel (Cast) falls back to the CPU;  4. an unknown
//   device is an error, unless soft placement is on.
//
//   ./bazelw run //examples:manual_placement
//   ./bazelw run --config=cuda //examples:manual_placement -- --virtual-gpus=2
#include <iostream>

#include "device/config.h"
#include "device/device_flags.h"
#include "device/placement.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "util/flags.h"

namespace {

using tower::Shape;
using tower::Tensor;

const std::vector<float> kA = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0};
const std::vector<float> kB = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0};

tower::Status Walkthrough() {
  // tf.debugging.set_log_device_placement(True)
  tower::config::SetLogDevicePlacement(true);

  std::cout << "# 1. Placement logging: a, b and MatMul on the default device\n" << std::flush;
  TOWER_ASSIGN_OR_RETURN(Tensor a, tower::ops::Constant(kA, Shape{2, 3}));
  TOWER_ASSIGN_OR_RETURN(Tensor b, tower::ops::Constant(kB, Shape{3, 2}));
  TOWER_ASSIGN_OR_RETURN(Tensor c, tower::ops::MatMul(a, b));
  std::cout << c.DebugString() << "\n\n" << std::flush;

  std::cout << "# 2. Manual placement: a, b on /CPU:0, MatMul where Tower chooses\n"
            << std::flush;
  {
    tower::DeviceScope scope("/CPU:0");  // with tf.device('/CPU:0'):
    TOWER_ASSIGN_OR_RETURN(a, tower::ops::Constant(kA, Shape{2, 3}));
    TOWER_ASSIGN_OR_RETURN(b, tower::ops::Constant(kB, Shape{3, 2}));
  }
  TOWER_ASSIGN_OR_RETURN(c, tower::ops::MatMul(a, b));
  std::cout << c.DebugString() << "\n\n" << std::flush;

  std::cout << "# 3. Cast has only a CPU kernel: asked for on the GPU, it runs on the CPU\n"
            << std::flush;
  {
    tower::DeviceScope scope("/GPU:0");
    tower::config::SetSoftDevicePlacement(true);  // so this also runs without a GPU
    TOWER_ASSIGN_OR_RETURN(Tensor as_int, tower::ops::Cast(c, tower::DType::kInt32));
    tower::config::SetSoftDevicePlacement(false);
    std::cout << as_int.DebugString() << "\n\n" << std::flush;
  }

  std::cout << "# 4. An unknown device\n" << std::flush;
  {
    tower::DeviceScope scope("/device:GPU:2");
    tower::StatusOr<Tensor> missing = tower::ops::Constant(kA, Shape{2, 3});
    std::cout << "RuntimeError: " << missing.status().message() << "\n" << std::flush;
    tower::config::SetSoftDevicePlacement(true);  // tf.config.set_soft_device_placement(True)
    TOWER_ASSIGN_OR_RETURN(a, tower::ops::Constant(kA, Shape{2, 3}));
    TOWER_ASSIGN_OR_RETURN(b, tower::ops::Constant(kB, Shape{3, 2}));
    TOWER_ASSIGN_OR_RETURN(c, tower::ops::MatMul(a, b));
    std::cout << c.DebugString() << "\n" << std::flush;
  }
  return tower::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  tower::DeviceFlags device_flags;
  tower::FlagParser parser("manual_placement");
  tower::AddDeviceFlags(&parser, &device_flags);
  tower::Status status = parser.Parse(argc, argv, 1);
  if (status.ok()) status = tower::ApplyDeviceFlags(device_flags, tower::Context::Global());
  if (!status.ok() || parser.help_requested()) {
    std::cerr << (status.ok() ? "" : "error: " + status.message() + "\n") << parser.Usage();
    return status.ok() ? 0 : 2;
  }
  status = Walkthrough();
  if (!status.ok()) {
    std::cerr << "error: " << status << "\n";
    return 1;
  }
  return 0;
}
