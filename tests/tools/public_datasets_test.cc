// `tower train`, `evaluate` and `predict` on public datasets as Debian ships them (the
// python3-sklearn package's CSV files, installed by ./bazelw), against references computed
// here: the least-squares fit for the housing prices, logistic regression for the diagnoses.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/softmax_regression.h"
#include "tests/testing/tower_cli.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::Figure;
using testing::ProgramOutput;
using testing::ReadLines;
using testing::Tower;

std::string Path(const std::string& name) { return testing::TempPath(name); }

constexpr char kData[] = "/usr/lib/python3/dist-packages/sklearn/datasets/data/";

std::vector<double> Numbers(const std::string& line) {
  std::vector<double> out;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) out.push_back(std::atof(cell.c_str()));
  return out;
}

// Solves a·x = b (n × n) by Gaussian elimination with partial pivoting.
std::vector<double> Solve(std::vector<std::vector<double>> a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r) if (std::fabs(a[r][c]) > std::fabs(a[pivot][c])) pivot = r;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t i = 0; i < n; ++i) b[i] /= a[i][i];
  return b;
}

// Boston housing (506 rows, 13 features, the median price MEDV), as sklearn ships it: a first
// line of counts, then a CSV with a header. Without that first line, the file is used as is.
TEST(PublicDatasetsTest, HousingPricesNormalizedReachTheLeastSquaresFit) {
  const std::vector<std::string> lines = ReadLines(std::string(kData) + "boston_house_prices.csv");
  ASSERT_GT(lines.size(), 500u) << "no " << kData << "boston_house_prices.csv: install "
                                << "python3-sklearn (./bazelw does)";
  const std::string csv = Path("housing.csv");
  {
    std::ofstream out(csv);
    for (size_t i = 1; i < lines.size(); ++i) out << lines[i] << "\n";
  }
  // The reference: least squares on the raw features and an intercept, by the normal
  // equations on standardized columns (well conditioned), in double precision.
  std::vector<std::vector<double>> rows;
  for (size_t i = 2; i < lines.size(); ++i) {
    if (!lines[i].empty()) rows.push_back(Numbers(lines[i]));
  }
  const size_t d = 13, n = rows.size();
  std::vector<double> mean(d, 0), scale(d, 0);
  for (const auto& r : rows) for (size_t j = 0; j < d; ++j) mean[j] += r[j] / n;
  for (const auto& r : rows) for (size_t j = 0; j < d; ++j) scale[j] += (r[j] - mean[j]) * (r[j] - mean[j]) / n;
  for (double& s : scale) s = std::sqrt(s);
  std::vector<std::vector<double>> a(d + 1, std::vector<double>(d + 1, 0));
  std::vector<double> b(d + 1, 0);
  for (const auto& r : rows) {
    std::vector<double> x(d + 1, 1);
    for (size_t j = 0; j < d; ++j) x[j] = (r[j] - mean[j]) / scale[j];
    for (size_t i = 0; i <= d; ++i) {
      for (size_t j = 0; j <= d; ++j) a[i][j] += x[i] * x[j];
      b[i] += x[i] * r[d];
    }
  }
  const std::vector<double> w = Solve(a, b);
  double se = 0;
  for (const auto& r : rows) {
    double p = w[d];
    for (size_t j = 0; j < d; ++j) p += w[j] * (r[j] - mean[j]) / scale[j];
    se += (p - r[d]) * (p - r[d]);
  }
  const double optimum = se / n;
  // Raw features (TAX in the hundreds, NOX below 1) with SGD: it diverges, and says so.
  ProgramOutput raw = Tower("train --data=" + csv + " --target=MEDV --layers=1 --epochs=20 "
                            "--lr=0.01 --verbose=0");
  EXPECT_EQ(raw.exit_code, 1) << raw.text;
  EXPECT_THAT(raw.text, HasSubstr("training diverged"));
  // Normalized, full-batch gradient descent: the least-squares optimum.
  for (int replicas : {1, 2}) {
    const std::string model = Path("housing" + std::to_string(replicas) + ".safetensors");
    ProgramOutput trained = Tower("train --data=" + csv + " --target=MEDV --layers=1 --normalize "
                                  "--epochs=3000 --global-batch=506 --lr=0.1 --verbose=0 "
                                  "--replicas=" + std::to_string(replicas) + " --save=" + model);
    ASSERT_EQ(trained.exit_code, 0) << trained.text;
    ProgramOutput evaluated = Tower("evaluate --model=" + model + " --data=" + csv);
    ASSERT_EQ(evaluated.exit_code, 0) << evaluated.text;
    const double mse = Figure(evaluated.text, "mse");
    std::cout << replicas << " replicas: mse " << mse << ", least squares " << optimum << "\n";
    EXPECT_LE(mse, optimum * 1.01) << evaluated.text;
    EXPECT_GE(mse, optimum * 0.999) << evaluated.text;
  }
}

// Breast cancer diagnosis (569 rows, 30 features, malignant or benign), as sklearn ships it:
// a first line that names the classes ("569,30,malignant,benign") and rows that give their
// indices. The test writes the names in, as a file of one's own would have them, holds out
// every fifth row (114), and compares the held-out accuracy with logistic regression fitted
// here.
TEST(PublicDatasetsTest, DiagnosisByNamePredictsAsWellAsLogisticRegression) {
  const std::vector<std::string> lines = ReadLines(std::string(kData) + "breast_cancer.csv");
  ASSERT_GT(lines.size(), 569u) << "no " << kData << "breast_cancer.csv: install python3-sklearn";
  std::vector<std::string> names;
  {
    std::stringstream first(lines[0]);
    for (std::string cell; std::getline(first, cell, ',');) names.push_back(cell);
    names.erase(names.begin(), names.begin() + 2);  // the counts
  }
  ASSERT_EQ(names.size(), 2u);
  constexpr int kFeatures = 30;
  struct Row {
    std::vector<double> x;
    int klass;
  };
  std::vector<Row> train, test;
  const std::string train_csv = Path("diagnosis_train.csv"), test_csv = Path("diagnosis_test.csv");
  std::ofstream train_out(train_csv), test_out(test_csv);
  for (std::ofstream* out : {&train_out, &test_out}) {
    for (int j = 0; j < kFeatures; ++j) *out << "f" << j << ",";
    *out << "diagnosis\n";
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const std::vector<double> v = Numbers(lines[i]);
    ASSERT_EQ(v.size(), kFeatures + 1u) << "line " << i + 1;
    Row row{std::vector<double>(v.begin(), v.begin() + kFeatures), static_cast<int>(v[kFeatures])};
    const bool held_out = (i - 1) % 5 == 4;
    (held_out ? test : train).push_back(row);
    std::ofstream& out = held_out ? test_out : train_out;
    out.precision(17);
    for (int j = 0; j < kFeatures; ++j) out << v[j] << ",";
    out << names[row.klass] << "\n";
  }
  train_out.close();
  test_out.close();
  // The reference: logistic regression (softmax over the 2 classes) on standardized
  // features, 4,000 full-batch gradient steps from zero.
  auto labeled = [](const std::vector<Row>& rows) {
    testing::LabeledRows out;
    for (const Row& r : rows) {
      out.features.push_back(r.x);
      out.classes.push_back(r.klass);
    }
    return out;
  };
  const double reference = testing::SoftmaxRegressionAccuracy(labeled(train), labeled(test), 2);
  const std::string model = Path("diagnosis.safetensors");
  ProgramOutput trained = Tower("train --data=" + train_csv + " --target=diagnosis --layers=2 "
                                "--loss=sparse_categorical_crossentropy --normalize "
                                "--optimizer=sgd --lr=0.5 --epochs=4000 --global-batch=455 "
                                "--verbose=0 --replicas=2 --save=" + model);
  ASSERT_EQ(trained.exit_code, 0) << trained.text;
  ProgramOutput evaluated = Tower("evaluate --model=" + model + " --data=" + test_csv);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.text;
  const double accuracy = Figure(evaluated.text, "accuracy");
  std::cout << "diagnosis held-out accuracy: Tower " << accuracy << ", logistic regression "
            << reference << " (" << test.size() << " rows)\n";
  EXPECT_NEAR(accuracy, reference, 0.02) << evaluated.text;
  // predict writes the diagnosis by name.
  const std::string predicted = Path("diagnosis_predicted.csv");
  ProgramOutput out = Tower("predict --model=" + model + " --data=" + test_csv + " --out=" +
                            predicted);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  const std::vector<std::string> written = ReadLines(predicted);
  ASSERT_EQ(written.size(), test.size() + 1);
  EXPECT_EQ(written[0], "diagnosis");
  int named_right = 0;
  for (size_t i = 0; i < test.size(); ++i) {
    EXPECT_THAT(names, ::testing::Contains(written[i + 1]));
    named_right += written[i + 1] == names[test[i].klass];
  }
  EXPECT_NEAR(static_cast<double>(named_right) / test.size(), accuracy, 1e-6);
}

}  // namespace
}  // namespace tower
