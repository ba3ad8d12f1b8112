#include "strategy/step/pass_accumulator.h"

#include <string>

#include "ops/math_ops.h"

namespace tower {

Status PassAccumulator::Begin(int pass, int passes) {
  const bool next_in_order = pass == 0 || (passes == passes_ && pass == pass_ + 1);
  if (passes < 1 || pass < 0 || pass >= passes || !next_in_order) {
    return FailedPreconditionError("gradient accumulation: pass " + std::to_string(pass) +
                                   " of " + std::to_string(passes) + " after pass " +
                                   std::to_string(pass_) + " of " + std::to_string(passes_) +
                                   "; a step's passes must come in order, from 0");
  }
  if (pass == 0) {
    gradients_.clear();
    extras_.clear();
  }
  pass_ = pass;
  passes_ = passes;
  return OkStatus();
}

Status PassAccumulator::Accumulate(Tensor* partial, const Tensor& next) {
  if (!partial->valid()) {
    *partial = next;
    return OkStatus();
  }
  TOWER_ASSIGN_OR_RETURN(*partial, ops::Add(*partial, next));
  return OkStatus();
}

Status PassAccumulator::Add(size_t index, Tensor* gradient) {
  if (passes_ == 1) return OkStatus();
  if (gradients_.size() <= index) gradients_.resize(index + 1);
  Tensor& partial = gradients_[index];
  if (!last_pass()) return Accumulate(&partial, *gradient);
  if (!partial.valid()) {
    return FailedPreconditionError("gradient accumulation: gradient " + std::to_string(index) +
                                   " of the last pass has no partial sum from the earlier ones");
  }
  // Same order as Accumulate's (IEEE addition is commutative): ((p0 + p1) + ...) + last.
  TOWER_ASSIGN_OR_RETURN(*gradient, ops::Add(partial, *gradient));
  partial = Tensor();
  return OkStatus();
}

Status PassAccumulator::AddExtras(Span<Tensor* const> extra) {
  if (passes_ == 1) return OkStatus();
  if (extras_.size() < extra.size()) extras_.resize(extra.size());
  for (size_t i = 0; i < extra.size(); ++i) {
    if (!last_pass()) {
      TOWER_RETURN_IF_ERROR(Accumulate(&extras_[i], *extra[i]));
      continue;
    }
    TOWER_ASSIGN_OR_RETURN(*extra[i], ops::Add(extras_[i], *extra[i]));
    extras_[i] = Tensor();
  }
  return OkStatus();
}

}  // namespace tower
