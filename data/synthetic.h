// Synthetic datasets: rows computed on the fly from (seed, row index), nothing stored.
//
// Exactly the workloads of docs/BENCHMARKS.md:
//   linreg: 1 feature  x ~ U(-1, 1);          target y = 3·x + 2 + 0.01·N(0, 1)
//   mlp:    256 features x ~ U(-1, 1)^256;    target y = 3·(x·w) + 2 + 0.01·N(0, 1),
//           w = linspace(-1, 1, 256)
// Row r is the same whatever the batch size, the order rows are read in, or the thread that
// reads them: feature j of row r is philox::Uniform(seed, r·feature_dim + j, -1, 1) and the
// noise of row r is philox::Normal(seed, r, 0, 1) (util/philox.h).
#ifndef TOWER_DATA_SYNTHETIC_H_
#define TOWER_DATA_SYNTHETIC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/source.h"
#include "util/statusor.h"

namespace tower::data {

struct SyntheticOptions {
  std::string name;    // "linreg" or "mlp"
  int64_t rows = -1;   // -1 = endless
  uint64_t seed = 0;
};

// The generator names SyntheticSource knows: {"linreg", "mlp"}.
std::vector<std::string> SyntheticNames();

// "synthetic:linreg", "synthetic:mlp", with optional ":rows=N" and ":seed=S" in any order:
// "synthetic:mlp:rows=1024:seed=3".
StatusOr<SyntheticOptions> ParseSyntheticSpec(std::string_view spec);

class SyntheticSource final : public Source {
 public:
  // InvalidArgument for an unknown name (listing the known ones) or rows < -1.
  static StatusOr<std::shared_ptr<const SyntheticSource>> Create(const SyntheticOptions& options);

  int64_t num_rows() const override { return options_.rows; }
  int64_t feature_dim() const override { return feature_dim_; }
  int64_t target_dim() const override { return 1; }
  const Schema& schema() const override { return schema_; }
  Status Read(const int64_t* rows, int64_t n, float* features, float* targets) const override;

  const SyntheticOptions& options() const { return options_; }
  // The true weights of the linear map (w of the formulas above; {1} for linreg, before the
  // factor 3).
  const std::vector<double>& weights() const { return weights_; }

 private:
  SyntheticSource() = default;

  SyntheticOptions options_;
  int64_t feature_dim_ = 0;
  std::vector<double> weights_;
  Schema schema_;
};

}  // namespace tower::data

#endif  // TOWER_DATA_SYNTHETIC_H_
