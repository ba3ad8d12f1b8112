// Variable: a named, trainable (or not) tensor of a model, with one copy per replica.
//
// Under a distribution of N replicas, copy r lives on replica r's device. The copies start
// bitwise identical (same deterministic initializer, or a broadcast) and stay identical,
// because every replica applies the same all-reduced gradient.
//
// Replicas that share host memory may instead share one copy (Distribution::
// ReplicasShareVariables): value(r) is then the same memory for every r (each replica's
// handle with reference counts of its own: SharedCopies), and the optimizer updates it
// once per step, each replica its own slice (model/optimizer.h).
#ifndef TOWER_MODEL_VARIABLE_H_
#define TOWER_MODEL_VARIABLE_H_

#include <string>
#include <vector>

#include "ops/tensor.h"

namespace tower {

class Variable {
 public:
  // `copies` holds one tensor per replica, all of one shape and dtype: distinct tensors, or
  // one tensor repeated (shared by the replicas).
  Variable(std::string name, std::vector<Tensor> copies, bool trainable = true);

  // The copies of a variable whose `replicas` replicas share `value`: replica 0's handle is
  // `value`, every other replica's a Tensor::WithOwnCounts handle to it (copying a shared
  // handle at each op on several cores would move its count's cache line between them).
  static std::vector<Tensor> SharedCopies(const Tensor& value, int replicas);

  // "layers.0.kernel": also its name in checkpoints.
  const std::string& name() const { return name_; }
  bool trainable() const { return trainable_; }
  const Shape& shape() const { return copies_.front().shape(); }
  DType dtype() const { return copies_.front().dtype(); }
  int num_replicas() const { return static_cast<int>(copies_.size()); }
  // Whether the replicas (more than one) share one copy.
  bool shared() const { return shared_; }

  // Replica r's copy, on its device.
  Tensor& value(int replica = 0) { return copies_[replica]; }
  const Tensor& value(int replica = 0) const { return copies_[replica]; }

  // Replica 0's values on the host.
  StatusOr<std::vector<float>> Read() const;
  // Sets every replica's copy to `values` (row-major, as many as the shape has elements).
  Status Assign(const std::vector<float>& values);

 private:
  std::string name_;
  std::vector<Tensor> copies_;
  bool trainable_;
  bool shared_ = false;
};

}  // namespace tower

#endif  // TOWER_MODEL_VARIABLE_H_
