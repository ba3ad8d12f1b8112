#include "data/synthetic.h"

#include <utility>

#include "util/philox.h"
#include "util/strings.h"

namespace tower::data {

namespace {

constexpr char kSpecPrefix[] = "synthetic:";

// Elements [first, first + count) of RandomUniform(seed) in [lo, hi): one Philox block per
// four elements (philox::Uniform would compute the block once per element).
void FillUniform(uint64_t seed, uint64_t first, int64_t count, float lo, float hi, float* out) {
  uint64_t i = first;
  const uint64_t end = first + static_cast<uint64_t>(count);
  while (i < end) {
    const philox::Block block = philox::Generate(seed, i / 4);
    for (uint64_t lane = i % 4; lane < 4 && i < end; ++lane, ++i) {
      *out++ = fmaf(philox::UnitFloat(block.v[lane]), hi - lo, lo);
    }
  }
}

}  // namespace

std::vector<std::string> SyntheticNames() { return {"linreg", "mlp"}; }

StatusOr<SyntheticOptions> ParseSyntheticSpec(std::string_view spec) {
  if (!StartsWith(spec, kSpecPrefix)) {
    return InvalidArgumentError("'" + std::string(spec) +
                                "' is not a synthetic dataset spec: expected synthetic:NAME "
                                "(NAME one of " + Join(SyntheticNames(), ", ") +
                                "), optionally followed by :rows=N and :seed=S");
  }
  const std::vector<std::string> parts = Split(spec.substr(sizeof(kSpecPrefix) - 1), ':');
  SyntheticOptions options;
  options.name = parts[0];
  bool known = false;
  for (const std::string& name : SyntheticNames()) known |= name == options.name;
  if (!known) {
    return InvalidArgumentError("'" + std::string(spec) + "': unknown synthetic dataset '" +
                                options.name + "'; known: " + Join(SyntheticNames(), ", "));
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const size_t equals = part.find('=');
    const std::string key = part.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : part.substr(equals + 1);
    if (key == "rows") {
      const std::optional<int64_t> rows = ParseInt64(value);
      if (!rows.has_value() || *rows < -1) {
        return InvalidArgumentError("'" + std::string(spec) + "': rows must be a count (or -1 "
                                    "for endless), got '" + value + "'");
      }
      options.rows = *rows;
    } else if (key == "seed") {
      const std::optional<int64_t> seed = ParseInt64(value);
      if (!seed.has_value() || *seed < 0) {
        return InvalidArgumentError("'" + std::string(spec) +
                                    "': seed must be a non-negative integer, got '" + value + "'");
      }
      options.seed = static_cast<uint64_t>(*seed);
    } else {
      return InvalidArgumentError("'" + std::string(spec) + "': unknown option '" + part +
                                  "'; options are rows=N and seed=S");
    }
  }
  return options;
}

StatusOr<std::shared_ptr<const SyntheticSource>> SyntheticSource::Create(
    const SyntheticOptions& options) {
  std::shared_ptr<SyntheticSource> source(new SyntheticSource());
  if (options.name == "linreg") {
    source->feature_dim_ = 1;
    source->weights_ = {1.0};
  } else if (options.name == "mlp") {
    source->feature_dim_ = 256;
    source->weights_.resize(256);
    // linspace(-1, 1, 256)
    for (int j = 0; j < 256; ++j) source->weights_[j] = -1.0 + 2.0 * j / 255.0;
  } else {
    return InvalidArgumentError("unknown synthetic dataset '" + options.name + "'; known: " +
                                Join(SyntheticNames(), ", "));
  }
  if (options.rows < -1) {
    return InvalidArgumentError("synthetic dataset '" + options.name +
                                "': rows must be a count or -1 (endless), got " +
                                std::to_string(options.rows));
  }
  source->options_ = options;
  source->schema_ = DefaultSchema(source->feature_dim_, 1);
  return std::shared_ptr<const SyntheticSource>(std::move(source));
}

Status SyntheticSource::Read(const int64_t* rows, int64_t n, float* features,
                             float* targets) const {
  const uint64_t seed = options_.seed;
  const int64_t dim = feature_dim_;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t row = static_cast<uint64_t>(rows[i]);
    float* x = features + i * dim;
    FillUniform(seed, row * static_cast<uint64_t>(dim), dim, -1.0f, 1.0f, x);
    double dot = 0;
    for (int64_t j = 0; j < dim; ++j) dot += static_cast<double>(x[j]) * weights_[j];
    const double noise = philox::Normal(seed, row, 0.0f, 1.0f);
    targets[i] = static_cast<float>(3.0 * dot + 2.0 + 0.01 * noise);
  }
  return OkStatus();
}

}  // namespace tower::data
