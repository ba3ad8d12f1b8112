// Placement: which logical device an op runs on.
//
//   {
//     tower::DeviceScope scope("/CPU:0");   // TensorFlow's `with tf.device('/CPU:0'):`
//     auto c = tower::ops::MatMul(a, b);    // runs on CPU:0
//   }
//
// The rules, in order:
//   1. A DeviceScope on this thread names the device. It must exist — an unknown one is
//      NotFound "/job:localhost/replica:0/task:0/device:GPU:2 unknown device" — unless soft
//      placement is on, which picks another device of that type, else CPU:0.
//   2. Without a scope: the inputs' device when it is a GPU (a replica's tensors stay on
//      its GPU); else the first GPU, as TensorFlow does (TensorFlow's guide example: a and b on
//      CPU:0, MatMul on GPU:0, inputs copied); else the inputs' logical CPU; else CPU:0.
//   3. An op with no kernel for the chosen device's type runs on CPU:0 instead (as Cast has
//      only a CPU kernel in TensorFlow's guide example); inputs are copied there.
//   4. With SetLogDevicePlacement(true), each placement is logged exactly as TensorFlow does:
//      "Executing op MatMul in device /job:localhost/replica:0/task:0/device:GPU:0".
#ifndef TOWER_DEVICE_PLACEMENT_H_
#define TOWER_DEVICE_PLACEMENT_H_

#include <string>
#include <string_view>
#include <vector>

#include "device/context.h"
#include "device/device_name.h"

namespace tower {

// Requests a device for ops created on this thread while the scope lives. Scopes nest;
// an inner scope overrides the components it names ("/job:localhost" then "/GPU:1" gives
// "/job:localhost/device:GPU:1"). An empty spec requests nothing. A malformed spec does
// not abort: status() has the error, and every op placed under the scope fails with it.
class DeviceScope {
 public:
  explicit DeviceScope(std::string_view spec);
  // A name already parsed (a device's own: nothing to parse, no allocation).
  explicit DeviceScope(const DeviceName& name);
  // The scope of `device`'s own name, already resolved to it in its context: what a
  // replica's step runs under, so that its first op does not look the device up by name
  // (comparing the names of every device: a visible share of a small step of 8 replicas).
  explicit DeviceScope(Device& device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

  const Status& status() const { return status_; }

  // The merged request of this thread's scopes (an empty spec when there are none), or the
  // parse error of a malformed scope.
  static StatusOr<DeviceName> Current();
  // The device of `context` the scopes request (nullptr when they request nothing), as
  // Context::FindDevice finds it, soft placement included. Remembered in the innermost
  // scope after its first exact answer: the ops of a replica's step, each under its
  // device's scope, do not look the device up by name again.
  static StatusOr<Device*> CurrentDevice(Context& context);

 private:
  // `resolved`: the device `name` names, when the caller knows it (nullptr: found on first
  // use).
  void Enter(const StatusOr<DeviceName>& name, Device* resolved = nullptr);
  Status status_;
};

// What placement needs to know about an op's kernels (the kernel registry answers).
class KernelSupport {
 public:
  virtual ~KernelSupport() = default;
  virtual bool HasKernelFor(const Device& device) const = 0;
  // For errors: the device types that have a kernel, e.g. "CPU, GPU".
  virtual std::string DescribeKernels() const = 0;
};

// Chooses the device for `op`. `input_device` is the device of the op's inputs (nullptr
// when it has none).
StatusOr<Device*> PlaceOp(Context& context, std::string_view op, const KernelSupport& kernels,
                          Device* input_device);

// "Executing op MatMul in device /job:localhost/replica:0/task:0/device:GPU:0", written to
// the log when the context's placement logging is on.
void LogPlacement(const Context& context, std::string_view op, const Device& device);

}  // namespace tower

#endif  // TOWER_DEVICE_PLACEMENT_H_
