#include "ops/tensor.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include "util/cache_line.h"
#include "util/node_pool.h"
#include "util/strings.h"

namespace tower {

StatusOr<std::shared_ptr<TensorBuffer>> TensorBuffer::Allocate(Device* device, size_t bytes) {
  TOWER_CHECK(device != nullptr) << "TensorBuffer::Allocate on a null device";
  TOWER_ASSIGN_OR_RETURN(void* data, device->allocator().Allocate(bytes));
  // The buffer and its reference counts in one record from the device allocator's node
  // pool: no malloc per tensor.
  return std::allocate_shared<TensorBuffer>(
      PoolAllocator<TensorBuffer, BfcAllocator>(&device->allocator()), Key(), device, data,
      bytes);
}


std::shared_ptr<TensorBuffer> TensorBuffer::Alias(std::shared_ptr<TensorBuffer> owner) {
  TOWER_CHECK(owner != nullptr) << "TensorBuffer::Alias of nothing";
  return std::allocate_shared<TensorBuffer>(CacheLineAllocator<TensorBuffer>(), Key(),
                                            std::move(owner));
}

TensorBuffer::~TensorBuffer() {
  if (owner_ == nullptr) device_->allocator().Deallocate(data_);
}

Status ShapeError(std::string_view op, std::string_view what, const Shape& a, const Shape& b) {
  return InvalidArgumentError(std::string(op) + ": " + std::string(what) + " " + a.ToString() +
                              " and " + b.ToString());
}

Status CheckDType(std::string_view op, std::string_view input, const Tensor& t, DType want) {
  if (t.dtype() == want) return OkStatus();
  return InvalidArgumentError(std::string(op) + ": " + std::string(input) + " must be " +
                              std::string(DTypeName(want)) + ", got " +
                              std::string(DTypeName(t.dtype())) + " (use Cast)");
}

StatusOr<Tensor> Tensor::Empty(Device* device, const Shape& shape, DType dtype) {
  if (device == nullptr) return InvalidArgumentError("Tensor::Empty: no device given");
  const size_t bytes = static_cast<size_t>(shape.num_elements()) * DTypeSize(dtype);
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<TensorBuffer> buffer,
                         TensorBuffer::Allocate(device, bytes));
  // A tensor of zero elements still holds a (null) buffer, so it knows its device.
  return Tensor(std::move(buffer), 0, shape, dtype);
}

StatusOr<Tensor> Tensor::Zeros(Device* device, const Shape& shape, DType dtype) {
  TOWER_ASSIGN_OR_RETURN(Tensor tensor, Empty(device, shape, dtype));
  TOWER_RETURN_IF_ERROR(device->stream().Zero(tensor.raw_data(), tensor.bytes()));
  return tensor;
}

StatusOr<Tensor> Tensor::FromHostBytes(Device* device, const Shape& shape, DType dtype,
                                       const void* bytes) {
  TOWER_ASSIGN_OR_RETURN(Tensor tensor, Empty(device, shape, dtype));
  TOWER_RETURN_IF_ERROR(device->stream().CopyFromHost(tensor.raw_data(), bytes, tensor.bytes()));
  return tensor;
}

StatusOr<Tensor> Tensor::FromHost(Device* device, const Shape& shape,
                                  const std::vector<float>& values) {
  if (static_cast<int64_t>(values.size()) != shape.num_elements()) {
    return InvalidArgumentError("Tensor::FromHost: " + std::to_string(values.size()) +
                                " values for shape " + shape.ToString() + " (" +
                                std::to_string(shape.num_elements()) + " elements)");
  }
  return FromHostBytes(device, shape, DType::kFloat32, values.data());
}

StatusOr<Tensor> Tensor::FromHostInt32(Device* device, const Shape& shape,
                                       const std::vector<int32_t>& values) {
  if (static_cast<int64_t>(values.size()) != shape.num_elements()) {
    return InvalidArgumentError("Tensor::FromHost: " + std::to_string(values.size()) +
                                " values for shape " + shape.ToString() + " (" +
                                std::to_string(shape.num_elements()) + " elements)");
  }
  return FromHostBytes(device, shape, DType::kInt32, values.data());
}

Status Tensor::ToHostBytes(void* out) const {
  if (!valid()) return FailedPreconditionError("ToHost of an empty Tensor handle");
  return device()->stream().CopyToHost(out, raw_data(), bytes());
}

StatusOr<std::vector<float>> Tensor::ToHost() const {
  if (valid()) TOWER_RETURN_IF_ERROR(CheckDType("ToHost", "the tensor", *this, DType::kFloat32));
  std::vector<float> values(static_cast<size_t>(num_elements()));
  TOWER_RETURN_IF_ERROR(ToHostBytes(values.data()));
  return values;
}

StatusOr<std::vector<int32_t>> Tensor::ToHostInt32() const {
  if (valid()) TOWER_RETURN_IF_ERROR(CheckDType("ToHostInt32", "the tensor", *this, DType::kInt32));
  std::vector<int32_t> values(static_cast<size_t>(num_elements()));
  TOWER_RETURN_IF_ERROR(ToHostBytes(values.data()));
  return values;
}

StatusOr<Tensor> Tensor::CopyTo(Device* device) const {
  if (!valid()) return FailedPreconditionError("CopyTo of an empty Tensor handle");
  TOWER_ASSIGN_OR_RETURN(Tensor copy, Empty(device, shape_, dtype_));
  TOWER_RETURN_IF_ERROR(copy.CopyFrom(*this));
  return copy;
}

Status Tensor::CopyFrom(const Tensor& source) {
  if (!valid() || !source.valid()) return FailedPreconditionError("CopyFrom with an empty Tensor handle");
  if (source.shape_ != shape_) return ShapeError("CopyFrom", "shapes differ:", source.shape_, shape_);
  if (source.dtype_ != dtype_) {
    return InvalidArgumentError("CopyFrom: dtypes differ: " + std::string(DTypeName(source.dtype_)) +
                                " and " + std::string(DTypeName(dtype_)));
  }
  if (source.device() == device()) {
    return device()->stream().CopyWithinDevice(raw_data(), source.raw_data(), bytes());
  }
  return device()->stream().CopyFromPeer(raw_data(), source.device()->stream(),
                                         source.raw_data(), bytes());
}

Tensor Tensor::WithOwnCounts() const {
  if (buffer_ == nullptr) return Tensor();
  return Tensor(TensorBuffer::Alias(buffer_), offset_, shape_, dtype_);
}

StatusOr<Tensor> Tensor::Slice(int64_t begin, int64_t end) const {
  if (!valid()) return FailedPreconditionError("Slice of an empty Tensor handle");
  if (shape_.rank() == 0) return InvalidArgumentError("Slice: a scalar has no rows to slice");
  if (begin < 0 || end < begin || end > shape_.dim(0)) {
    return InvalidArgumentError("Slice: rows [" + std::to_string(begin) + ", " +
                                std::to_string(end) + ") out of range for shape " +
                                shape_.ToString());
  }
  const size_t row_bytes = static_cast<size_t>(shape_.row_size()) * DTypeSize(dtype_);
  return Tensor(buffer_, offset_ + static_cast<size_t>(begin) * row_bytes,
                shape_.WithFirstDim(end - begin), dtype_);
}

StatusOr<Tensor> Tensor::Reshape(const Shape& shape) const {
  if (!valid()) return FailedPreconditionError("Reshape of an empty Tensor handle");
  if (shape.num_elements() != num_elements()) {
    return ShapeError("Reshape", "element counts differ between", shape_, shape);
  }
  return Tensor(buffer_, offset_, shape, dtype_);
}

namespace {

// numpy's layout (float32, the default print options): each value with the fewest digits
// that identify it (at most 8 significant), padded so that the decimal points line up;
// integral values print as "22."; magnitudes >= 1e16, or a smallest nonzero < 1e-4, switch
// to scientific notation with a common number of mantissa digits.
std::string Shortest(double value, bool scientific, int* digits) {
  char text[64];
  for (int p = 0; p <= 8; ++p) {
    std::snprintf(text, sizeof(text), scientific ? "%.*e" : "%.*f", p, value);
    if (static_cast<float>(std::strtod(text, nullptr)) == static_cast<float>(value)) {
      *digits = p;
      return text;
    }
  }
  *digits = 8;
  return text;
}

std::vector<std::string> FormatFloats(const std::vector<double>& values) {
  double max_abs = 0;
  double min_abs = INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    max_abs = std::max(max_abs, std::fabs(v));
    if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
  }
  const bool scientific = max_abs >= 1e16 || (min_abs < 1e-4 && max_abs > 0);
  int common = 0;
  std::vector<int> digits(values.size(), 0);
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) Shortest(values[i], scientific, &digits[i]);
    common = std::max(common, digits[i]);
  }
  std::vector<std::string> items;
  size_t width = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    std::string text;
    char buffer[64];
    if (std::isnan(v)) {
      text = "nan";
    } else if (std::isinf(v)) {
      text = v > 0 ? "inf" : "-inf";
    } else if (scientific) {
      // Mantissas padded with zeros to the common digits: "1.5e+00 1.0e-05".
      std::snprintf(buffer, sizeof(buffer), "%.*e", common, v);
      text = buffer;
      if (common == 0) text.insert(text.find('e'), ".");
    } else {
      // Shortest digits, then spaces where the others have more: "0.5 ", "1.25", "-2.  ".
      std::snprintf(buffer, sizeof(buffer), "%.*f", digits[i], v);
      text = buffer;
      if (digits[i] == 0) text += ".";
      text.append(static_cast<size_t>(common - digits[i]), ' ');
    }
    width = std::max(width, text.size());
    items.push_back(std::move(text));
  }
  for (std::string& item : items) item.insert(0, width - item.size(), ' ');
  return items;
}

void AppendNested(const std::vector<std::string>& items, const Shape& shape, int axis,
                  int64_t* index, std::string* out) {
  out->push_back('[');
  const int64_t n = shape.dim(axis);
  for (int64_t i = 0; i < n; ++i) {
    if (axis + 1 == shape.rank()) {
      if (i > 0) out->push_back(' ');
      *out += items[(*index)++];
    } else {
      if (i > 0) {
        // A newline per level below this one, then indentation to the nesting depth.
        out->append(static_cast<size_t>(shape.rank() - axis - 1), '\n');
        out->append(static_cast<size_t>(axis + 1), ' ');
      }
      AppendNested(items, shape, axis + 1, index, out);
    }
  }
  out->push_back(']');
}

}  // namespace

std::string Tensor::ValuesString(int64_t max_elements) const {
  if (!valid()) return "<empty handle>";
  const int64_t n = num_elements();
  if (n > max_elements) return "<" + std::to_string(n) + " values>";
  std::vector<double> values(static_cast<size_t>(n));
  std::vector<char> raw(bytes());
  Status status = ToHostBytes(raw.data());
  if (!status.ok()) return "<" + status.ToString() + ">";
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype_) {
      case DType::kFloat32: values[i] = reinterpret_cast<const float*>(raw.data())[i]; break;
      case DType::kInt32: values[i] = reinterpret_cast<const int32_t*>(raw.data())[i]; break;
      case DType::kFloat16:
        values[i] = Float16ToFloat(reinterpret_cast<const uint16_t*>(raw.data())[i]);
        break;
      case DType::kBFloat16:
        values[i] = BFloat16ToFloat(reinterpret_cast<const uint16_t*>(raw.data())[i]);
        break;
    }
  }
  std::vector<std::string> items;
  items.reserve(values.size());
  if (dtype_ == DType::kInt32) {
    size_t width = 0;
    for (double v : values) width = std::max(width, std::to_string(static_cast<int64_t>(v)).size());
    for (double v : values) {
      std::string text = std::to_string(static_cast<int64_t>(v));
      items.push_back(std::string(width - text.size(), ' ') + text);
    }
  } else {
    items = FormatFloats(values);
  }
  if (shape_.rank() == 0) return items.empty() ? "" : items[0];
  std::string out;
  int64_t index = 0;
  AppendNested(items, shape_, 0, &index, &out);
  return out;
}

std::string Tensor::DebugString() const {
  return "tower.Tensor(\n" + ValuesString() + ", shape=" + shape_.ToTupleString() +
         ", dtype=" + std::string(DTypeName(dtype_)) + ")";
}

}  // namespace tower
