// Tensor: a shape, an element type, a logical device, and a reference-counted buffer taken
// from that device's allocator — so device memory limits and statistics apply to tensors.
//
// A Tensor is a cheap value (copying it shares the buffer). Slicing rows of a batch gives a
// view into the same buffer (how a global batch becomes per-replica shards without copies).
// Data lives on the device: on a GPU it is device memory, so read it with ToHost().
#ifndef TOWER_OPS_TENSOR_H_
#define TOWER_OPS_TENSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/device.h"
#include "ops/dtype.h"
#include "ops/shape.h"
#include "util/statusor.h"

namespace tower {

// One allocation on one device, returned to the device's allocator when the last tensor
// using it goes away.
class TensorBuffer {
 public:
  static StatusOr<std::shared_ptr<TensorBuffer>> Allocate(Device* device, size_t bytes);
  // `owner`'s memory under reference counts of its own, on cache lines no other record
  // uses: the memory is freed when the last handle of either goes away.
  static std::shared_ptr<TensorBuffer> Alias(std::shared_ptr<TensorBuffer> owner);
  ~TensorBuffer();
  TensorBuffer(const TensorBuffer&) = delete;
  TensorBuffer& operator=(const TensorBuffer&) = delete;

  Device* device() const { return device_; }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // The buffer that owns the memory: this one, or an alias's owner.
  const TensorBuffer* root() const { return owner_ != nullptr ? owner_.get() : this; }

  // Only Allocate can make one (a key only it can name), through std::make_shared: the
  // buffer and its reference counts in one heap allocation.
  class Key {
    Key() = default;
    friend class TensorBuffer;
  };
  TensorBuffer(Key, Device* device, void* data, size_t bytes)
      : device_(device), data_(data), bytes_(bytes) {}
  // An alias of an alias holds the owner itself: no chains.
  TensorBuffer(Key, std::shared_ptr<TensorBuffer> owner)
      : device_(owner->device_), data_(owner->data_), bytes_(owner->bytes_),
        owner_(owner->owner_ != nullptr ? owner->owner_ : std::move(owner)) {}

 private:
  Device* const device_;
  void* const data_;
  const size_t bytes_;
  const std::shared_ptr<TensorBuffer> owner_;  // set for an alias: it frees nothing itself
};

class Tensor {
 public:
  // An empty handle: valid() is false.
  Tensor() = default;

  // Uninitialised memory on `device`. Fails with the allocator's ResourceExhausted.
  static StatusOr<Tensor> Empty(Device* device, const Shape& shape,
                                DType dtype = DType::kFloat32);
  static StatusOr<Tensor> Zeros(Device* device, const Shape& shape,
                                DType dtype = DType::kFloat32);
  // Copies host values onto `device`; their count must match the shape.
  static StatusOr<Tensor> FromHost(Device* device, const Shape& shape,
                                   const std::vector<float>& values);
  // int32 values (class labels); a separate name, so that FromHost(d, s, {1, 2}) is floats.
  static StatusOr<Tensor> FromHostInt32(Device* device, const Shape& shape,
                                        const std::vector<int32_t>& values);
  // Raw bytes of `dtype` elements (num_elements × DTypeSize).
  static StatusOr<Tensor> FromHostBytes(Device* device, const Shape& shape, DType dtype,
                                        const void* bytes);

  bool valid() const { return buffer_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device* device() const { return buffer_ ? buffer_->device() : nullptr; }
  int64_t num_elements() const { return shape_.num_elements(); }
  size_t bytes() const { return static_cast<size_t>(num_elements()) * DTypeSize(dtype_); }

  // Device addresses (host-addressable only on CPU devices).
  void* raw_data() const { return buffer_ ? static_cast<char*>(buffer_->data()) + offset_ : nullptr; }
  template <typename T>
  T* data() const {
    TOWER_CHECK(DTypeOf<T>::value == dtype_) << "data<" << DTypeName(DTypeOf<T>::value)
                                              << ">() of a " << DTypeName(dtype_) << " tensor";
    return static_cast<T*>(raw_data());
  }

  // The values, on the host (waits for pending work on the device).
  StatusOr<std::vector<float>> ToHost() const;          // float32 tensors
  StatusOr<std::vector<int32_t>> ToHostInt32() const;   // int32 tensors
  Status ToHostBytes(void* out) const;                  // bytes() bytes

  // A copy on `device` (any two logical devices: CPU↔GPU, GPU↔GPU, two on one card).
  StatusOr<Tensor> CopyTo(Device* device) const;
  // Overwrites this tensor's values with `source`'s (same shape and dtype, any device).
  Status CopyFrom(const Tensor& source);

  // The same tensor (memory, device, shape) through a handle whose reference counts live
  // apart from every other handle's, on cache lines of their own. Copying a Tensor changes
  // its counts atomically: replicas on several cores that share one variable each take
  // theirs from a handle of their own, so that no count's cache line moves between the
  // cores at every op. (Made once per variable and replica: one heap allocation.)
  Tensor WithOwnCounts() const;

  // Rows [begin, end) of the first dimension: a view sharing this buffer.
  StatusOr<Tensor> Slice(int64_t begin, int64_t end) const;
  // The same values with another shape of as many elements: a view.
  StatusOr<Tensor> Reshape(const Shape& shape) const;

  // Whether both handles change the same reference counts (copies and views of one handle
  // do; WithOwnCounts handles do not).
  bool SharesCountsWith(const Tensor& other) const { return buffer_ && buffer_ == other.buffer_; }
  // Whether both use one allocation (views, copies, WithOwnCounts handles).
  bool SharesBufferWith(const Tensor& other) const {
    return buffer_ && other.buffer_ && buffer_->root() == other.buffer_->root();
  }

  // TensorFlow's print form:
  //   tower.Tensor(
  //   [[22. 28.]
  //    [49. 64.]], shape=(2, 2), dtype=float32)
  std::string DebugString() const;
  // Just the values, numpy style: "[[22. 28.]\n [49. 64.]]". At most `max_elements` shown.
  std::string ValuesString(int64_t max_elements = 1000) const;

 private:
  Tensor(std::shared_ptr<TensorBuffer> buffer, size_t offset, const Shape& shape, DType dtype)
      : buffer_(std::move(buffer)), offset_(offset), shape_(shape), dtype_(dtype) {}

  std::shared_ptr<TensorBuffer> buffer_;
  size_t offset_ = 0;  // bytes into the buffer (views)
  Shape shape_;
  DType dtype_ = DType::kFloat32;
};

// "InvalidArgument: <op>: <what> shapes [2, 3] and [3, 2] ..." helpers for ops.
Status ShapeError(std::string_view op, std::string_view what, const Shape& a, const Shape& b);
Status CheckDType(std::string_view op, std::string_view input, const Tensor& t, DType want);

}  // namespace tower

#endif  // TOWER_OPS_TENSOR_H_
