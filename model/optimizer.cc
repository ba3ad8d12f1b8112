#include "model/optimizer.h"

#include <algorithm>
#include <cmath>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/training_ops.h"
#include "strategy/step/numerics.h"

namespace tower {
Status Optimizer::SetClipping(const GradientClipping& clipping) {
  const auto bad = [](float v) { return !std::isfinite(v) || v < 0; };
  if (bad(clipping.clip_value) || bad(clipping.global_clip_norm)) {
    return InvalidArgumentError("gradient clipping: clip value " +
                                std::to_string(clipping.clip_value) + " and global clip norm " +
                                std::to_string(clipping.global_clip_norm) +
                                " must be finite and >= 0 (0: off)");
  }
  if (clipping.clip_value > 0 && clipping.global_clip_norm > 0) {
    return InvalidArgumentError("gradient clipping: set a clip value or a global clip norm, "
                                "not both (Keras allows one)");
  }
  clipping_ = clipping;
  return OkStatus();
}

void Optimizer::UpdateSummedSlice(int replica, const StepAttrs& attrs, size_t variable,
                                  int64_t begin, int64_t end, const float* sum) const {
  if (clipping_.clip_value == 0) {
    UpdateSlice(replica, attrs, variable, begin, end, sum);
    return;
  }
  // Clipped in blocks on the stack (still in L1), never in the sums themselves.
  constexpr int64_t kBlock = 2048;
  float clipped[kBlock];
  const attrs::ClipByValue clip{-clipping_.clip_value, clipping_.clip_value};
  for (int64_t first = begin; first < end; first += kBlock) {
    const int64_t last = std::min(end, first + kBlock);
    ops::ClipByValueOnHost(clip, sum + (first - begin), clipped, last - first);
    UpdateSlice(replica, attrs, variable, first, last, clipped);
  }
}

StatusOr<float> Optimizer::GlobalNormScale(const std::vector<Tensor>& grads,
                                           int64_t iteration) const {
  if (clipping_.global_clip_norm == 0) return 1.0f;
  TOWER_ASSIGN_OR_RETURN(const double norm, GlobalNorm(grads));
  if (!std::isfinite(norm)) {
    return InvalidArgumentError("global-norm clipping: the gradients' global norm is " +
                                std::string(std::isnan(norm) ? "NaN" : "Inf") + " at update " +
                                std::to_string(iteration + 1) +
                                " (they overflowed or hold NaN: lower the learning rate, or "
                                "check the data; --check-numerics names the first)");
  }
  if (norm <= clipping_.global_clip_norm) return 1.0f;
  return static_cast<float>(clipping_.global_clip_norm / norm);
}

StatusOr<std::unique_ptr<Variable>> Optimizer::MakeSlot(const Variable& variable,
                                                        const std::string& slot) {
  std::vector<Tensor> copies;
  for (int r = 0; r < (variable.shared() ? 1 : variable.num_replicas()); ++r) {
    TOWER_ASSIGN_OR_RETURN(Tensor zeros,
                           Tensor::Zeros(variable.value(r).device(), variable.shape()));
    copies.push_back(std::move(zeros));
  }
  if (variable.shared()) copies = Variable::SharedCopies(copies.front(), variable.num_replicas());
  return std::make_unique<Variable>("optimizer." + variable.name() + "." + slot,
                                    std::move(copies), /*trainable=*/false);
}

Status Optimizer::Apply(int replica, int64_t iteration, const std::vector<Variable*>& variables,
                        const std::vector<Tensor>& summed_grads, int updaters) {
  // Clipped copies of the sums when clipping is on (the sums stay as they are).
  std::vector<Tensor> clipped;
  if (clipping_.clip_value > 0 || clipping_.global_clip_norm > 0) {
    TOWER_ASSIGN_OR_RETURN(const float scale, GlobalNormScale(summed_grads, iteration));
    for (const Tensor& grad : summed_grads) {
      if (clipping_.clip_value > 0) {
        TOWER_ASSIGN_OR_RETURN(Tensor c, ops::ClipByValue(grad, -clipping_.clip_value,
                                                          clipping_.clip_value));
        clipped.push_back(std::move(c));
      } else if (scale != 1.0f) {
        TOWER_ASSIGN_OR_RETURN(Tensor c, ops::Scale(grad, scale));
        clipped.push_back(std::move(c));
      } else {
        clipped.push_back(grad);
      }
    }
  }
  const std::vector<Tensor>& grads = clipped.empty() ? summed_grads : clipped;
  bool any_shared = false;
  for (const Variable* variable : variables) any_shared = any_shared || variable->shared();
  StepAttrs attrs;
  if (any_shared) {
    TOWER_ASSIGN_OR_RETURN(attrs, AttrsOf(iteration));
  }
  for (size_t i = 0; i < variables.size(); ++i) {
    const Variable& variable = *variables[i];
    if (!variable.shared() && updaters > 0) {
      return InvalidArgumentError("the variable " + variable.name() + " has a copy per "
                                  "replica: every replica updates its own (not " +
                                  std::to_string(updaters) + " updaters of slices)");
    }
    if (!variable.shared()) {
      TOWER_RETURN_IF_ERROR(ApplyToCopy(replica, iteration, i, *variables[i], grads[i]));
      continue;
    }
    const Tensor& grad = grads[i];
    if (grad.dtype() != DType::kFloat32 || grad.shape() != variable.shape() ||
        !grad.device()->stream().host_addressable()) {
      return InvalidArgumentError("the gradient of the shared variable " + variable.name() +
                                  " must be float32" + variable.shape().ToString() +
                                  " in host memory; got " + std::string(DTypeName(grad.dtype())) +
                                  grad.shape().ToString() + " on " + grad.device()->full_name());
    }
    const int64_t n = variable.shape().num_elements();
    const int sharing = updaters > 0 ? updaters : variable.num_replicas();
    const int64_t begin = n * replica / sharing;
    const int64_t end = n * (replica + 1) / sharing;
    if (begin < end) UpdateSlice(replica, attrs, i, begin, end, grad.data<float>() + begin);
  }
  return OkStatus();
}

namespace {

class SgdOptimizer : public Optimizer {
 public:
  SgdOptimizer(float learning_rate, float momentum, bool nesterov)
      : Optimizer(learning_rate), momentum_(momentum), nesterov_(nesterov) {}

  std::string name() const override { return "SGD"; }

  Status Build(const std::vector<Variable*>& variables) override {
    variables_ = variables;
    velocities_.clear();
    if (momentum_ == 0) return OkStatus();  // plain SGD keeps no state
    for (const Variable* variable : variables) {
      TOWER_ASSIGN_OR_RETURN(std::unique_ptr<Variable> slot, MakeSlot(*variable, "velocity"));
      velocities_.push_back(std::move(slot));
    }
    return OkStatus();
  }

  StatusOr<StepAttrs> AttrsOf(int64_t iteration) const override {
    TOWER_ASSIGN_OR_RETURN(attrs::Sgd sgd,
                           ops::SgdAttrs(learning_rate(iteration), momentum_, nesterov_));
    return StepAttrs(sgd);
  }

  void UpdateSlice(int replica, const StepAttrs& attrs, size_t variable, int64_t begin,
                   int64_t end, const float* grad) const override {
    float* velocity = momentum_ == 0
                          ? nullptr
                          : velocities_[variable]->value(replica).data<float>() + begin;
    ops::SgdOnHost(std::get<attrs::Sgd>(attrs),
                   variables_[variable]->value(replica).data<float>() + begin, velocity, grad,
                   end - begin);
  }

  std::vector<Variable*> slots() const override {
    std::vector<Variable*> out;
    for (const auto& slot : velocities_) out.push_back(slot.get());
    return out;
  }

 protected:
  Status ApplyToCopy(int replica, int64_t iteration, size_t i, Variable& variable,
                     const Tensor& grad) override {
    const float lr = learning_rate(iteration);
    Tensor& var = variable.value(replica);
    if (momentum_ == 0) return ops::ApplySgd(var, grad, lr);
    return ops::ApplySgdMomentum(var, velocities_[i]->value(replica), grad, lr, momentum_,
                                 nesterov_);
  }

 private:
  const float momentum_;
  const bool nesterov_;
  std::vector<Variable*> variables_;
  std::vector<std::unique_ptr<Variable>> velocities_;
};

class AdamOptimizer : public Optimizer {
 public:
  AdamOptimizer(float learning_rate, float beta1, float beta2, float epsilon, float weight_decay)
      : Optimizer(learning_rate),
        beta1_(beta1),
        beta2_(beta2),
        epsilon_(epsilon),
        weight_decay_(weight_decay) {}

  std::string name() const override { return weight_decay_ == 0 ? "Adam" : "AdamW"; }

  Status Build(const std::vector<Variable*>& variables) override {
    variables_ = variables;
    m_.clear();
    v_.clear();
    for (const Variable* variable : variables) {
      TOWER_ASSIGN_OR_RETURN(std::unique_ptr<Variable> m, MakeSlot(*variable, "m"));
      TOWER_ASSIGN_OR_RETURN(std::unique_ptr<Variable> v, MakeSlot(*variable, "v"));
      m_.push_back(std::move(m));
      v_.push_back(std::move(v));
    }
    return OkStatus();
  }

  StatusOr<StepAttrs> AttrsOf(int64_t iteration) const override {
    TOWER_ASSIGN_OR_RETURN(attrs::Adam adam, ops::AdamAttrs(learning_rate(iteration), beta1_,
                                                             beta2_, epsilon_, iteration + 1,
                                                             weight_decay_));
    return StepAttrs(adam);
  }

  void UpdateSlice(int replica, const StepAttrs& attrs, size_t variable, int64_t begin,
                   int64_t end, const float* grad) const override {
    ops::AdamOnHost(std::get<attrs::Adam>(attrs),
                    variables_[variable]->value(replica).data<float>() + begin,
                    m_[variable]->value(replica).data<float>() + begin,
                    v_[variable]->value(replica).data<float>() + begin, grad, end - begin);
  }

  std::vector<Variable*> slots() const override {
    std::vector<Variable*> out;
    for (size_t i = 0; i < m_.size(); ++i) {
      out.push_back(m_[i].get());
      out.push_back(v_[i].get());
    }
    return out;
  }

 protected:
  Status ApplyToCopy(int replica, int64_t iteration, size_t i, Variable& variable,
                     const Tensor& grad) override {
    return ops::ApplyAdam(variable.value(replica), m_[i]->value(replica),
                          v_[i]->value(replica), grad, learning_rate(iteration), beta1_, beta2_,
                          epsilon_, iteration + 1, weight_decay_);
  }

 private:
  const float beta1_, beta2_, epsilon_, weight_decay_;
  std::vector<Variable*> variables_;
  std::vector<std::unique_ptr<Variable>> m_, v_;
};

}  // namespace

std::unique_ptr<Optimizer> SGD(float learning_rate, float momentum, bool nesterov) {
  return std::make_unique<SgdOptimizer>(learning_rate, momentum, nesterov);
}

std::unique_ptr<Optimizer> Adam(float learning_rate, float beta1, float beta2, float epsilon) {
  return std::make_unique<AdamOptimizer>(learning_rate, beta1, beta2, epsilon, 0.0f);
}

std::unique_ptr<Optimizer> AdamW(float learning_rate, float weight_decay, float beta1,
                                 float beta2, float epsilon) {
  return std::make_unique<AdamOptimizer>(learning_rate, beta1, beta2, epsilon, weight_decay);
}

}  // namespace tower
