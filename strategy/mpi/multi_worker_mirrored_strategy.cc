#include "strategy/mpi/multi_worker_mirrored_strategy.h"

#include "device/context.h"
#include "strategy/mpi/cross_process_all_reduce.h"
#include "util/logging.h"
#include "util/strings.h"

namespace tower {
namespace {

// The first "; "-separated item where two signatures differ.
std::pair<std::string, std::string> FirstDifference(const std::string& a, const std::string& b) {
  const std::vector<std::string> x = Split(a, ';');
  const std::vector<std::string> y = Split(b, ';');
  for (size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
    const std::string left = i < x.size() ? x[i] : "(nothing)";
    const std::string right = i < y.size() ? y[i] : "(nothing)";
    if (left != right) return {left, right};
  }
  return {a, b};
}

}  // namespace

StatusOr<std::unique_ptr<MultiWorkerMirroredStrategy>> MultiWorkerMirroredStrategy::Create(
    const MirroredStrategyOptions& options) {
  TOWER_ASSIGN_OR_RETURN(MpiWorld * world, MpiWorld::Get());
  Context& context = options.context != nullptr ? *options.context : Context::Default();
  if (world->size() > 1) {
    SetLogPrefix("[rank " + std::to_string(world->rank()) + "] ");
    // Devices are named for this worker: /job:worker/replica:0/task:<rank>/device:...
    const Status named = context.SetJobAndTask("worker", world->rank());
    if (!named.ok()) TOWER_LOG(WARNING) << named.message();
  }
  TOWER_ASSIGN_OR_RETURN(LocalSetup setup, PrepareLocal("MultiWorkerMirroredStrategy", options));
  // Every worker needs the same number of local replicas (the global batch is split by the
  // global count): checked on every rank before anything else.
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> counts,
                         world->AllGather(std::to_string(setup.devices.size()),
                                          options.collective_timeout, "comparing replica counts"));
  for (int r = 0; r < world->size(); ++r) {
    if (counts[r] != counts[0]) {
      return InvalidArgumentError("workers disagree on local replicas: " + world->Describe(0) +
                                  " has " + counts[0] + ", " + world->Describe(r) + " has " +
                                  counts[r] + "; give every worker the same --replicas");
    }
  }
  std::unique_ptr<CrossDeviceOps> ops = std::move(setup.ops);
  if (world->size() > 1) {
    ops = std::make_unique<CrossProcessAllReduce>(std::move(ops), world, setup.names,
                                                  options.collective_timeout, setup.spin);
  }
  const int64_t bucket_bytes = setup.bucket_bytes;
  std::unique_ptr<MultiWorkerMirroredStrategy> strategy(new MultiWorkerMirroredStrategy(
      world, std::move(setup), std::move(ops), options.collective_timeout));
  strategy->set_bucket_bytes(bucket_bytes);
  strategy->LogCreation();
  TOWER_LOG(INFO) << "Worker " << world->Describe(world->rank()) << " of " << world->size()
                  << ": " << strategy->num_replicas_in_sync() << " replicas in sync";
  return strategy;
}

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(MpiWorld* world, LocalSetup setup,
                                                         std::unique_ptr<CrossDeviceOps> ops,
                                                         std::chrono::milliseconds timeout)
    : MirroredStrategy("MultiWorkerMirroredStrategy", std::move(setup.devices), setup.context,
                       std::move(setup.choice), std::move(ops), setup.spin),
      world_(world),
      timeout_(timeout) {}

std::string MultiWorkerMirroredStrategy::Describe() const {
  return MirroredStrategy::Describe() + " on " + world_->Describe(world_->rank()) + " of " +
         std::to_string(world_->size());
}

Status MultiWorkerMirroredStrategy::CheckConsistent(const std::string& signature) {
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> all,
                         world_->AllGather(signature, timeout_, "comparing the workers' models"));
  for (int r = 1; r < world_->size(); ++r) {
    if (all[r] != all[0]) {
      const auto [first, other] = FirstDifference(all[0], all[r]);
      return InvalidArgumentError("workers disagree before the first step: " +
                                  world_->Describe(0) + " has '" + first + "', " +
                                  world_->Describe(r) + " has '" + other + "'");
    }
  }
  return OkStatus();
}

}  // namespace tower
