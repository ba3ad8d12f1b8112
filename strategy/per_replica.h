// PerReplica<T>: one value per replica, in replica order (TensorFlow's PerReplica).
#ifndef TOWER_STRATEGY_PER_REPLICA_H_
#define TOWER_STRATEGY_PER_REPLICA_H_

#include <vector>

#include "util/check.h"

namespace tower {

template <typename T>
class PerReplica {
 public:
  explicit PerReplica(std::vector<T> values) : values_(std::move(values)) {}

  int num_replicas() const { return static_cast<int>(values_.size()); }
  const T& operator[](int replica) const {
    TOWER_CHECK(replica >= 0 && replica < num_replicas()) << "no replica " << replica;
    return values_[replica];
  }
  T& operator[](int replica) {
    TOWER_CHECK(replica >= 0 && replica < num_replicas()) << "no replica " << replica;
    return values_[replica];
  }
  const std::vector<T>& values() const { return values_; }
  typename std::vector<T>::const_iterator begin() const { return values_.begin(); }
  typename std::vector<T>::const_iterator end() const { return values_.end(); }

 private:
  std::vector<T> values_;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_PER_REPLICA_H_
