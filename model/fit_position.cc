#include "model/fit_position.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/strings.h"

namespace tower {
namespace {

// "%a" prints every bit of a double; strtod reads it back exactly.
std::string ExactDouble(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%a", value);
  return text;
}

bool ParseExactDouble(const std::string& text, double* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

}  // namespace

bool FitPosition::operator==(const FitPosition& other) const {
  if (metrics.size() != other.metrics.size()) return false;
  for (size_t i = 0; i < metrics.size(); ++i) {
    if (std::memcmp(&metrics[i].sum, &other.metrics[i].sum, sizeof(double)) != 0 ||
        metrics[i].count != other.metrics[i].count) {
      return false;
    }
  }
  return epoch == other.epoch && step_in_epoch == other.step_in_epoch &&
         total_steps == other.total_steps &&
         std::memcmp(&loss_sum, &other.loss_sum, sizeof(double)) == 0 && rows == other.rows &&
         signature == other.signature;
}

void AddToMetadata(const FitPosition& position, std::map<std::string, std::string>* metadata) {
  (*metadata)["fit.epoch"] = std::to_string(position.epoch);
  (*metadata)["fit.step_in_epoch"] = std::to_string(position.step_in_epoch);
  (*metadata)["fit.total_steps"] = std::to_string(position.total_steps);
  (*metadata)["fit.loss_sum"] = ExactDouble(position.loss_sum);
  (*metadata)["fit.rows"] = std::to_string(position.rows);
  std::vector<std::string> metrics;
  for (const Metric::Totals& totals : position.metrics) {
    metrics.push_back(ExactDouble(totals.sum) + "/" + std::to_string(totals.count));
  }
  (*metadata)["fit.metrics"] = Join(metrics, ",");
  (*metadata)["fit.signature"] = position.signature;
}

StatusOr<FitPosition> FitPositionFromMetadata(const std::map<std::string, std::string>& metadata,
                                              const std::string& source) {
  if (metadata.count("fit.epoch") == 0) {
    return NotFoundError(source + " holds weights but no training position (it was not "
                         "written as a backup during training)");
  }
  auto bad = [&](const std::string& key) {
    return InvalidArgumentError(source + ": metadata '" + key + "' is missing or malformed");
  };
  auto get_int = [&](const std::string& key, int64_t* value) -> Status {
    auto it = metadata.find(key);
    if (it == metadata.end()) return bad(key);
    std::optional<int64_t> parsed = ParseInt64(it->second);
    if (!parsed || *parsed < 0) return bad(key);
    *value = *parsed;
    return OkStatus();
  };
  FitPosition position;
  int64_t epoch = 0;
  TOWER_RETURN_IF_ERROR(get_int("fit.epoch", &epoch));
  if (epoch > (1 << 30)) return bad("fit.epoch");
  position.epoch = static_cast<int>(epoch);
  TOWER_RETURN_IF_ERROR(get_int("fit.step_in_epoch", &position.step_in_epoch));
  TOWER_RETURN_IF_ERROR(get_int("fit.total_steps", &position.total_steps));
  TOWER_RETURN_IF_ERROR(get_int("fit.rows", &position.rows));
  auto loss = metadata.find("fit.loss_sum");
  if (loss == metadata.end() || !ParseExactDouble(loss->second, &position.loss_sum)) {
    return bad("fit.loss_sum");
  }
  auto metrics = metadata.find("fit.metrics");
  if (metrics == metadata.end()) return bad("fit.metrics");
  if (!metrics->second.empty()) {
    for (const std::string& entry : Split(metrics->second, ',')) {
      const std::vector<std::string> parts = Split(entry, '/');
      Metric::Totals totals;
      std::optional<int64_t> count = parts.size() == 2 ? ParseInt64(parts[1]) : std::nullopt;
      if (!count || *count < 0 || !ParseExactDouble(parts[0], &totals.sum)) {
        return bad("fit.metrics");
      }
      totals.count = *count;
      position.metrics.push_back(totals);
    }
  }
  auto signature = metadata.find("fit.signature");
  if (signature == metadata.end()) return bad("fit.signature");
  position.signature = signature->second;
  return position;
}

}  // namespace tower
