// World: the processes a strategy's replicas span. MirroredStrategy runs over one: this
// process alone (LocalWorld), or every worker of an MPI job
// (strategy/collectives/mpi/mpi_world.h), so
// that the global replica count, the shard layout, Reduce and the consistency checks are
// written once and are right across workers by construction.
//
// Every method but the accessors is a collective: every worker calls it, in the same order,
// from one thread at a time, and it gives up after `timeout`, naming the workers that never
// came.
#ifndef TOWER_STRATEGY_RUNTIME_WORLD_H_
#define TOWER_STRATEGY_RUNTIME_WORLD_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "util/statusor.h"

namespace tower {

class World {
 public:
  virtual ~World() = default;
  // This worker's index, 0-based, and the number of workers.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // How errors and logs name a worker: "rank 2 (host b)".
  virtual std::string Describe(int rank) const = 0;

  // In-place sum of `count` floats over every worker.
  virtual Status AllReduceSum(float* data, int64_t count, std::chrono::milliseconds timeout,
                              const std::string& what) = 0;
  // Every worker's string, in rank order.
  virtual StatusOr<std::vector<std::string>> AllGather(const std::string& mine,
                                                       std::chrono::milliseconds timeout,
                                                       const std::string& what) = 0;
  // Ends every worker at once after a failure this one cannot recover from. One process:
  // returns (the caller then fails as usual).
  virtual void AbortJob(int exit_code) = 0;
};

// This process alone: every collective is the identity.
class LocalWorld : public World {
 public:
  static LocalWorld* Get();
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string Describe(int) const override { return "this process"; }
  Status AllReduceSum(float*, int64_t, std::chrono::milliseconds, const std::string&) override {
    return OkStatus();
  }
  StatusOr<std::vector<std::string>> AllGather(const std::string& mine,
                                               std::chrono::milliseconds,
                                               const std::string&) override {
    return std::vector<std::string>{mine};
  }
  void AbortJob(int) override {}
};

}  // namespace tower

#endif  // TOWER_STRATEGY_RUNTIME_WORLD_H_
