// allreduce_bench: the cross-device all-reduce of N logical CPU replicas, nccl-tests style.
//
//   bazel-bin/bench/allreduce_bench --replicas=2
//
// For each size (4 KB … 64 MB of float32 per replica) every replica thread calls
// AllReduceSum on its own tensor back to back; replica 0 times the calls. Printed per size:
// latency (µs per call), algbw = bytes / time and busbw = algbw · 2(n−1)/n (nccl-tests'
// definitions), busbw over the roofline, and for reference the memcpy bandwidth of the same
// bytes copied by the same n threads (each its 1/n share; cache-resident at small sizes).
//
// The roofline is the machine's memory-copy bandwidth: a large memcpy (--memcpy-mb, well
// past the caches) split over the same n replica threads, measured in the same run; the
// header line gives it, and the 1-thread figure. Each figure is the median of --repeats
// timed windows.
//
// The latency floor is the machine's cross-core round trip: two threads on two different CPUs
// hand one cache line back and forth (the header line gives the median ns per round trip).
// A small all-reduce cannot beat it: its barrier (one meeting for a small sum, two for a
// large one), and its reads of the other core's data, wait for lines to cross between
// cores. On this 2-vCPU guest it measured 447-631 ns on 2026-11-25 and 503-759 ns on
// 2026-11-26 (131 ns once), and depends on where the host places the vCPUs; the 4 KB
// latencies move with it.
//
// The strategy flags are `tower train`'s (strategy/strategy_flags.h: one declaration, check
// and mapping): --replicas (here at least 2, and 2 by default), --devices, --cross-device-ops
// and --collective-timeout shape the all-reduce measured; the others configure what a
// training step does around it (buckets, folding, deterministic mode, batches, the workers'
// all-reduce), which this program does not run.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_util.h"
#include "device/context.h"
#include "device/device_flags.h"
#include "ops/tensor.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/strategy_flags.h"
#include "util/flags.h"

namespace tower {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  StrategyFlags strategy;  // --replicas, --cross-device-ops, ... (strategy/strategy_flags.h)
  int64_t min_bytes = 4 << 10;
  int64_t max_bytes = 64 << 20;
  int64_t repeats = 3;
  double target_ms = 100;  // per timed window
  int64_t memcpy_mb = 256;
  DeviceFlags device;
};

using bench::CrossCoreRoundTripNs;
using bench::Median;

double SingleThreadMemcpy(size_t bytes, int repeats) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::memcpy(dst.data(), src.data(), bytes);
  std::vector<double> rates;
  for (int rep = 0; rep < repeats; ++rep) {
    const int iters = 4;
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) {
      std::memcpy(dst.data(), src.data(), bytes);
      src[i] = dst[bytes - 1 - i];  // keep the copies observable
    }
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    rates.push_back(static_cast<double>(bytes) * iters / s);
  }
  return Median(rates);
}

// The roofline: one large memcpy of `big` bytes, split over the replica threads (as the
// all-reduce is), in bytes/s.
StatusOr<double> ThreadedMemcpy(MirroredStrategy& strategy, size_t big, const Options& options) {
  const int n = strategy.extended().num_local_replicas();
  std::vector<char> src(big, 1), dst(big, 0);
  std::vector<double> copy_s;
  TOWER_RETURN_IF_ERROR(strategy.extended().RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    const int r = ctx.replica_id();
    const size_t lo = big * r / n, hi = big * (r + 1) / n;
    std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);  // warm-up
    for (int64_t rep = 0; rep < options.repeats; ++rep) {
      TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(Span<Tensor* const>()));  // a plain barrier
      const auto start = Clock::now();
      for (int i = 0; i < 4; ++i) std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
      TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(Span<Tensor* const>()));
      if (r == 0) copy_s.push_back(std::chrono::duration<double>(Clock::now() - start).count() / 4);
    }
    return OkStatus();
  }));
  return static_cast<double>(big) / Median(copy_s);
}

// Correctness first: replica r holds r+1 everywhere; the sum is n(n+1)/2.
Status CheckSums(MirroredStrategy& strategy) {
  const int n = strategy.extended().num_local_replicas();
  return strategy.extended().RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    TOWER_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(ctx.device(), Shape{4099}, DType::kFloat32));
    std::fill_n(t.data<float>(), 4099, static_cast<float>(ctx.replica_id() + 1));
    Tensor* list[] = {&t};
    TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(list));
    const float want = static_cast<float>(n * (n + 1) / 2);
    for (int64_t i = 0; i < 4099; ++i) {
      if (t.data<float>()[i] != want) {
        return InternalError("all-reduce gave " + std::to_string(t.data<float>()[i]) +
                             " at " + std::to_string(i) + ", want " + std::to_string(want));
      }
    }
    return OkStatus();
  });
}

// One line of the table: the all-reduce of `bytes` per replica against memcpy of the same
// bytes on the same threads.
Status TimeOneSize(MirroredStrategy& strategy, const Options& options, int64_t bytes,
                   double memcpy_nt) {
  const int n = strategy.extended().num_local_replicas();
  const int64_t elements = bytes / 4;
  // Iterations per window: about target_ms at a guessed 2 µs + 10 GB/s, at least 5.
  const double guess_s = 2e-6 + static_cast<double>(bytes) * n / 10e9;
  const int64_t iters =
      std::max<int64_t>(5, static_cast<int64_t>(options.target_ms * 1e-3 / guess_s));
  std::vector<double> reduce_s, copy_s;
  // Timed on replica 0; every replica runs the same loop. Zeros: the sums stay finite.
  TOWER_RETURN_IF_ERROR(strategy.extended().RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    TOWER_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(ctx.device(), Shape{elements}, DType::kFloat32));
    TOWER_ASSIGN_OR_RETURN(Tensor src, Tensor::Zeros(ctx.device(), Shape{elements}, DType::kFloat32));
    TOWER_ASSIGN_OR_RETURN(Tensor dst, Tensor::Zeros(ctx.device(), Shape{elements}, DType::kFloat32));
    Tensor* list[] = {&t};
    const int r = ctx.replica_id();
    for (int64_t i = 0; i < std::min<int64_t>(iters, 20); ++i) {
      TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(list));  // warm-up, and every page touched
    }
    for (int64_t rep = 0; rep < options.repeats; ++rep) {
      TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(list));  // start together
      auto start = Clock::now();
      for (int64_t i = 0; i < iters; ++i) TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(list));
      if (r == 0)
        reduce_s.push_back(std::chrono::duration<double>(Clock::now() - start).count() / iters);
      // For reference: the same threads copy the same bytes, each its 1/n share of a
      // buffer of `bytes`, between two barriers.
      const int64_t lo = elements * r / n, hi = elements * (r + 1) / n;
      const int64_t copy_iters = std::max<int64_t>(iters, 5);
      TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(Span<Tensor* const>()));  // a plain barrier
      start = Clock::now();
      for (int64_t i = 0; i < copy_iters; ++i) {
        std::memcpy(dst.data<float>() + lo, src.data<float>() + lo, (hi - lo) * sizeof(float));
        std::swap(src, dst);
      }
      TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(Span<Tensor* const>()));
      if (r == 0) {
        copy_s.push_back(std::chrono::duration<double>(Clock::now() - start).count() / copy_iters);
      }
    }
    return OkStatus();
  }));
  const double t = Median(reduce_s);
  const double algbw = static_cast<double>(bytes) / t;
  const double busbw = algbw * 2.0 * (n - 1) / n;
  const double memcpy_bw = static_cast<double>(bytes) / Median(copy_s);
  std::printf("%12lld %10lld %12.2f %12.2f %12.2f %10.2f %14.2f\n",
              static_cast<long long>(bytes), static_cast<long long>(iters), t * 1e6,
              algbw / 1e9, busbw / 1e9, busbw / memcpy_nt, memcpy_bw / 1e9);
  std::fflush(stdout);
  return OkStatus();
}

Status Run(const Options& options, const FlagParser& parser) {
  Context& context = Context::Global();
  TOWER_RETURN_IF_ERROR(ApplyDeviceFlags(options.device, context));
  if (options.strategy.devices.empty() && options.strategy.replicas < 2) {
    return InvalidArgumentError("--replicas must be at least 2");
  }
  TOWER_RETURN_IF_ERROR(CheckStrategyFlags(options.strategy, parser));
  TOWER_ASSIGN_OR_RETURN(const MirroredStrategyOptions mirrored,
                         ApplyStrategyFlags(options.strategy, options.device, context));
  if (mirrored.devices.size() < 2) {
    return InvalidArgumentError("--devices must name at least 2 devices");
  }
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<MirroredStrategy> strategy,
                         MirroredStrategy::Create(mirrored));
  const int n = strategy->extended().num_local_replicas();
  CrossDeviceOps& ops = strategy->extended().cross_device_ops();

  // The roofline: one large memcpy, split over the replica threads (as the all-reduce is).
  const size_t big = static_cast<size_t>(options.memcpy_mb) << 20;
  const double memcpy_1t = SingleThreadMemcpy(big, static_cast<int>(options.repeats));
  TOWER_ASSIGN_OR_RETURN(const double memcpy_nt, ThreadedMemcpy(*strategy, big, options));
  const double round_trip_ns = CrossCoreRoundTripNs(static_cast<int>(options.repeats));
  std::printf("# allreduce_bench: %d replicas, cross-device ops %s; memcpy %lld MB: 1 thread "
              "%.2f GB/s, %d threads %.2f GB/s (roofline); cross-core round trip %.0f ns\n",
              n, ops.name().c_str(), static_cast<long long>(options.memcpy_mb), memcpy_1t / 1e9,
              n, memcpy_nt / 1e9, round_trip_ns);
  std::printf("%12s %10s %12s %12s %12s %10s %14s\n", "bytes", "iters", "latency_us",
              "algbw_GB/s", "busbw_GB/s", "bus/memcpy", "memcpy_size_GB/s");

  TOWER_RETURN_IF_ERROR(CheckSums(*strategy));
  for (int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 2) {
    TOWER_RETURN_IF_ERROR(TimeOneSize(*strategy, options, bytes, memcpy_nt));
  }
  return OkStatus();
}

}  // namespace
}  // namespace tower

int main(int argc, char** argv) {
  tower::Options options;
  options.strategy.replicas = 2;  // an all-reduce needs two
  tower::FlagParser parser("allreduce_bench");
  parser.AddInt("min-bytes", &options.min_bytes, "smallest size per replica");
  parser.AddInt("max-bytes", &options.max_bytes, "largest size per replica");
  parser.AddInt("repeats", &options.repeats, "timed windows per size; the median is printed");
  parser.AddDouble("target-ms", &options.target_ms, "about how long one timed window runs");
  parser.AddInt("memcpy-mb", &options.memcpy_mb, "size of the roofline memcpy, MB");
  tower::AddStrategyFlags(&parser, &options.strategy);
  tower::AddDeviceFlags(&parser, &options.device);
  return tower::bench::RunMain(parser, argc, argv, [&] { return tower::Run(options, parser); });
}
