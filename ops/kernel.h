// A kernel: the code of one op for one kind of device. Kernels get their inputs already on
// their device and their outputs already allocated (shapes checked by the op), run on the
// device's stream, and return a Status for what only they can detect (a CUDA error, a label
// out of range).
#ifndef TOWER_OPS_KERNEL_H_
#define TOWER_OPS_KERNEL_H_

#include "device/device.h"
#include "ops/tensor.h"
#include "util/span.h"
#include "util/status.h"

namespace tower {

struct KernelContext {
  Device* device;
  Span<const Tensor* const> inputs;
  Span<Tensor* const> outputs;
  const void* attrs;  // the op's attribute struct (ops/op_attrs.h), or nullptr

  const Tensor& input(size_t i) const { return *inputs[i]; }
  Tensor& output(size_t i) const { return *outputs[i]; }
  template <typename Attrs>
  const Attrs& attr() const {
    return *static_cast<const Attrs*>(attrs);
  }
};

using KernelFn = Status (*)(const KernelContext& context);

}  // namespace tower

#endif  // TOWER_OPS_KERNEL_H_
