// Losses, reduced over the *global* batch: each replica's loss and gradient are divided by
// the global batch size, so the all-reduced (summed) gradient of N replicas equals that of
// one device on the whole batch.
#ifndef TOWER_MODEL_LOSS_H_
#define TOWER_MODEL_LOSS_H_

#include <memory>
#include <string>
#include <string_view>

#include "ops/tensor.h"

namespace tower {

class Loss {
 public:
  virtual ~Loss() = default;
  // Keras's name: "mean_squared_error", "sparse_categorical_crossentropy".
  virtual std::string name() const = 0;
  // Whether a model with `output_dim` outputs can be trained on `target_dim` targets.
  virtual Status CheckShapes(int64_t output_dim, int64_t target_dim) const = 0;
  // Host targets[rows, target_dim] -> what Value/Gradient take, on `device`. For the
  // cross-entropy: int32 class ids, each checked to be an integer in [0, output_dim);
  // `source_rows` (may be null) names the offending row in errors.
  virtual StatusOr<Tensor> PrepareTargets(Device* device, const float* targets, int64_t rows,
                                          int64_t target_dim, int64_t output_dim,
                                          const int64_t* source_rows) const = 0;
  // The loss of these rows / global_batch (a scalar), and its gradient w.r.t. pred.
  virtual StatusOr<Tensor> Value(const Tensor& pred, const Tensor& targets,
                                 int64_t global_batch) const = 0;
  virtual StatusOr<Tensor> Gradient(const Tensor& pred, const Tensor& targets,
                                    int64_t global_batch) const = 0;
};

// Keras's MeanSquaredError: mean over outputs, then over the (global) batch.
std::unique_ptr<Loss> MeanSquaredErrorLoss();
// Keras's SparseCategoricalCrossentropy(from_logits=True): the model outputs logits.
std::unique_ptr<Loss> SparseCategoricalCrossentropyLoss();
// "mse" / "mean_squared_error", "sparse_categorical_crossentropy" / "sparse_ce".
StatusOr<std::unique_ptr<Loss>> LossFromName(std::string_view name);

}  // namespace tower

#endif  // TOWER_MODEL_LOSS_H_
