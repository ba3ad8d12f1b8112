// Optimizers: SGD (momentum, Nesterov), Adam and AdamW, as Keras defines them, applied with the
// fused update ops (ops/training_ops.h) on each replica's own copies, or, where the replicas
// share one copy in host memory (Variable::shared), on one slice of it per replica.
//
// Every replica calls Apply with the same all-reduced gradients, so the copies stay equal.
// Slots (velocity, m, v) are variables with one copy per replica (shared when the variable
// is), named for checkpoints "optimizer.<variable>.<slot>"; the step counter is
// `iterations` ("optimizer.iterations").
#ifndef TOWER_MODEL_OPTIMIZER_H_
#define TOWER_MODEL_OPTIMIZER_H_

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "model/learning_rate_schedule.h"
#include "model/variable.h"
#include "ops/op_attrs.h"
#include "util/cache_line.h"

namespace tower {

// Keras's gradient clipping (an optimizer's clipvalue and global_clipnorm), applied to the
// summed gradients, after the all-reduce: every replica clips the same sums alike, so the
// copies stay equal (clipping each replica's own gradient before the sum would not be the
// one-device step). At most one of the two; 0 is off.
struct GradientClipping {
  float clip_value = 0;        // each element into [−clip_value, clip_value]
  float global_clip_norm = 0;  // every gradient · clip / max(‖all gradients‖₂, clip)
};


class Optimizer {
 public:
  // One step's update, checked, with this step's learning rate (and Adam's bias correction)
  // folded in: what the host updates of slices run with.
  using StepAttrs = std::variant<attrs::Sgd, attrs::Adam>;

  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;  // "SGD", "Adam"
  // Creates the slots of `variables` (called once, when the model is built).
  virtual Status Build(const std::vector<Variable*>& variables) = 0;

  // One update of replica `replica`'s copies with `grads` (in `variables` order): update
  // number `iteration` + 1 (the learning rate of `iteration`, Adam's bias correction of
  // `iteration` + 1). Safe to call concurrently for different replicas; every replica of a
  // step passes the same `iteration` (read before the step's all-reduce). A shared variable
  // of n elements is updated by each of its R replicas on elements [n·r/R, n·(r+1)/R)
  // (its gradient must be in host memory): every replica must call Apply, and none may read
  // the variable again before all have. With `updaters` > 0 only replicas 0 … updaters − 1
  // call it, each updating [n·r/updaters, n·(r+1)/updaters) (batched replicas,
  // Distribution::RunOnReplicaBatches; every variable must then be shared). Clipping
  // (SetClipping) applies to `grads` first.
  Status Apply(int replica, int64_t iteration, const std::vector<Variable*>& variables,
               const std::vector<Tensor>& grads, int updaters = 0);

  // The attributes of update number `iteration` + 1; errors on bad hyperparameters.
  virtual StatusOr<StepAttrs> AttrsOf(int64_t iteration) const = 0;
  // Applies `attrs` (from AttrsOf) to elements [begin, end) of the shared variable
  // `variables[variable]` of the last Build, `grad` holding end − begin summed gradients.
  // Concurrent calls on disjoint elements are safe. Same bits as Apply on those elements.
  // `replica` is the replica that runs it: the variables and slots are reached through its
  // own handles (value(replica)), whose reference counts no other replica's core writes.
  virtual void UpdateSlice(int replica, const StepAttrs& attrs, size_t variable,
                           int64_t begin, int64_t end, const float* grad) const = 0;

  // The slot variables, for checkpoints.
  virtual std::vector<Variable*> slots() const = 0;

  // Clipping of the summed gradients from the next update on (checked: finite, ≥ 0, at
  // most one of the two).
  Status SetClipping(const GradientClipping& clipping);
  const GradientClipping& clipping() const { return clipping_; }
  // Whether UpdateSummedSlice may run on each slice of the sums as it forms, inside the
  // all-reduce: not under global-norm clipping, whose scale needs every sum first.
  bool CanUpdateSlicesOfSums() const { return clipping_.global_clip_norm == 0; }
  // UpdateSlice after clipping the slice by value when that is on: what the all-reduce's
  // hand-over calls (`sum` is not modified).
  void UpdateSummedSlice(int replica, const StepAttrs& attrs, size_t variable, int64_t begin,
                         int64_t end, const float* sum) const;
  // The factor global-norm clipping multiplies `grads` by: clip / ‖grads‖₂ when the norm is
  // above the clip, else 1 (and 1 when it is off). The norm is GlobalNorm's: the same sums
  // give the same factor on every replica. A non-finite norm is an error naming the
  // step: scaling by it would write NaN into every weight.
  StatusOr<float> GlobalNormScale(const std::vector<Tensor>& grads, int64_t iteration) const;

  // Updates applied so far; the model advances it once per step (not per replica).
  int64_t iterations() const { return iterations_.value; }
  void set_iterations(int64_t iterations) { iterations_.value = iterations; }
  // The rate for the current iteration, or for `iteration`.
  float learning_rate() const { return learning_rate(iterations_.value); }
  float learning_rate(int64_t iteration) const { return (*schedule_)(iteration); }
  void set_schedule(std::shared_ptr<LearningRateSchedule> schedule) { schedule_ = std::move(schedule); }

 protected:
  explicit Optimizer(float learning_rate) : schedule_(ConstantLearningRate(learning_rate)) {}
  // Zero-filled slot copies like `variable`'s, one per replica (one shared tensor when the
  // variable is shared).
  static StatusOr<std::unique_ptr<Variable>> MakeSlot(const Variable& variable,
                                                      const std::string& slot);
  // Apply's update of one variable's own copy of replica `replica`, with the update ops.
  // `variable` is `variables[index]` of Apply (its slots are the index's).
  virtual Status ApplyToCopy(int replica, int64_t iteration, size_t index, Variable& variable,
                             const Tensor& grad) = 0;

 private:
  std::shared_ptr<LearningRateSchedule> schedule_;
  GradientClipping clipping_;
  // Written by the caller after every step, while the replica that updates the shared
  // variables reads the subclass's fields (its variables, slots, hyperparameters): on a
  // line of its own.
  CacheLinePadded<int64_t> iterations_;
};

// velocity = momentum·velocity − lr·g; var += velocity (Nesterov: var += momentum·velocity − lr·g).
std::unique_ptr<Optimizer> SGD(float learning_rate = 0.01f, float momentum = 0.0f,
                               bool nesterov = false);
std::unique_ptr<Optimizer> Adam(float learning_rate = 0.001f, float beta1 = 0.9f,
                                float beta2 = 0.999f, float epsilon = 1e-7f);
// Keras's AdamW: Adam with decoupled weight decay, var −= lr·weight_decay·var before each
// Adam step (the learning rate of the step, schedules included; every variable decays).
// weight_decay must be ≥ 0 (checked at the first update); 0 is Adam.
std::unique_ptr<Optimizer> AdamW(float learning_rate = 0.001f, float weight_decay = 0.004f,
                                 float beta1 = 0.9f, float beta2 = 0.999f,
                                 float epsilon = 1e-7f);

}  // namespace tower

#endif  // TOWER_MODEL_OPTIMIZER_H_
