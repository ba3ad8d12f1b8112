// StepModel: what a model offers the step runner (strategy/step/step_runner.h), and all it
// offers: the runner owns shards, passes, replicas, the gradient reducer and its buckets,
// loss scaling and the numerics checks; the model computes and updates, and knows none of
// them (PyTorch's DDP over a Module, which never sees the Reducer).
//
// A batch's walk crosses the line twice per gradient: down into ForwardBackward (which hands
// each gradient back up to a GradientSink as backward produces it), and down again with its
// sum into Update or UpdateSlice.
#ifndef TOWER_STRATEGY_STEP_STEP_MODEL_H_
#define TOWER_STRATEGY_STEP_STEP_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "device/device.h"
#include "ops/tensor.h"
#include "util/span.h"
#include "util/statusor.h"

namespace tower {

// What one replica computes on its rows of a batch (StepModel::ForwardBackward).
struct ReplicaPass {
  Tensor outputs;                 // [rows, output_dim], on the replica's device
  Tensor loss;                    // [1]: the rows' summed loss / loss_rows (when targets given)
  std::vector<Tensor> gradients;  // in trainable-variable order (when backward)
};

// Where a backward pass hands its gradients, in backward order (last layer first), as they
// are produced: the runner's reducer, which may sum a full bucket while earlier layers are
// still in backward.
class GradientSink {
 public:
  virtual ~GradientSink() = default;
  // Tensors the next `count` gradients (the `first`-th of the pass on, in backward order)
  // are to be added into instead of made anew (running sums of other replicas' gradients,
  // strategy/reducers/gradient_folding.h); empty: make new ones. May wait until they are ready.
  virtual StatusOr<Span<Tensor* const>> AddInto(size_t first, size_t count) = 0;
  // The next gradient, in backward order. The tensor stays the caller's (in ReplicaPass)
  // and must live until the runner's step ends; the runner may sum it in place.
  virtual Status Take(Tensor* gradient) = 0;
};

struct PassOptions {
  // What the loss takes (StepModel::PrepareTargets); nullptr: outputs only.
  const Tensor* targets = nullptr;
  // The loss and gradients are divided by this: the global batch size.
  int64_t loss_rows = 0;
  // The loss's gradient is multiplied by this before backward (loss scaling): the gradients
  // come out scaled; the loss itself does not.
  float loss_scale = 1;
  bool backward = false;
  // With backward: each gradient goes here as backward produces it. nullptr: the gradients
  // are only kept in ReplicaPass::gradients.
  GradientSink* sink = nullptr;
  // Queue the loss's read on its device's stream as soon as it is computed, before backward
  // (DeviceStream::StartRead); the caller finishes it.
  bool start_loss_read = false;
};

// The gradients a backward pass produces, in backward order: their sizes in bytes (what the
// reducer plans buckets by) and, for each, the index of its variable in trainable order
// (where ReplicaPass::gradients holds it).
struct GradientLayout {
  Span<const int64_t> bytes;
  Span<const size_t> variable;
};

class StepModel {
 public:
  virtual ~StepModel() = default;

  // The model's gradients in backward order; fixed once the model is built.
  virtual GradientLayout Gradients() const = 0;

  // Host targets [rows, target_dim] (row-major) as the loss takes them on `device`
  // ([rows, output_dim] or class ids; normalized when the model normalizes its targets).
  // `source_rows` (nullable) names each row's row in the data, for errors about bad values.
  // InvalidArgument naming the row for targets the loss cannot take.
  virtual StatusOr<Tensor> PrepareTargets(Device* device, const float* targets, int64_t rows,
                                          int64_t target_dim,
                                          const int64_t* source_rows) const = 0;

  // Forward over features [rows, input_dim] on local replica `replica`'s copies of the
  // variables: outputs; with options.targets the loss; with options.backward the gradients,
  // each handed to options.sink as it is produced. Errors: a kernel's, or the sink's.
  virtual Status ForwardBackward(int replica, const Tensor& features, const PassOptions& options,
                                 ReplicaPass* pass) = 0;

  // The optimizer's update of local replica `replica`'s copies with summed `gradients` (in
  // trainable order, as ReplicaPass holds them), as update number `iteration` + 1 (clipping
  // included). Where replicas share their variables, `updaters` replicas (0: every local
  // one) each update a slice. Does not advance the step counter.
  virtual Status Update(int replica, int64_t iteration, const std::vector<Tensor>& gradients,
                        int updaters) = 0;

  // Whether the update of step `iteration` can be applied slice by slice as the sums form
  // (UpdateSlice); when true, the step's update is prepared for UpdateSlice. False when the
  // update needs every sum first (global-norm clipping).
  virtual StatusOr<bool> PrepareSliceUpdates(int64_t iteration) = 0;
  // Elements [begin, end) of the sum of gradient `gradient` (backward order), `sum` holding
  // end − begin floats: applied to the shared variables by local replica `replica`. Called
  // concurrently by every replica's thread, each with other elements.
  virtual void UpdateSlice(int replica, size_t gradient, int64_t begin, int64_t end,
                           const float* sum) const = 0;

  // How errors name gradient `gradient` (backward order): "the gradient of layers.1.kernel
  // (layer Dense(16, relu))".
  virtual std::string DescribeGradient(size_t gradient) const = 0;

  // Replicas that share their variables multiply by the same weights during one step:
  // `version` (nonzero, new for each step; 0 after it) lets their products pack each weight
  // once for all of them (ops/cpu/shared_packing.h).
  virtual void SetWeightsVersion(uint64_t version) = 0;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_STEP_STEP_MODEL_H_
