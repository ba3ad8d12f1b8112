#include "model/logs.h"

#include <limits>

namespace tower {

std::vector<double> History::values(const std::string& key) const {
  std::vector<double> out;
  for (const Logs& logs : epochs) {
    auto it = logs.find(key);
    out.push_back(it == logs.end() ? std::numeric_limits<double>::quiet_NaN() : it->second);
  }
  return out;
}

}  // namespace tower
