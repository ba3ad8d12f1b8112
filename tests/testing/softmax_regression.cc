#include "tests/testing/softmax_regression.h"

#include <algorithm>
#include <cmath>

namespace tower::testing {

double SoftmaxRegressionAccuracy(const LabeledRows& train, const LabeledRows& test,
                                 int num_classes, int steps, double learning_rate) {
  const size_t d = train.features.front().size();
  const double n = static_cast<double>(train.features.size());
  std::vector<double> mean(d, 0), sd(d, 0);
  for (const auto& x : train.features) for (size_t j = 0; j < d; ++j) mean[j] += x[j] / n;
  for (const auto& x : train.features) {
    for (size_t j = 0; j < d; ++j) sd[j] += (x[j] - mean[j]) * (x[j] - mean[j]) / n;
  }
  for (double& s : sd) s = s > 0 ? std::sqrt(s) : 1.0;
  // w[k] holds class k's d weights, then its bias.
  std::vector<std::vector<double>> w(num_classes, std::vector<double>(d + 1, 0));
  auto logits = [&](const std::vector<double>& x) {
    std::vector<double> z(num_classes);
    for (int k = 0; k < num_classes; ++k) {
      z[k] = w[k][d];
      for (size_t j = 0; j < d; ++j) z[k] += w[k][j] * (x[j] - mean[j]) / sd[j];
    }
    return z;
  };
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<double>> grad(num_classes, std::vector<double>(d + 1, 0));
    for (size_t i = 0; i < train.features.size(); ++i) {
      const std::vector<double>& x = train.features[i];
      std::vector<double> z = logits(x);
      const double top = *std::max_element(z.begin(), z.end());
      double sum = 0;
      for (double& v : z) sum += v = std::exp(v - top);
      for (int k = 0; k < num_classes; ++k) {
        const double e = z[k] / sum - (k == train.classes[i] ? 1 : 0);
        for (size_t j = 0; j < d; ++j) grad[k][j] += e * (x[j] - mean[j]) / sd[j] / n;
        grad[k][d] += e / n;
      }
    }
    for (int k = 0; k < num_classes; ++k) {
      for (size_t j = 0; j <= d; ++j) w[k][j] -= learning_rate * grad[k][j];
    }
  }
  int right = 0;
  for (size_t i = 0; i < test.features.size(); ++i) {
    const std::vector<double> z = logits(test.features[i]);
    right += std::max_element(z.begin(), z.end()) - z.begin() == test.classes[i];
  }
  return static_cast<double>(right) / static_cast<double>(test.features.size());
}

}  // namespace tower::testing
