// CrossDeviceOps: how the replicas of one process sum their tensors (TensorFlow's
// cross_device_ops). One interface, several paths; a strategy picks one when it is built
// (strategy/cross_device_ops_selection.h) and logs why.
//
// Every method is a collective: each local replica calls it from its own thread with its
// own tensors — the same number, shapes and dtypes, in the same order — and on return each
// replica's tensors hold the result. A failure anywhere (a mismatch, a device error, a
// replica that aborted or never came) returns an error on every replica; nobody is left
// waiting.
#ifndef TOWER_STRATEGY_CROSS_DEVICE_OPS_H_
#define TOWER_STRATEGY_CROSS_DEVICE_OPS_H_

#include <string>

#include "ops/tensor.h"
#include "util/span.h"
#include "util/status.h"

namespace tower {

class CrossDeviceOps {
 public:
  virtual ~CrossDeviceOps() = default;
  // "in-process", "same-card", "nccl", "to-cpu".
  virtual std::string name() const = 0;
  // Sums each tensor over the replicas, in place; every replica ends with the same bits.
  virtual Status AllReduceSum(int replica, Span<Tensor* const> tensors) = 0;
  // Overwrites every replica's tensors with replica 0's.
  virtual Status Broadcast(int replica, Span<Tensor* const> tensors) = 0;
  // Orders `replica`'s later device work after every AllReduceSum it started (paths that
  // reduce asynchronously on a stream of their own). Not a collective.
  virtual Status FinishReductions(int replica) { return OkStatus(); }
  // Makes every current and future collective fail with `reason` until Reset (called by the
  // strategy when a replica fails, so the others do not wait for it).
  virtual void Abort(const Status& reason) = 0;
  virtual void Reset() = 0;
};

}  // namespace tower

#endif  // TOWER_STRATEGY_CROSS_DEVICE_OPS_H_
