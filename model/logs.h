// Logs: the named figures of a step or an epoch ("loss", "mae", "val_loss", ...).
#ifndef TOWER_MODEL_LOGS_H_
#define TOWER_MODEL_LOGS_H_

#include <map>
#include <string>
#include <vector>

namespace tower {

// Ordered by name (std::map): printed and logged in a stable order.
using Logs = std::map<std::string, double>;

// What Fit returns: one Logs per epoch (Keras's History).
struct History {
  std::vector<Logs> epochs;
  // The value of `key` at every epoch (NaN where an epoch lacks it).
  std::vector<double> values(const std::string& key) const;
};

}  // namespace tower

#endif  // TOWER_MODEL_LOGS_H_
