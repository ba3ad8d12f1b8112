#include "model/optimizer.h"

#include "ops/array_ops.h"
#include "ops/training_ops.h"

namespace tower {

StatusOr<std::unique_ptr<Variable>> Optimizer::MakeSlot(const Variable& variable,
                                                        const std::string& slot) {
  std::vector<Tensor> copies;
  for (int r = 0; r < variable.num_replicas(); ++r) {
    TOWER_ASSIGN_OR_RETURN(Tensor zeros,
                           Tensor::Zeros(variable.value(r).device(), variable.shape()));
    copies.push_back(std::move(zeros));
  }
  return std::make_unique<Variable>("optimizer." + variable.name() + "." + slot,
                                    std::move(copies), /*trainable=*/false);
}

namespace {

class SgdOptimizer : public Optimizer {
 public:
  SgdOptimizer(float learning_rate, float momentum, bool nesterov)
      : Optimizer(learning_rate), momentum_(momentum), nesterov_(nesterov) {}

  std::string name() const override { return "SGD"; }

  Status Build(const std::vector<Variable*>& variables) override {
    velocities_.clear();
    if (momentum_ == 0) return OkStatus();  // plain SGD keeps no state
    for (const Variable* variable : variables) {
      TOWER_ASSIGN_OR_RETURN(std::unique_ptr<Variable> slot, MakeSlot(*variable, "velocity"));
      velocities_.push_back(std::move(slot));
    }
    return OkStatus();
  }

  Status Apply(int replica, int64_t iteration, const std::vector<Variable*>& variables,
               const std::vector<Tensor>& grads) override {
    const float lr = learning_rate(iteration);
    for (size_t i = 0; i < variables.size(); ++i) {
      Tensor& var = variables[i]->value(replica);
      if (momentum_ == 0) {
        TOWER_RETURN_IF_ERROR(ops::ApplySgd(var, grads[i], lr));
      } else {
        TOWER_RETURN_IF_ERROR(ops::ApplySgdMomentum(var, velocities_[i]->value(replica),
                                                    grads[i], lr, momentum_, nesterov_));
      }
    }
    return OkStatus();
  }

  std::vector<Variable*> slots() const override {
    std::vector<Variable*> out;
    for (const auto& slot : velocities_) out.push_back(slot.get());
    return out;
  }

 private:
  const float momentum_;
  const bool nesterov_;
  std::vector<std::unique_ptr<Variable>> velocities_;
};

class AdamOptimizer : public Optimizer {
 public:
  AdamOptimizer(float learning_rate, float beta1, float beta2, float epsilon)
      : Optimizer(learning_rate), beta1_(beta1), beta2_(beta2), epsilon_(epsilon) {}

  std::string name() const override { return "Adam"; }

  Status Build(const std::vector<Variable*>& variables) override {
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

  Status Apply(int replica, int64_t iteration, const std::vector<Variable*>& variables,
               const std::vector<Tensor>& grads) override {
    const float lr = learning_rate(iteration);
    for (size_t i = 0; i < variables.size(); ++i) {
      TOWER_RETURN_IF_ERROR(ops::ApplyAdam(variables[i]->value(replica), m_[i]->value(replica),
                                           v_[i]->value(replica), grads[i], lr, beta1_, beta2_,
                                           epsilon_, iteration + 1));
    }
    return OkStatus();
  }

  std::vector<Variable*> slots() const override {
    std::vector<Variable*> out;
    for (size_t i = 0; i < m_.size(); ++i) {
      out.push_back(m_[i].get());
      out.push_back(v_[i].get());
    }
    return out;
  }

 private:
  const float beta1_, beta2_, epsilon_;
  std::vector<std::unique_ptr<Variable>> m_, v_;
};

}  // namespace

std::unique_ptr<Optimizer> SGD(float learning_rate, float momentum, bool nesterov) {
  return std::make_unique<SgdOptimizer>(learning_rate, momentum, nesterov);
}

std::unique_ptr<Optimizer> Adam(float learning_rate, float beta1, float beta2, float epsilon) {
  return std::make_unique<AdamOptimizer>(learning_rate, beta1, beta2, epsilon);
}

}  // namespace tower

