// A reference classifier for tests: multinomial logistic (softmax) regression on features
// standardized with the training rows' mean and population std, fitted by full-batch
// gradient descent from zero weights in double precision. Independent of Tower's code.
#ifndef TOWER_TESTS_TESTING_SOFTMAX_REGRESSION_H_
#define TOWER_TESTS_TESTING_SOFTMAX_REGRESSION_H_

#include <vector>

namespace tower::testing {

struct LabeledRows {
  std::vector<std::vector<double>> features;  // one vector per row
  std::vector<int> classes;                   // per row, in [0, num_classes)
};

// The fitted model's accuracy on `test` (`steps` gradient steps of `learning_rate`).
double SoftmaxRegressionAccuracy(const LabeledRows& train, const LabeledRows& test,
                                 int num_classes, int steps = 4000, double learning_rate = 0.5);

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_SOFTMAX_REGRESSION_H_
