// Synthetic datasets: the formulas of docs/BENCHMARKS.md, determinism, statistics, endless sources.
#include "data/synthetic.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "data/dataset.h"
#include "util/philox.h"
#include "tests/data/dataset_testing.h"

namespace tower::data {
namespace {

using testing::Collect;
using testing::Rows;

Dataset MakeSynthetic(const std::string& name, int64_t rows, uint64_t seed = 0) {
  SyntheticOptions options;
  options.name = name;
  options.rows = rows;
  options.seed = seed;
  StatusOr<Dataset> dataset = Dataset::Synthetic(options);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  return std::move(dataset).value();
}

// All rows of a pass, in one batch.
Batch AllRows(const Dataset& dataset) {
  StatusOr<std::vector<Batch>> batches = Collect(dataset.Batch(1 << 30));
  EXPECT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(batches->size(), 1u);
  return std::move(batches->front());
}

TEST(SyntheticTest, SchemaAndShapes) {
  const Dataset linreg = MakeSynthetic("linreg", 10);
  EXPECT_EQ(linreg.feature_dim(), 1);
  EXPECT_EQ(linreg.target_dim(), 1);
  EXPECT_EQ(linreg.num_rows(), 10);
  EXPECT_EQ(linreg.schema().feature_names, (std::vector<std::string>{"x0"}));
  EXPECT_EQ(linreg.schema().target_names, (std::vector<std::string>{"y"}));
  const Dataset mlp = MakeSynthetic("mlp", 10);
  EXPECT_EQ(mlp.feature_dim(), 256);
  ASSERT_EQ(mlp.schema().feature_names.size(), 256u);
  EXPECT_EQ(mlp.schema().feature_names.front(), "x0");
  EXPECT_EQ(mlp.schema().feature_names.back(), "x255");
  EXPECT_EQ(mlp.schema().target_names, (std::vector<std::string>{"y"}));
}

TEST(SyntheticTest, UnknownNameListsTheKnownOnes) {
  SyntheticOptions options;
  options.name = "cifar";
  EXPECT_EQ(Dataset::Synthetic(options).status(),
            InvalidArgumentError("unknown synthetic dataset 'cifar'; known: linreg, mlp"));
  options.name = "linreg";
  options.rows = -2;
  EXPECT_EQ(Dataset::Synthetic(options).status(),
            InvalidArgumentError("synthetic dataset 'linreg': rows must be a count or -1 "
                                 "(endless), got -2"));
}

TEST(SyntheticTest, DeterministicAndIndependentOfBatchingAndOrder) {
  const Batch a = AllRows(MakeSynthetic("linreg", 500, 3));
  const Batch b = AllRows(MakeSynthetic("linreg", 500, 3));
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.targets, b.targets);
  const Batch other = AllRows(MakeSynthetic("linreg", 500, 4));
  EXPECT_NE(a.features, other.features);

  // Batch size 7, a shuffled order, or a larger dataset: row r is the same.
  const Dataset shuffled = MakeSynthetic("linreg", 500, 3).Shuffle(500, 1).Batch(7);
  StatusOr<std::vector<Batch>> batches = Collect(shuffled);
  ASSERT_TRUE(batches.ok());
  for (const Batch& batch : *batches) {
    for (int64_t i = 0; i < batch.rows; ++i) {
      const int64_t r = batch.source_rows[i];
      ASSERT_EQ(batch.features[i], a.features[r]) << "row " << r;
      ASSERT_EQ(batch.targets[i], a.targets[r]) << "row " << r;
    }
  }
  const Batch longer = AllRows(MakeSynthetic("linreg", 1000, 3));
  EXPECT_EQ(std::vector<float>(longer.features.begin(), longer.features.begin() + 500), a.features);

  const Batch mlp = AllRows(MakeSynthetic("mlp", 40, 5));
  StatusOr<std::vector<Batch>> mlp_batches = Collect(MakeSynthetic("mlp", 40, 5).Shuffle(40, 2).Batch(3));
  ASSERT_TRUE(mlp_batches.ok());
  for (const Batch& batch : *mlp_batches) {
    for (int64_t i = 0; i < batch.rows; ++i) {
      const int64_t r = batch.source_rows[i];
      for (int64_t j = 0; j < 256; ++j) ASSERT_EQ(batch.feature_row(i)[j], mlp.feature_row(r)[j]);
      ASSERT_EQ(batch.targets[i], mlp.targets[r]);
    }
  }
}

TEST(SyntheticTest, FeaturesArePhiloxUniform) {
  const Batch linreg = AllRows(MakeSynthetic("linreg", 50, 9));
  for (int64_t r = 0; r < 50; ++r) {
    EXPECT_EQ(linreg.features[r], philox::Uniform(9, r, -1.0f, 1.0f));
  }
  const Batch mlp = AllRows(MakeSynthetic("mlp", 3, 9));
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t j = 0; j < 256; ++j) {
      EXPECT_EQ(mlp.feature_row(r)[j], philox::Uniform(9, r * 256 + j, -1.0f, 1.0f));
    }
  }
}

TEST(SyntheticTest, LinregLeastSquaresRecoversSlopeAndIntercept) {
  const Batch rows = AllRows(MakeSynthetic("linreg", 100000, 0));
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  float lo = 1, hi = -1;
  const double n = static_cast<double>(rows.rows);
  for (int64_t i = 0; i < rows.rows; ++i) {
    const double x = rows.features[i];
    const double y = rows.targets[i];
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
    lo = std::min(lo, rows.features[i]);
    hi = std::max(hi, rows.features[i]);
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  const double intercept = (sy - slope * sx) / n;
  EXPECT_NEAR(slope, 3.0, 0.01);
  EXPECT_NEAR(intercept, 2.0, 0.01);
  EXPECT_GE(lo, -1.0f);
  EXPECT_LT(hi, 1.0f);
  EXPECT_NEAR(sx / n, 0.0, 0.01);           // U(-1, 1): mean 0
  EXPECT_NEAR(sxx / n, 1.0 / 3.0, 0.01);    // variance 1/3
  // Residuals: 0.01·N(0, 1).
  double r1 = 0, r2 = 0;
  for (int64_t i = 0; i < rows.rows; ++i) {
    const double residual = rows.targets[i] - (3.0 * rows.features[i] + 2.0);
    r1 += residual;
    r2 += residual * residual;
  }
  EXPECT_NEAR(r1 / n, 0.0, 0.0002);
  EXPECT_NEAR(std::sqrt(r2 / n - (r1 / n) * (r1 / n)), 0.01, 0.0005);
}

TEST(SyntheticTest, MlpTargetsFollowTheFormula) {
  const int64_t n = 4000;
  const Batch rows = AllRows(MakeSynthetic("mlp", n, 1));
  double r1 = 0, r2 = 0, worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double dot = 0;
    for (int j = 0; j < 256; ++j) {
      const float x = rows.feature_row(i)[j];
      ASSERT_GE(x, -1.0f);
      ASSERT_LT(x, 1.0f);
      dot += x * (-1.0 + 2.0 * j / 255.0);  // w = linspace(-1, 1, 256)
    }
    const double residual = rows.targets[i] - (3.0 * dot + 2.0);
    r1 += residual;
    r2 += residual * residual;
    worst = std::max(worst, std::fabs(residual));
  }
  EXPECT_NEAR(r1 / n, 0.0, 0.001);
  EXPECT_NEAR(std::sqrt(r2 / n), 0.01, 0.001);
  EXPECT_LT(worst, 0.06);
  // The targets are not constant: x·w varies (its std is 3·sqrt(Σw²/3) ≈ 16).
  double t1 = 0, t2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    t1 += rows.targets[i];
    t2 += rows.targets[i] * rows.targets[i];
  }
  EXPECT_NEAR(t1 / n, 2.0, 1.0);
  EXPECT_GT(std::sqrt(t2 / n - (t1 / n) * (t1 / n)), 10.0);
}

TEST(SyntheticTest, EndlessDatasetWithTake) {
  const Dataset endless = MakeSynthetic("linreg", -1, 0);
  EXPECT_EQ(endless.num_rows(), -1);
  EXPECT_EQ(endless.Batch(64).num_batches(), -1);
  EXPECT_EQ(endless.Batch(64).Take(5).num_batches(), 5);
  EXPECT_EQ(endless.Take(100).Batch(64).num_batches(), 2);
  StatusOr<std::vector<Batch>> batches = Collect(endless.Batch(64).Take(5));
  ASSERT_TRUE(batches.ok());
  ASSERT_EQ(batches->size(), 5u);
  EXPECT_EQ(Rows(*batches).back(), 319);
  // Rows far out are as cheap as the first ones and match a finite dataset's.
  const Batch far = AllRows(endless.Skip(1000000000000LL).Take(3));
  EXPECT_EQ(far.source_rows, (std::vector<int64_t>{1000000000000LL, 1000000000001LL, 1000000000002LL}));
  EXPECT_EQ(far.features[0], philox::Uniform(0, 1000000000000ULL, -1.0f, 1.0f));
  const Batch start = AllRows(endless.Take(10));
  EXPECT_EQ(start.features, AllRows(MakeSynthetic("linreg", 10, 0)).features);
}

TEST(SyntheticTest, ParseSpec) {
  StatusOr<SyntheticOptions> linreg = ParseSyntheticSpec("synthetic:linreg");
  ASSERT_TRUE(linreg.ok()) << linreg.status();
  EXPECT_EQ(linreg->name, "linreg");
  EXPECT_EQ(linreg->rows, -1);
  EXPECT_EQ(linreg->seed, 0u);
  StatusOr<SyntheticOptions> mlp = ParseSyntheticSpec("synthetic:mlp:rows=1024:seed=3");
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ(mlp->name, "mlp");
  EXPECT_EQ(mlp->rows, 1024);
  EXPECT_EQ(mlp->seed, 3u);
  StatusOr<SyntheticOptions> reordered = ParseSyntheticSpec("synthetic:mlp:seed=7:rows=-1");
  ASSERT_TRUE(reordered.ok());
  EXPECT_EQ(reordered->seed, 7u);
  EXPECT_EQ(reordered->rows, -1);

  EXPECT_EQ(ParseSyntheticSpec("linreg").status(),
            InvalidArgumentError("'linreg' is not a synthetic dataset spec: expected "
                                 "synthetic:NAME (NAME one of linreg, mlp), optionally followed "
                                 "by :rows=N and :seed=S"));
  EXPECT_EQ(ParseSyntheticSpec("synthetic:resnet").status(),
            InvalidArgumentError("'synthetic:resnet': unknown synthetic dataset 'resnet'; known: "
                                 "linreg, mlp"));
  EXPECT_EQ(ParseSyntheticSpec("synthetic:mlp:rows=ten").status(),
            InvalidArgumentError("'synthetic:mlp:rows=ten': rows must be a count (or -1 for "
                                 "endless), got 'ten'"));
  EXPECT_EQ(ParseSyntheticSpec("synthetic:mlp:seed=-1").status(),
            InvalidArgumentError("'synthetic:mlp:seed=-1': seed must be a non-negative integer, "
                                 "got '-1'"));
  EXPECT_EQ(ParseSyntheticSpec("synthetic:mlp:batch=3").status(),
            InvalidArgumentError("'synthetic:mlp:batch=3': unknown option 'batch=3'; options are "
                                 "rows=N and seed=S"));
  StatusOr<Dataset> dataset = Dataset::Synthetic(*mlp);
  ASSERT_TRUE(dataset.ok());
  EXPECT_EQ(dataset->Batch(256).num_batches(), 4);
}

}  // namespace
}  // namespace tower::data
