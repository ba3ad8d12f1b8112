#include "ops/reference/reference_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "util/check.h"

namespace tower::reference {

Values MatMul(const Values& a, const Shape& a_shape, const Values& b, const Shape& b_shape,
              bool transpose_a, bool transpose_b) {
  const int64_t m = transpose_a ? a_shape.dim(1) : a_shape.dim(0);
  const int64_t k = transpose_a ? a_shape.dim(0) : a_shape.dim(1);
  const int64_t n = transpose_b ? b_shape.dim(0) : b_shape.dim(1);
  Values c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = transpose_a ? a[p * m + i] : a[i * k + p];
        const double bv = transpose_b ? b[j * k + p] : b[p * n + j];
        sum += av * bv;
      }
      c[i * n + j] = static_cast<float>(sum);
    }
  }
  return c;
}

Values BiasAdd(const Values& x, const Shape& x_shape, const Values& bias) {
  const int64_t c = x_shape.dim(x_shape.rank() - 1);
  Values y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] + bias[i % c];
  return y;
}

namespace {
template <typename F>
Values Elementwise(const Values& a, const Values& b, F f) {
  TOWER_CHECK(a.size() == b.size());
  Values out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i]);
  return out;
}
}  // namespace

Values Add(const Values& a, const Values& b) {
  return Elementwise(a, b, [](float x, float y) { return x + y; });
}
Values Sub(const Values& a, const Values& b) {
  return Elementwise(a, b, [](float x, float y) { return x - y; });
}
Values Mul(const Values& a, const Values& b) {
  return Elementwise(a, b, [](float x, float y) { return x * y; });
}

Values Scale(const Values& x, float alpha) {
  Values out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(double{alpha} * x[i]);
  return out;
}

Values ClipByValue(const Values& x, float min, float max) {
  Values out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = std::isnan(x[i]) ? x[i] : std::min(std::max(x[i], min), max);
  }
  return out;
}

Values Axpy(float alpha, const Values& x, const Values& y) {
  Values out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(double{alpha} * x[i] + y[i]);
  return out;
}

Values AddN(const std::vector<Values>& inputs) {
  Values out(inputs.at(0).size());
  for (size_t i = 0; i < out.size(); ++i) {
    double sum = 0;
    for (const Values& v : inputs) sum += v[i];
    out[i] = static_cast<float>(sum);
  }
  return out;
}

Values ReduceSum(const Values& x, const Shape& shape, attrs::ReduceAxis axis) {
  if (axis == attrs::ReduceAxis::kAll || shape.rank() == 0) {
    double sum = 0;
    for (float v : x) sum += v;
    return {static_cast<float>(sum)};
  }
  const int64_t rows = shape.dim(0);
  const int64_t cols = shape.row_size();
  Values out(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) {
    double sum = 0;
    for (int64_t i = 0; i < rows; ++i) sum += x[i * cols + j];
    out[j] = static_cast<float>(sum);
  }
  return out;
}

Values ReduceMean(const Values& x, const Shape& shape, attrs::ReduceAxis axis) {
  Values sum = ReduceSum(x, shape, axis);
  const int64_t count = (axis == attrs::ReduceAxis::kAll || shape.rank() == 0)
                            ? shape.num_elements()
                            : shape.dim(0);
  for (float& v : sum) {
    v = count == 0 ? std::numeric_limits<float>::quiet_NaN()
                   : static_cast<float>(double{v} / count);
  }
  return sum;
}

Values Relu(const Values& x) {
  Values out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] > 0 ? x[i] : 0.0f;
  return out;
}

Values ReluGrad(const Values& dy, const Values& x) {
  return Elementwise(dy, x, [](float g, float v) { return v > 0 ? g : 0.0f; });
}

Values Sigmoid(const Values& x) {
  Values out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(1.0 / (1.0 + std::exp(-double{x[i]})));
  return out;
}

Values SigmoidGrad(const Values& dy, const Values& y) {
  return Elementwise(dy, y, [](float g, float s) {
    return static_cast<float>(double{g} * s * (1.0 - s));
  });
}

Values Tanh(const Values& x) {
  Values out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(std::tanh(double{x[i]}));
  return out;
}

Values TanhGrad(const Values& dy, const Values& y) {
  return Elementwise(dy, y, [](float g, float t) {
    return static_cast<float>(double{g} * (1.0 - double{t} * t));
  });
}

Values Softmax(const Values& logits, const Shape& shape) {
  const int64_t n = shape.dim(0);
  const int64_t c = shape.dim(1);
  Values out(logits.size());
  for (int64_t i = 0; i < n; ++i) {
    double max = -INFINITY;
    for (int64_t j = 0; j < c; ++j) max = std::max(max, double{logits[i * c + j]});
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(logits[i * c + j] - max);
    for (int64_t j = 0; j < c; ++j) {
      out[i * c + j] = static_cast<float>(std::exp(logits[i * c + j] - max) / sum);
    }
  }
  return out;
}

Values SoftmaxGrad(const Values& dy, const Values& y, const Shape& shape) {
  const int64_t n = shape.dim(0);
  const int64_t c = shape.dim(1);
  Values out(y.size());
  for (int64_t i = 0; i < n; ++i) {
    double dot = 0;
    for (int64_t j = 0; j < c; ++j) dot += double{dy[i * c + j]} * y[i * c + j];
    for (int64_t j = 0; j < c; ++j) {
      out[i * c + j] = static_cast<float>(y[i * c + j] * (dy[i * c + j] - dot));
    }
  }
  return out;
}

Values MeanSquaredError(const Values& pred, const Values& target, float scale) {
  double sum = 0;
  for (size_t i = 0; i < pred.size(); ++i) {
    const double d = double{pred[i]} - target[i];
    sum += d * d;
  }
  return {static_cast<float>(sum * scale)};
}

Values MeanSquaredErrorGrad(const Values& pred, const Values& target, float scale) {
  Values out(pred.size());
  for (size_t i = 0; i < pred.size(); ++i) {
    out[i] = static_cast<float>(2.0 * (double{pred[i]} - target[i]) * scale);
  }
  return out;
}

Values SparseSoftmaxCrossEntropy(const Values& logits, const Shape& shape,
                                 const std::vector<int32_t>& labels, float scale) {
  const int64_t n = shape.dim(0);
  const int64_t c = shape.dim(1);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double max = -INFINITY;
    for (int64_t j = 0; j < c; ++j) max = std::max(max, double{logits[i * c + j]});
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(logits[i * c + j] - max);
    total += max + std::log(sum) - logits[i * c + labels[i]];
  }
  return {static_cast<float>(total * scale)};
}

Values SparseSoftmaxCrossEntropyGrad(const Values& logits, const Shape& shape,
                                     const std::vector<int32_t>& labels, float scale) {
  Values probabilities = Softmax(logits, shape);
  const int64_t c = shape.dim(1);
  for (int64_t i = 0; i < shape.dim(0); ++i) {
    for (int64_t j = 0; j < c; ++j) {
      const double p = probabilities[i * c + j] - (j == labels[i] ? 1.0 : 0.0);
      probabilities[i * c + j] = static_cast<float>(p * scale);
    }
  }
  return probabilities;
}

Values Concat(const std::vector<Values>& inputs) {
  Values out;
  for (const Values& v : inputs) out.insert(out.end(), v.begin(), v.end());
  return out;
}

Values Fill(int64_t n, float value) { return Values(static_cast<size_t>(n), value); }

std::array<uint32_t, 4> Philox4x32_10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key) {
  // Written from the paper's definition (Salmon et al., SC 2011, Philox-4×32 with its
  // multipliers and Weyl key bumps), independently of util/philox.h: ten rounds of
  // (L0, R0, L1, R1) -> (hi(M1·R1) ^ k0 ^ L0... ) in its permuted form.
  constexpr uint64_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57;
  constexpr uint32_t kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = kM0 * counter[0];
    const uint64_t p1 = kM1 * counter[2];
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key[0],
               static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key[1],
               static_cast<uint32_t>(p0)};
  }
  return counter;
}

namespace {

// The four words of Philox block `block` under `seed` (counter = block, key = seed).
std::array<uint32_t, 4> RandomWords(uint64_t seed, uint64_t block) {
  return Philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, 0},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

// The top 24 bits of a word as a fraction in [0, 1): exact.
double Fraction24(uint32_t word) { return std::ldexp(static_cast<double>(word >> 8), -24); }

}  // namespace

Values RandomUniform(int64_t n, const attrs::Random& random) {
  // Element i: word i % 4 of block i / 4; lo + u·(hi − lo), with (hi − lo) rounded to float
  // and one rounding of the product-sum (an fma), here in long double then float.
  Values out(static_cast<size_t>(n));
  const float range = random.b - random.a;
  for (int64_t i = 0; i < n; ++i) {
    const double u = Fraction24(RandomWords(random.seed, static_cast<uint64_t>(i) / 4)[i % 4]);
    out[i] = static_cast<float>(static_cast<long double>(u) * range + random.a);
  }
  return out;
}

Values RandomNormal(int64_t n, const attrs::Random& random) {
  // Box–Muller with the C library's log and cos (the kernel writes its own, for bitwise
  // equality across devices): equal to it within float rounding, not bitwise.
  Values out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const std::array<uint32_t, 4> words = RandomWords(random.seed ^ 0x5DEECE66Dull, i);
    const double u1 = Fraction24(words[0]) + std::ldexp(1.0, -24);  // (0, 1]
    const double u2 = Fraction24(words[1]);                          // [0, 1)
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    out[i] = static_cast<float>(static_cast<double>(static_cast<float>(z)) * random.b + random.a);
  }
  return out;
}

namespace {

// The float nearest to x with `significand_bits` bits of significand (the implicit one
// included) and exponents down to `min_exponent` (below it: subnormal steps), ties to even;
// ±inf past `max_finite`. Arithmetic on the value, not the bit tricks of ops/dtype.
float RoundToFormat(double x, int significand_bits, int min_exponent, double max_finite) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return static_cast<float>(x);
  int exponent = 0;
  std::frexp(x, &exponent);  // |x| = m·2^exponent, m in [0.5, 1)
  const int e = std::max(exponent - 1, min_exponent);  // x = f·2^e, f in [1, 2) if normal
  const double step = std::ldexp(1.0, e - (significand_bits - 1));
  const double rounded = std::nearbyint(x / step) * step;  // ties to even
  if (std::fabs(rounded) > max_finite) return std::copysign(INFINITY, x);
  return static_cast<float>(rounded);
}

}  // namespace

Values CastRoundTrip(const Values& x, DType to) {
  Values out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    switch (to) {
      case DType::kFloat32: out[i] = v; break;
      // IEEE binary16: 11-bit significand, exponents from −14, largest finite 65504.
      case DType::kFloat16: out[i] = RoundToFormat(v, 11, -14, 65504.0); break;
      // bfloat16: float32's exponent range with an 8-bit significand.
      case DType::kBFloat16:
        out[i] = RoundToFormat(v, 8, -126, std::ldexp(255.0 / 128.0, 127));
        break;
      // Toward zero, saturating; NaN to 0.
      case DType::kInt32:
        if (std::isnan(v)) {
          out[i] = 0;
        } else if (v >= 2147483648.0) {
          out[i] = 2147483647.0f;
        } else if (v <= -2147483648.0) {
          out[i] = -2147483648.0f;
        } else {
          out[i] = static_cast<float>(std::trunc(static_cast<double>(v)));
        }
        break;
    }
  }
  return out;
}

float RoundToDType(double x, DType to) {
  switch (to) {
    case DType::kFloat16: return RoundToFormat(x, 11, -14, 65504.0);
    case DType::kBFloat16: return RoundToFormat(x, 8, -126, std::ldexp(255.0 / 128.0, 127));
    case DType::kFloat32:
    case DType::kInt32: return CastRoundTrip({static_cast<float>(x)}, to)[0];
  }
  return 0;
}

namespace {

template <typename F>
Doubles Map(const Values& a, F f) {
  Doubles out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(double{a[i]});
  return out;
}

template <typename F>
Doubles Map(const Values& a, const Values& b, F f) {
  TOWER_CHECK(a.size() == b.size());
  Doubles out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(double{a[i]}, double{b[i]});
  return out;
}

}  // namespace

Doubles ReluInDouble(const Values& x) {
  return Map(x, [](double v) { return v > 0 ? v : 0.0; });
}

Doubles ReluGradInDouble(const Values& dy, const Values& x) {
  return Map(dy, x, [](double g, double v) { return v > 0 ? g : 0.0; });
}

Doubles SigmoidInDouble(const Values& x) {
  return Map(x, [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
}

Doubles SigmoidGradInDouble(const Values& dy, const Values& y) {
  return Map(dy, y, [](double g, double s) { return g * s * (1.0 - s); });
}

Doubles TanhInDouble(const Values& x) {
  return Map(x, [](double v) { return std::tanh(v); });
}

Doubles TanhGradInDouble(const Values& dy, const Values& y) {
  return Map(dy, y, [](double g, double t) { return g * (1.0 - t * t); });
}

Doubles BiasAddInDouble(const Values& x, const Shape& x_shape, const Values& bias) {
  const int64_t c = x_shape.dim(x_shape.rank() - 1);
  Doubles y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = double{x[i]} + bias[i % c];
  return y;
}

Doubles ReduceSumInDouble(const Values& x, const Shape& shape, attrs::ReduceAxis axis,
                          bool absolute) {
  const bool all = axis == attrs::ReduceAxis::kAll || shape.rank() == 0;
  const int64_t rows = all ? shape.num_elements() : shape.dim(0);
  const int64_t cols = all ? 1 : shape.row_size();
  Doubles out(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) {
    double sum = 0;
    for (int64_t i = 0; i < rows; ++i) {
      const double v = x[i * cols + j];
      sum += absolute ? std::fabs(v) : v;
    }
    out[j] = sum;
  }
  return out;
}

void ApplySgd(Values* var, Values* velocity, const Values& grad, const attrs::Sgd& sgd) {
  for (size_t i = 0; i < var->size(); ++i) {
    const double g = grad[i];
    if (velocity == nullptr) {
      (*var)[i] = static_cast<float>((*var)[i] - double{sgd.learning_rate} * g);
      continue;
    }
    const double v = double{sgd.momentum} * (*velocity)[i] - double{sgd.learning_rate} * g;
    (*velocity)[i] = static_cast<float>(v);
    const double step = sgd.nesterov ? double{sgd.momentum} * v - double{sgd.learning_rate} * g : v;
    (*var)[i] = static_cast<float>((*var)[i] + step);
  }
}

void ApplyAdam(Values* var, Values* m, Values* v, const Values& grad, const attrs::Adam& adam) {
  for (size_t i = 0; i < var->size(); ++i) {
    const double g = grad[i];
    const double mi = double{adam.beta1} * (*m)[i] + (1.0 - adam.beta1) * g;
    const double vi = double{adam.beta2} * (*v)[i] + (1.0 - adam.beta2) * g * g;
    (*m)[i] = static_cast<float>(mi);
    (*v)[i] = static_cast<float>(vi);
    const double decayed = (*var)[i] * (1.0 - double{adam.decay});  // AdamW; 1 when decay is 0
    (*var)[i] = static_cast<float>(decayed - double{adam.alpha} * mi / (std::sqrt(vi) + adam.epsilon));
  }
}

}  // namespace tower::reference
