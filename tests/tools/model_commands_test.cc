// `tower evaluate` and `tower predict` on models saved by `tower train`: figures checked
// against a host computation from the saved weights, any replica count, columns found by
// name, and the refusals (a weights-only file, a newer format, data without the columns).
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/checkpoint/safetensors.h"
#include "tests/testing/softmax_regression.h"
#include "tests/testing/tower_cli.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::Figure;
using testing::LabeledRows;
using testing::ProgramOutput;
using testing::ReadLines;
using testing::Tower;

std::string Path(const std::string& name) { return testing::TempPath(name); }
std::vector<float> Weights(const std::string& path, const std::string& name) {
  return testing::SavedTensor(path, name);
}

// Rows (x1, x2) on a grid: y = 2·x1 − 3·x2 + 1, and a class from the signs.
struct Row {
  float x1, x2, y;
  int klass;
};
std::vector<Row> Grid() {
  std::vector<Row> rows;
  for (int i = 0; i < 200; ++i) {
    const float a = -1.0f + 2.0f * (i % 20) / 19;
    const float b = -1.0f + 2.0f * (i / 20) / 9;
    rows.push_back({a, b, 2 * a - 3 * b + 1, (a > 0 ? 1 : 0) + (b > 0 ? 2 : 0)});
  }
  return rows;
}

void WriteTrainingCsv(const std::string& path) {
  std::ofstream out(path);
  out << "x1,x2,y,class\n";
  for (const Row& r : Grid()) out << r.x1 << "," << r.x2 << "," << r.y << "," << r.klass << "\n";
}

TEST(ModelCommandsTest, EvaluateAndPredictALinearModelAsTheWeightsSay) {
  const std::string csv = Path("grid.csv");
  WriteTrainingCsv(csv);
  const std::string model = Path("linear.safetensors");
  // Adam's state is in the file too: evaluate and predict ignore it.
  ProgramOutput trained = Tower("train --data=" + csv + " --target=y --layers=1 --epochs=3 "
                                "--optimizer=adam --lr=0.05 --verbose=0 --save=" + model);
  ASSERT_EQ(trained.exit_code, 0) << trained.text;
  // The reference: the saved weights applied on the host. Features are every non-target
  // column of the training file, in order: x1, x2, class.
  const std::vector<float> w = Weights(model, "layers.0.kernel");
  const std::vector<float> b = Weights(model, "layers.0.bias");
  ASSERT_EQ(w.size(), 3u);
  double se = 0, ae = 0;
  std::vector<double> predictions;
  for (const Row& r : Grid()) {
    const double p = double{w[0]} * r.x1 + double{w[1]} * r.x2 + double{w[2]} * r.klass + b[0];
    predictions.push_back(p);
    se += (p - r.y) * (p - r.y);
    ae += std::fabs(p - r.y);
  }
  const double mse = se / 200, mae = ae / 200;
  for (int replicas : {1, 2, 3}) {
    ProgramOutput out = Tower("evaluate --model=" + model + " --data=" + csv +
                              " --global-batch=64 --replicas=" + std::to_string(replicas));
    ASSERT_EQ(out.exit_code, 0) << out.text;
    EXPECT_NEAR(Figure(out.text, "loss"), mse, 1e-5 * std::max(1.0, mse)) << out.text;
    EXPECT_NEAR(Figure(out.text, "mse"), mse, 1e-5 * std::max(1.0, mse)) << out.text;
    EXPECT_NEAR(Figure(out.text, "mae"), mae, 1e-5 * std::max(1.0, mae)) << out.text;
  }
  // Prediction data: the columns in another order, an extra one, no target.
  const std::string features = Path("features.csv");
  {
    std::ofstream out(features);
    out << "class,note,x2,x1\n";
    for (const Row& r : Grid()) out << r.klass << ",7," << r.x2 << "," << r.x1 << "\n";
  }
  for (int replicas : {1, 3}) {
    const std::string predicted = Path("predicted" + std::to_string(replicas) + ".csv");
    ProgramOutput out = Tower("predict --model=" + model + " --data=" + features + " --out=" +
                              predicted + " --replicas=" + std::to_string(replicas));
    ASSERT_EQ(out.exit_code, 0) << out.text;
    std::ifstream in(predicted);
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "y");
    for (size_t i = 0; i < predictions.size(); ++i) {
      ASSERT_TRUE(std::getline(in, line)) << "row " << i;
      const double got = std::atof(line.c_str());
      EXPECT_NEAR(got, predictions[i], 1e-5 * std::max(1.0, std::fabs(predictions[i])))
          << "row " << i;
    }
    EXPECT_FALSE(std::getline(in, line)) << "more rows than the data";
  }
}

TEST(ModelCommandsTest, AClassifierPredictsClassesItsAccuracyCounts) {
  const std::string csv = Path("classes.csv");
  WriteTrainingCsv(csv);
  {
    // Features x1, x2 only: the class column is the target here, y is left out.
    std::ifstream in(csv);
    std::ostringstream text;
    std::string line;
    std::getline(in, line);
    text << "x1,x2,class\n";
    for (const Row& r : Grid()) text << r.x1 << "," << r.x2 << "," << r.klass << "\n";
    std::ofstream(csv) << text.str();
  }
  const std::string model = Path("classifier.safetensors");
  ProgramOutput trained = Tower("train --data=" + csv + " --target=class --layers=16:relu,4 "
                                "--loss=sparse_categorical_crossentropy --optimizer=adam "
                                "--lr=0.05 --epochs=20 --verbose=0 --save=" + model);
  ASSERT_EQ(trained.exit_code, 0) << trained.text;
  ProgramOutput evaluated = Tower("evaluate --model=" + model + " --data=" + csv);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.text;
  const double accuracy = Figure(evaluated.text, "accuracy");
  EXPECT_GT(accuracy, 0.9) << evaluated.text;  // the classes are separable
  const std::string predicted = Path("classes_predicted.csv");
  ProgramOutput out = Tower("predict --model=" + model + " --data=" + csv + " --out=" + predicted +
                            " --replicas=2");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  std::ifstream in(predicted);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "class");
  int right = 0, rows = 0;
  for (const Row& r : Grid()) {
    ASSERT_TRUE(std::getline(in, line));
    right += std::atoi(line.c_str()) == r.klass;
    ++rows;
  }
  // The predicted classes give the accuracy evaluate reported.
  EXPECT_NEAR(static_cast<double>(right) / rows, accuracy, 1e-6);
}

// House-price-like data: features of very different scales (area ~1e3, rooms ~5), a
// target ~1e5, noise 1,000. Raw features with SGD diverge; normalized, a linear model reaches
// the least-squares optimum.
struct House {
  double area, rooms, price;
};
std::vector<House> Houses() {
  std::vector<House> houses;
  uint64_t state = 12345;
  auto uniform = [&state] {  // a fixed LCG: the data are the same everywhere
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  };
  for (int i = 0; i < 400; ++i) {
    const double area = 500 + 4500 * uniform();
    const double rooms = 1 + static_cast<int>(8 * uniform());
    const double noise = 1000 * (uniform() + uniform() + uniform() - 1.5) * 2;
    houses.push_back({area, rooms, 50 * area + 10000 * rooms + noise});
  }
  return houses;
}

// The least-squares fit's mean squared error, from the normal equations solved by Gaussian
// elimination with partial pivoting (double): the reference no gradient method can beat.
double LeastSquaresMse(const std::vector<House>& houses) {
  double a[3][4] = {};
  for (const House& h : houses) {
    const double x[3] = {h.area, h.rooms, 1};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) a[i][j] += x[i] * x[j];
      a[i][3] += x[i] * h.price;
    }
  }
  for (int c = 0; c < 3; ++c) {
    int pivot = c;
    for (int r = c + 1; r < 3; ++r) if (std::fabs(a[r][c]) > std::fabs(a[pivot][c])) pivot = r;
    for (int k = 0; k < 4; ++k) std::swap(a[c][k], a[pivot][k]);
    for (int r = 0; r < 3; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (int k = 0; k < 4; ++k) a[r][k] -= f * a[c][k];
    }
  }
  const double w[3] = {a[0][3] / a[0][0], a[1][3] / a[1][1], a[2][3] / a[2][2]};
  double se = 0;
  for (const House& h : houses) {
    const double e = w[0] * h.area + w[1] * h.rooms + w[2] - h.price;
    se += e * e;
  }
  return se / houses.size();
}

TEST(ModelCommandsTest, NormalizedFeaturesReachTheLeastSquaresOptimum) {
  const std::string csv = Path("houses.csv");
  {
    std::ofstream out(csv);
    out.precision(17);
    out << "area,rooms,price\n";
    for (const House& h : Houses()) out << h.area << "," << h.rooms << "," << h.price << "\n";
  }
  const double optimum = LeastSquaresMse(Houses());
  // Raw features: the first steps overflow; training stops and says why.
  ProgramOutput raw = Tower("train --data=" + csv + " --target=price --layers=1 --epochs=5 "
                            "--lr=0.01 --verbose=0");
  EXPECT_EQ(raw.exit_code, 1) << raw.text;
  EXPECT_THAT(raw.text, HasSubstr("training diverged"));
  EXPECT_THAT(raw.text, HasSubstr("normalize the features"));
  // Full-batch steps (gradient descent) so that the end point is the optimum, not SGD noise.
  for (int replicas : {1, 2}) {
    const std::string model = Path("houses" + std::to_string(replicas) + ".safetensors");
    ProgramOutput trained = Tower("train --data=" + csv + " --target=price --layers=1 "
                                  "--normalize --epochs=300 --lr=0.2 --global-batch=400 "
                                  "--verbose=0 --save=" + model + " --replicas=" +
                                  std::to_string(replicas));
    ASSERT_EQ(trained.exit_code, 0) << trained.text;
    ProgramOutput evaluated = Tower("evaluate --model=" + model + " --data=" + csv);
    ASSERT_EQ(evaluated.exit_code, 0) << evaluated.text;
    const double mse = Figure(evaluated.text, "mse");
    EXPECT_LE(mse, optimum * 1.01) << "optimum " << optimum << "\n" << evaluated.text;
    EXPECT_GE(mse, optimum * 0.999) << "better than least squares? " << evaluated.text;
    // The statistics are in the file: layers.0 maps x to (x − mean) / std.
    const std::vector<float> scale = Weights(model, "layers.0.kernel");
    double mean_area = 0;
    for (const House& h : Houses()) mean_area += h.area / 400;
    EXPECT_NEAR(-Weights(model, "layers.0.bias")[0] / scale[0], mean_area, 1e-3 * mean_area);
  }
}

// --normalize-target: the loss is over (y − mean) / std, predictions and metrics stay in the
// original units (prices ~1e5 here), and the statistics travel in the model file.
TEST(ModelCommandsTest, NormalizedTargetsTrainInScaledUnitsAndPredictInTheOriginalOnes) {
  const std::string csv = Path("houses_targets.csv");
  const std::vector<House> houses = Houses();
  {
    std::ofstream out(csv);
    out.precision(17);
    out << "area,rooms,price\n";
    for (const House& h : houses) out << h.area << "," << h.rooms << "," << h.price << "\n";
  }
  double mean = 0, variance = 0;
  for (const House& h : houses) mean += h.price / houses.size();
  for (const House& h : houses) variance += (h.price - mean) * (h.price - mean) / houses.size();
  const std::string model = Path("houses_targets.safetensors");
  ProgramOutput trained = Tower("train --data=" + csv + " --target=price --layers=1 --normalize "
                                "--normalize-target --epochs=300 --lr=0.2 --global-batch=400 "
                                "--verbose=0 --replicas=2 --save=" + model);
  ASSERT_EQ(trained.exit_code, 0) << trained.text;
  StatusOr<checkpoint::File> file = checkpoint::Load(model);
  ASSERT_TRUE(file.ok());
  EXPECT_NEAR(std::atof(file->metadata.at("tower.target_mean").c_str()), mean, 1e-3 * mean);
  ProgramOutput evaluated = Tower("evaluate --model=" + model + " --data=" + csv);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.text;
  const double loss = Figure(evaluated.text, "loss"), mse = Figure(evaluated.text, "mse");
  // The same fit as least squares, in original units; the loss is that over the variance.
  EXPECT_LE(mse, LeastSquaresMse(houses) * 1.01) << evaluated.text;
  EXPECT_NEAR(loss, mse / variance, 1e-3 * loss) << evaluated.text;
  const std::string predicted = Path("prices.csv");
  ASSERT_EQ(Tower("predict --model=" + model + " --data=" + csv + " --out=" + predicted).exit_code, 0);
  std::ifstream in(predicted);
  std::string line;
  std::getline(in, line);
  double se = 0;
  for (const House& h : houses) {
    ASSERT_TRUE(std::getline(in, line));
    const double p = std::atof(line.c_str());
    se += (p - h.price) * (p - h.price);
  }
  EXPECT_NEAR(se / houses.size(), mse, 1e-3 * mse) << "predict's prices are evaluate's";
  // Only for regression.
  ProgramOutput refused = Tower("train --data=" + csv + " --target=price --layers=2 "
                                "--loss=sparse_categorical_crossentropy --normalize-target "
                                "--epochs=1 --verbose=0");
  EXPECT_EQ(refused.exit_code, 2) << refused.text;
  EXPECT_THAT(refused.text, HasSubstr("--normalize-target is for regression (--loss=mse)"));
}

// Flowers by name: three overlapping Gaussian clusters in 4 features, text labels.
struct Flower {
  double x[4];
  int klass;
};
std::vector<Flower> Flowers(int count, uint64_t seed) {
  const double centers[3][4] = {{5.0, 3.4, 1.5, 0.2}, {5.9, 2.8, 4.3, 1.3}, {6.4, 3.0, 4.9, 1.7}};
  uint64_t state = seed;
  auto uniform = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (static_cast<double>(state >> 11) + 0.5) / 9007199254740992.0;
  };
  std::vector<Flower> flowers;
  for (int i = 0; i < count; ++i) {
    Flower f;
    f.klass = i % 3;
    for (int j = 0; j < 4; ++j) {
      const double z = std::sqrt(-2 * std::log(uniform())) * std::cos(2 * M_PI * uniform());
      f.x[j] = centers[f.klass][j] + 0.45 * z;
    }
    flowers.push_back(f);
  }
  return flowers;
}
const char* const kSpecies[3] = {"setosa", "versicolor", "virginica"};

void WriteFlowers(const std::string& path, const std::vector<Flower>& flowers) {
  std::ofstream out(path);
  out.precision(9);
  out << "sepal_length,sepal_width,petal_length,petal_width,species\n";
  for (const Flower& f : flowers) {
    out << f.x[0] << "," << f.x[1] << "," << f.x[2] << "," << f.x[3] << "," << kSpecies[f.klass]
        << "\n";
  }
}

LabeledRows Labeled(const std::vector<Flower>& flowers) {
  LabeledRows rows;
  for (const Flower& f : flowers) {
    rows.features.push_back(std::vector<double>(f.x, f.x + 4));
    rows.classes.push_back(f.klass);
  }
  return rows;
}

TEST(ModelCommandsTest, AClassifierOnTextLabelsPredictsNamesAsWellAsLogisticRegression) {
  const std::vector<Flower> train = Flowers(450, 7), test = Flowers(150, 8);
  const std::string train_csv = Path("flowers_train.csv"), test_csv = Path("flowers_test.csv");
  WriteFlowers(train_csv, train);
  WriteFlowers(test_csv, test);
  const std::string model = Path("flowers.safetensors");
  // A softmax layer on normalized features: the logistic-regression model, trained by Adam.
  ProgramOutput trained = Tower("train --data=" + train_csv + " --target=species --layers=3 "
                                "--loss=sparse_categorical_crossentropy --normalize "
                                "--optimizer=adam --lr=0.05 --epochs=200 --global-batch=450 "
                                "--verbose=0 --replicas=2 --save=" + model);
  ASSERT_EQ(trained.exit_code, 0) << trained.text;
  ProgramOutput evaluated = Tower("evaluate --model=" + model + " --data=" + test_csv);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.text;
  const double accuracy = Figure(evaluated.text, "accuracy");
  const double reference = testing::SoftmaxRegressionAccuracy(Labeled(train), Labeled(test), 3);
  std::cout << "held-out accuracy: Tower " << accuracy << ", logistic regression " << reference
            << "\n";
  EXPECT_NEAR(accuracy, reference, 0.02) << evaluated.text;
  EXPECT_LT(reference, 1.0) << "the classes should overlap, or the comparison says little";
  // predict writes the names, and they score what evaluate reported.
  const std::string predicted = Path("species.csv");
  ProgramOutput out = Tower("predict --model=" + model + " --data=" + test_csv + " --out=" +
                            predicted);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  std::ifstream in(predicted);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "species");
  int right = 0;
  for (const Flower& f : test) {
    ASSERT_TRUE(std::getline(in, line));
    EXPECT_TRUE(line == "setosa" || line == "versicolor" || line == "virginica") << line;
    right += line == kSpecies[f.klass];
  }
  EXPECT_NEAR(static_cast<double>(right) / test.size(), accuracy, 1e-6);
  // A class the model never saw is named, with its line.
  const std::string unknown = Path("unknown_species.csv");
  std::ofstream(unknown) << "sepal_length,sepal_width,petal_length,petal_width,species\n"
                            "5,3,1,0.2,setosa\n5,3,1,0.2,rosa\n";
  ProgramOutput refused = Tower("evaluate --model=" + model + " --data=" + unknown);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.text, HasSubstr("line 3: class 'rosa' is not one of the model's classes "
                                      "(setosa, versicolor, virginica)"));
}

TEST(ModelCommandsTest, FilesThatAreNotAModelAreRefused) {
  const std::string csv = Path("refusals.csv");
  WriteTrainingCsv(csv);
  // Weights without a description.
  checkpoint::File bare;
  bare.tensors.push_back(checkpoint::FromFloats("layers.0.kernel", {3, 1}, {1, 2, 3}));
  bare.tensors.push_back(checkpoint::FromFloats("layers.0.bias", {1}, {0}));
  const std::string weights_only = Path("weights_only.safetensors");
  TOWER_CHECK_OK(checkpoint::Save(weights_only, bare));
  // A newer format.
  checkpoint::File newer = bare;
  newer.metadata = {{"tower.format", "2"}, {"tower.layers", "1"}, {"tower.loss", "mse"},
                    {"tower.features", "x1,x2,class"}, {"tower.targets", "y"}};
  const std::string future = Path("future.safetensors");
  TOWER_CHECK_OK(checkpoint::Save(future, newer));
  // A description without its columns.
  checkpoint::File partial = bare;
  partial.metadata = {{"tower.format", "1"}, {"tower.layers", "1"}, {"tower.loss", "mse"}};
  const std::string incomplete = Path("incomplete.safetensors");
  TOWER_CHECK_OK(checkpoint::Save(incomplete, partial));
  const std::string good = Path("good_model.safetensors");
  ASSERT_EQ(Tower("train --data=" + csv + " --target=y --layers=1 --epochs=1 --verbose=0 "
                  "--save=" + good).exit_code, 0);
  const std::string no_target = Path("no_target.csv");
  std::ofstream(no_target) << "x1,x2,class\n1,2,3\n";
  const std::string out = Path("never.csv");
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"evaluate --model=" + weights_only + " --data=" + csv, "holds weights without a model description"},
      {"predict --model=" + weights_only + " --data=" + csv + " --out=" + out, "holds weights without a model description"},
      {"evaluate --model=" + future + " --data=" + csv, "was written in model format 2, newer than this Tower reads (1)"},
      {"evaluate --model=" + incomplete + " --data=" + csv, "the model description has no 'tower.features'"},
      {"evaluate --model=" + Path("missing.safetensors") + " --data=" + csv, "missing.safetensors"},
      {"evaluate --data=" + csv, "--model is required"},
      {"evaluate --model=" + good + " --data=" + no_target, "no column named 'y'; columns are: x1, x2, class"},
      {"predict --model=" + good + " --data=" + csv, "--out is required"},
      {"predict --model=" + good + " --data=" + csv + " --out=/nonexistent/p.csv", "--out=/nonexistent/p.csv"},
  };
  for (const Case& c : cases) {
    ProgramOutput result = Tower(c.args);
    EXPECT_TRUE(result.exit_code >= 1 && result.exit_code < 128) << c.args << "\n" << result.text;
    EXPECT_THAT(result.text, HasSubstr("error: ")) << c.args;
    EXPECT_THAT(result.text, HasSubstr(c.message)) << c.args << "\n" << result.text;
  }
  struct stat info;
  EXPECT_NE(stat(out.c_str(), &info), 0) << "nothing is written on an error";
}

}  // namespace
}  // namespace tower
