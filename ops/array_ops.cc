#include "ops/array_ops.h"

#include "device/placement.h"
#include "ops/eager.h"
#include "ops/op_attrs.h"
#include "ops/op_checks.h"
#include "ops/op_names.h"

namespace tower::ops {
namespace {

// A constant can live on any device.
class AnyDevice : public KernelSupport {
 public:
  bool HasKernelFor(const Device&) const override { return true; }
  std::string DescribeKernels() const override { return "every device"; }
};

StatusOr<Device*> PlaceConstant(Device* device) {
  static const AnyDevice kAnyDevice;
  if (device != nullptr) {
    LogPlacement(*device->context(), op_names::kEagerConst, *device);
    return device;
  }
  return PlaceOp(Context::Default(), op_names::kEagerConst, kAnyDevice, nullptr);
}

}  // namespace

StatusOr<Tensor> Constant(const std::vector<float>& values, const Shape& shape, Device* device) {
  TOWER_ASSIGN_OR_RETURN(device, PlaceConstant(device));
  return Tensor::FromHost(device, shape, values);
}

StatusOr<Tensor> ConstantInt32(const std::vector<int32_t>& values, const Shape& shape,
                               Device* device) {
  TOWER_ASSIGN_OR_RETURN(device, PlaceConstant(device));
  return Tensor::FromHostInt32(device, shape, values);
}

StatusOr<Tensor> Fill(const Shape& shape, float value, Device* device) {
  static const OpKernels& kOp = KernelsOf(op_names::kFill);
  const attrs::Scalar attrs{value};
  RunOptions options;
  options.pinned = device;
  return RunSingle(kOp, {}, OutputSpec{shape}, &attrs, options);
}

StatusOr<Tensor> Zeros(const Shape& shape, Device* device) { return Fill(shape, 0.0f, device); }

StatusOr<Tensor> Cast(const Tensor& x, DType to) {
  static const OpKernels& kOp = KernelsOf(op_names::kCast);
  TOWER_RETURN_IF_ERROR(internal::CheckValid("Cast", "x", x));
  const attrs::Cast attrs{to};
  return RunSingle(kOp, {&x}, OutputSpec{x.shape(), to}, &attrs);
}

std::vector<int64_t> EvenSplitSizes(int64_t rows, int64_t parts) {
  std::vector<int64_t> sizes(static_cast<size_t>(parts), rows / parts);
  for (int64_t i = 0; i < rows % parts; ++i) sizes[i] += 1;
  return sizes;
}

StatusOr<std::vector<Tensor>> Split(const Tensor& x, const std::vector<int64_t>& sizes) {
  TOWER_RETURN_IF_ERROR(internal::CheckValid("Split", "x", x));
  if (x.shape().rank() < 1) {
    return InvalidArgumentError("Split: a scalar has no rows to split");
  }
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0) return InvalidArgumentError("Split: negative size " + std::to_string(size));
    total += size;
  }
  if (total != x.shape().dim(0)) {
    return InvalidArgumentError("Split: sizes add up to " + std::to_string(total) +
                                " but x " + x.shape().ToString() + " has " +
                                std::to_string(x.shape().dim(0)) + " rows");
  }
  std::vector<Tensor> pieces;
  pieces.reserve(sizes.size());
  int64_t begin = 0;
  for (int64_t size : sizes) {
    TOWER_ASSIGN_OR_RETURN(Tensor piece, x.Slice(begin, begin + size));
    pieces.push_back(std::move(piece));
    begin += size;
  }
  return pieces;
}

StatusOr<std::vector<Tensor>> SplitEvenly(const Tensor& x, int64_t parts) {
  if (parts <= 0) {
    return InvalidArgumentError("SplitEvenly: parts must be positive, got " +
                                std::to_string(parts));
  }
  TOWER_RETURN_IF_ERROR(internal::CheckValid("SplitEvenly", "x", x));
  if (x.shape().rank() < 1) return InvalidArgumentError("SplitEvenly: a scalar has no rows");
  return Split(x, EvenSplitSizes(x.shape().dim(0), parts));
}

StatusOr<Tensor> Concat(const std::vector<Tensor>& inputs) {
  static const OpKernels& kOp = KernelsOf(op_names::kConcat);
  if (inputs.empty()) return InvalidArgumentError("Concat: needs at least one input");
  std::vector<const Tensor*> pointers;
  int64_t rows = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    TOWER_RETURN_IF_ERROR(internal::CheckValid("Concat", "input " + std::to_string(i), t));
    if (t.shape().rank() < 1 || t.shape().rank() != inputs[0].shape().rank() ||
        t.shape().WithFirstDim(0) != inputs[0].shape().WithFirstDim(0)) {
      return ShapeError("Concat", "input " + std::to_string(i) +
                                      " does not match input 0 outside the first dimension:",
                        inputs[0].shape(), t.shape());
    }
    if (t.dtype() != inputs[0].dtype()) {
      return InvalidArgumentError("Concat: input " + std::to_string(i) + " is " +
                                  std::string(DTypeName(t.dtype())) + ", input 0 is " +
                                  std::string(DTypeName(inputs[0].dtype())));
    }
    rows += t.shape().dim(0);
    pointers.push_back(&t);
  }
  return RunSingle(kOp, pointers,
                   OutputSpec{inputs[0].shape().WithFirstDim(rows), inputs[0].dtype()});
}

}  // namespace tower::ops
