// train_bench: training throughput of the workloads of docs/BENCHMARKS.md.
//
//   bazel-bin/bench/train_bench --workload=linreg --replicas=2
//   bazel-bin/bench/train_bench --workload=mlp --replicas=2 --window-s=2
//   bazel-bin/bench/train_bench --workload=mlp --replicas=1 --intra-op-threads=2
//
// Prints, after warm-up, one line per run (two with --ab-deterministic: today's path and
// deterministic mode, whose timed windows alternate):
//   workload=mlp replicas=2 steps_per_s=… samples_per_s=… gflops=… params=… ...
// with the median of --repeats timed windows (every window's figure follows in `runs=`),
// each window --window-s seconds long (as the PyTorch peers' windows): its step count comes
// from the warm-up's rate (--steps fixes it instead), and `loss_last` shows the weights the
// figure was taken on (a throughput on diverged weights is worthless);
// and the peak memory of each replica's device against the bytes the step needs
// (parameters + gradients + activations + optimizer state). `intra_op_threads` is the
// process's resolved setting (--intra-op-threads, 0 = one per core); how many of them a
// replica's kernels use is the strategy's share.
//
// The global batches are generated once (the synthetic data of docs/BENCHMARKS.md, --batches of them)
// and cycled, as the PyTorch peers do: the figure is the training step, not the generator.
// Every step is Sequential::TrainStep, the step Fit runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "data/dataset.h"
#include "device/context.h"
#include "device/device_flags.h"
#include "device/intra_op.h"
#include "model/dense.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/strategy_flags.h"
#include "util/flags.h"
#include "util/strings.h"
#include "util/trace.h"

namespace tower {
namespace {

struct Options {
  std::string workload = "linreg";
  int64_t steps = 0;    // 0: as many as fill window_s
  double window_s = 2;  // length of each timed window, seconds
  double warmup_s = 1;  // untimed steps first, this long
  int64_t repeats = 3;
  int64_t batches = 16;
  int64_t global_batch = 0;  // 0: the workload's (64 / 256)
  int64_t hidden = 0;        // mlp: width of the two hidden layers (0: 1024)
  int64_t depth = 0;         // mlp: hidden layers (0: 2)
  double lr = 0;             // 0: the workload's (0.2 / 0.01)
  StrategyFlags strategy;  // --replicas, --cross-device-ops, --deterministic, ...
  bool ab_deterministic = false;
  bool share_variables = true;      // MirroredStrategyOptions::share_variables
  bool ab_share_variables = false;  // a copy per replica and shared, side by side
  bool ab_fold_gradients = false;   // unfolded and folded, side by side
  bool share_packing = true;        // Sequential::set_share_weight_packing
  bool ab_batch_replica_rows = false;  // each replica computing its shard, and batched, side by side
  bool ab_share_packing = false;    // each replica packing its weights, and shared, side by side
  std::string precision = "float32";  // model/precision.h
  bool ab_precision = false;          // float32 and --precision side by side
  bool ab_trace = false;              // windows with the trace off and on, alternating
  bool check_loss = false;
  // Measure the cores' cache-line round trip right before and right after the timed
  // windows: which of the host's states the figures were taken in (docs/BENCHMARKS.md).
  bool round_trip = false;
  DeviceFlags device;
};

std::string Fmt(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

using bench::Median;

// One way of training the workload: a strategy (none for 1 replica of today's path) and a
// model over it, with the figures of its timed windows.
struct Trainer {
  std::string label;  // "" for the plain path
  std::unique_ptr<MirroredStrategy> strategy;
  std::unique_ptr<Sequential> model;
  std::vector<uint64_t> state_bytes;  // per replica: parameters + optimizer slots
  size_t next = 0;                    // the next batch
  double first_loss = 0, last_loss = 0;
  std::vector<double> rates;          // steps/s of each timed window
};

// What a trainer's strategy and model do: the options' choices, or an A/B's side.
struct Variant {
  int virtual_shards = 0;  // deterministic mode's (0: off)
  bool share_variables = true;
  bool fold = true;
  bool batch = true;
  bool share_packing = true;
  PrecisionPolicy precision = PrecisionPolicy::kFloat32;
};

// `flagged`: the strategy the flags ask for (strategy/strategy_flags.h); the variant's choices
// replace its own.
StatusOr<std::unique_ptr<Trainer>> MakeTrainer(const Options& options, const Variant& variant,
                                               MirroredStrategyOptions flagged,
                                               const data::Dataset& dataset) {
  auto trainer = std::make_unique<Trainer>();
  Context& context = Context::Global();
  if (variant.virtual_shards > 0 && flagged.devices.empty()) {
    // One device still runs the virtual shards one by one, under a strategy (as tower train).
    flagged.devices = {DeterministicDefaultDevice(context)};
  }
  if (!flagged.devices.empty()) {
    MirroredStrategyOptions mirrored = std::move(flagged);
    mirrored.virtual_shards = variant.virtual_shards;
    mirrored.share_variables = variant.share_variables;
    mirrored.fold_replica_gradients = variant.fold;
    mirrored.batch_replica_rows = variant.batch;
    TOWER_ASSIGN_OR_RETURN(trainer->strategy, MirroredStrategy::Create(mirrored));
  }
  std::vector<std::shared_ptr<Layer>> layers;
  if (options.workload == "mlp") {
    for (int64_t i = 0; i < options.depth; ++i) layers.push_back(Dense(options.hidden, "relu"));
  }
  layers.push_back(Dense(1));
  trainer->model = std::make_unique<Sequential>(std::move(layers), 0);
  {
    std::unique_ptr<DistributionScope> scope;
    if (trainer->strategy != nullptr) scope = trainer->strategy->Scope();
    TOWER_RETURN_IF_ERROR(trainer->model->Compile(MeanSquaredErrorLoss(),
                                                  SGD(static_cast<float>(options.lr))));
  }
  TOWER_RETURN_IF_ERROR(trainer->model->SetPrecisionPolicy(variant.precision));
  trainer->model->set_share_weight_packing(variant.share_packing);
  TOWER_RETURN_IF_ERROR(trainer->model->Build(dataset.feature_dim()));
  Distribution* dist = trainer->model->distribution();
  for (int r = 0; r < dist->num_local_replicas(); ++r) {
    BfcAllocator& allocator = dist->replica_device(r)->allocator();
    trainer->state_bytes.push_back(allocator.GetStats().bytes_in_use);
    allocator.ResetPeakStats();
  }
  return trainer;
}

Status Steps(Trainer& trainer, const std::vector<data::Batch>& batches, int64_t count) {
  for (int64_t s = 0; s < count; ++s) {
    TOWER_ASSIGN_OR_RETURN(trainer.last_loss, trainer.model->TrainStep(batches[trainer.next]));
    trainer.next = (trainer.next + 1) % batches.size();
  }
  return OkStatus();
}

// `count` steps, timed to when the devices have done them: a one-GPU step returns before its
// backward ends, so the last one's work is waited for before the clock stops. Seconds.
StatusOr<double> TimedSteps(Trainer& trainer, const std::vector<data::Batch>& batches,
                            int64_t count) {
  const auto start = std::chrono::steady_clock::now();
  TOWER_RETURN_IF_ERROR(Steps(trainer, batches, count));
  TOWER_RETURN_IF_ERROR(trainer.model->WaitForDevices());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Untimed steps for `seconds`; returns their rate.
StatusOr<double> WarmUp(Trainer& trainer, const std::vector<data::Batch>& batches,
                        double seconds) {
  TOWER_ASSIGN_OR_RETURN(trainer.first_loss, trainer.model->TrainStep(batches[0]));
  trainer.next = 1 % batches.size();
  int64_t steps = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    TOWER_RETURN_IF_ERROR(Steps(trainer, batches, 1));
    ++steps;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  TOWER_RETURN_IF_ERROR(trainer.model->WaitForDevices());
  elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(steps) / elapsed;
}

// The FLOPs one sample costs a training step, as the step performs them (docs/BENCHMARKS.md,
// "FLOPs"): per Dense layer of k inputs and n units, 2kn for the forward product, 2kn for
// the weight gradient and 2kn for the input gradient, except the first layer's, which no
// step computes (nothing needs it). Bias, activations and the update are O(k + n): left out.
int64_t StepFlopsPerSample(const Sequential& model, int64_t feature_dim) {
  int64_t flops = 0;
  int64_t inputs = feature_dim;
  bool first = true;
  for (const auto& layer : model.layers()) {
    if (dynamic_cast<const DenseLayer*>(layer.get()) != nullptr) {
      const int64_t product = 2 * inputs * layer->output_dim();
      flops += (first ? 2 : 3) * product;
      first = false;
    }
    inputs = layer->output_dim();
  }
  return flops;
}

// `suffix` ends the line (empty, or " round_trip_ns=BEFORE,AFTER").
void Print(const Options& options, const Trainer& trainer, int64_t steps, int64_t params,
           int64_t feature_dim, const std::string& suffix) {
  const double steps_per_s = Median(trainer.rates);
  const double samples_per_s = steps_per_s * static_cast<double>(options.global_batch);
  const double gflops =
      static_cast<double>(StepFlopsPerSample(*trainer.model, feature_dim)) * samples_per_s / 1e9;
  // Memory: the worst replica's device peak against what the step needs per replica
  // (parameters + optimizer state, what Build left allocated; + gradients + activations,
  // each layer's input and output for the replica's rows). With two trainers on the same
  // devices (--ab-deterministic) the peaks mix both: the plain runs give the memory figure.
  Distribution* dist = trainer.model->distribution();
  const int n = dist->num_local_replicas();
  const int64_t rows = (options.global_batch + n - 1) / n;
  int64_t activation_floats = rows * feature_dim;
  for (const auto& layer : trainer.model->layers()) activation_floats += rows * layer->output_dim();
  double worst_ratio = 0;
  uint64_t worst_peak = 0, worst_needed = 0;
  for (int r = 0; r < n; ++r) {
    const AllocatorStats stats = dist->replica_device(r)->allocator().GetStats();
    const uint64_t needed = trainer.state_bytes[r] + static_cast<uint64_t>(params) * 4 +
                            static_cast<uint64_t>(activation_floats) * 4;
    const double ratio = static_cast<double>(stats.peak_bytes_in_use) / static_cast<double>(needed);
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst_peak = stats.peak_bytes_in_use;
      worst_needed = needed;
    }
  }
  std::string runs;
  for (double rate : trainer.rates) runs += (runs.empty() ? "" : ",") + Fmt("%.1f", rate);
  std::printf(
      "workload=%s replicas=%d steps_per_s=%.1f samples_per_s=%.0f gflops=%.2f params=%lld "
      "global_batch=%lld steps=%lld window_s=%.2f runs=%s cross_device_ops=%s "
      "peak_mem_bytes=%llu needed_bytes=%llu mem_ratio=%.3f loss_first=%.4g loss_last=%.4g "
      "intra_op_threads=%d virtual_shards=%d shared_variables=%d folded=%d shared_packing=%d "
      "batched=%d precision=%s%s\n",
      options.workload.c_str(), n, steps_per_s, samples_per_s, gflops,
      static_cast<long long>(params), static_cast<long long>(options.global_batch),
      static_cast<long long>(steps), static_cast<double>(steps) / steps_per_s, runs.c_str(),
      trainer.strategy != nullptr ? trainer.strategy->extended().cross_device_ops().name().c_str()
                                  : "none",
      static_cast<unsigned long long>(worst_peak), static_cast<unsigned long long>(worst_needed),
      worst_ratio, trainer.first_loss, trainer.last_loss, ResolvedIntraOpThreads(),
      dist->virtual_shards(), dist->ReplicasShareVariables() ? 1 : 0,
      trainer.strategy != nullptr && trainer.strategy->extended().folds_replica_gradients() ? 1 : 0,
      trainer.model->SharesWeightPacking() ? 1 : 0, dist->batched_groups() > 0 ? 1 : 0,
      std::string(PrecisionPolicyName(trainer.model->precision_policy())).c_str(), suffix.c_str());
}

// The trace's cost (util/trace.h, model/trace_callback.h): one trainer, timed windows with
// the trace off and on, in alternating order (off-on, on-off, ...) so that neither always
// runs second; and what a span costs when no trace runs (a relaxed load), per step.
Status TraceOverhead(const Options& options, Trainer& trainer,
                     const std::vector<data::Batch>& batches) {
  std::vector<double> off, on;
  int64_t events = 0;
  for (int64_t rep = 0; rep < options.repeats; ++rep) {
    for (int half = 0; half < 2; ++half) {
      const bool tracing = (half == 0) == (rep % 2 == 1);
      if (tracing) trace::Start();
      TOWER_ASSIGN_OR_RETURN(const double seconds, TimedSteps(trainer, batches, options.steps));
      if (tracing) events += static_cast<int64_t>(trace::Stop().size());
      (tracing ? on : off).push_back(static_cast<double>(options.steps) / seconds);
    }
  }
  // A span with no trace running, many times over.
  constexpr int64_t kSpans = 100000000;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < kSpans; ++i) {
    trace::Span span("off", trace::Category::kStep);
    asm volatile("" ::: "memory");
  }
  const double span_ns = std::chrono::duration<double, std::nano>(
                             std::chrono::steady_clock::now() - start).count() / kSpans;
  const double steps_on = static_cast<double>(options.steps * options.repeats);
  const double events_per_step = static_cast<double>(events) / steps_on;
  const double off_rate = Median(off), on_rate = Median(on);
  std::string off_runs, on_runs;
  for (double rate : off) off_runs += (off_runs.empty() ? "" : ",") + Fmt("%.1f", rate);
  for (double rate : on) on_runs += (on_runs.empty() ? "" : ",") + Fmt("%.1f", rate);
  std::printf(
      "trace_overhead workload=%s replicas=%d steps=%lld off_steps_per_s=%.1f "
      "on_steps_per_s=%.1f on_vs_off=%.4f events_per_step=%.1f off_span_ns=%.3f "
      "off_cost_per_step_fraction=%.2e off_runs=%s on_runs=%s\n",
      options.workload.c_str(), trainer.model->distribution()->num_local_replicas(),
      static_cast<long long>(options.steps), off_rate, on_rate, on_rate / off_rate,
      events_per_step, span_ns, events_per_step * span_ns * 1e-9 * off_rate, off_runs.c_str(),
      on_runs.c_str());
  std::fflush(stdout);
  return OkStatus();
}

// The workload's defaults filled in, and every option checked before anything is built.
Status CheckOptions(const FlagParser& parser, Options* options_out) {
  Options& options = *options_out;
  const bool mlp = options.workload == "mlp";
  if (!mlp && options.workload != "linreg") {
    return InvalidArgumentError("--workload must be linreg or mlp, not '" + options.workload + "'");
  }
  if (options.global_batch <= 0) options.global_batch = mlp ? 256 : 64;
  if (options.lr <= 0) options.lr = mlp ? 0.01 : 0.2;
  if (options.hidden <= 0) options.hidden = 1024;
  if (options.depth <= 0) options.depth = 2;
  if (!(options.window_s > 0) || !(options.warmup_s > 0)) {
    return InvalidArgumentError("--window-s and --warmup-s must be positive");
  }
  if (options.repeats < 1 || options.batches < 1) {
    return InvalidArgumentError("--repeats and --batches must be at least 1");
  }
  TOWER_RETURN_IF_ERROR(CheckStrategyFlags(options.strategy, parser,
                                           /*virtual_shards_used=*/options.ab_deterministic));
  if (options.ab_deterministic && options.strategy.deterministic) {
    return InvalidArgumentError("give --deterministic or --ab-deterministic, not both");
  }
  if (static_cast<int>(options.ab_deterministic) + static_cast<int>(options.ab_share_variables) +
          static_cast<int>(options.ab_precision) + static_cast<int>(options.ab_trace) +
          static_cast<int>(options.ab_fold_gradients) +
          static_cast<int>(options.ab_share_packing) +
          static_cast<int>(options.ab_batch_replica_rows) > 1) {
    return InvalidArgumentError("give one of --ab-deterministic, --ab-share-variables, "
                                "--ab-precision, --ab-trace, --ab-fold-gradients, "
                                "--ab-share-packing and --ab-batch-replica-rows");
  }

  return OkStatus();
}

// The trainers' variants: the one the options choose, or an A/B's two sides, which differ
// from it in the one choice the A/B names.
std::vector<Variant> Sides(const Options& options, const MirroredStrategyOptions& flagged,
                           PrecisionPolicy precision) {
  Variant chosen;
  chosen.virtual_shards = flagged.virtual_shards;
  chosen.share_variables = options.share_variables;
  chosen.fold = flagged.fold_replica_gradients;
  chosen.batch = flagged.batch_replica_rows;
  chosen.share_packing = options.share_packing;
  chosen.precision = precision;
  // An A/B's two sides: what differs from the chosen variant, first side first.
  std::vector<Variant> sides;
  for (int side = 0; side < 2; ++side) {
    Variant variant = chosen;
    if (options.ab_deterministic) {
      variant.virtual_shards = side == 0 ? 0 : static_cast<int>(options.strategy.virtual_shards);
    } else if (options.ab_share_variables) {
      variant.share_variables = side == 1;
    } else if (options.ab_precision) {
      if (side == 0) variant.precision = PrecisionPolicy::kFloat32;
    } else if (options.ab_fold_gradients) {
      variant.fold = side == 1;
    } else if (options.ab_share_packing) {
      variant.share_packing = side == 1;
    } else if (options.ab_batch_replica_rows) {
      variant.batch = side == 1;
    } else if (side == 1) {
      break;  // no A/B: one trainer
    }
    sides.push_back(variant);
  }
  return sides;
}

data::SyntheticOptions SyntheticData(const Options& options) {
  data::SyntheticOptions synthetic;
  synthetic.name = options.workload;
  synthetic.rows = options.global_batch * options.batches;
  return synthetic;
}

// The distinct global batches, generated once and cycled by the timed steps.
StatusOr<std::vector<data::Batch>> GlobalBatches(const Options& options,
                                                 const data::Dataset& dataset) {
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<data::Iterator> it,
                         dataset.Batch(options.global_batch, true).MakeIterator());
  std::vector<data::Batch> batches;
  while (true) {
    TOWER_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, it->Next());
    if (!batch.has_value()) break;
    batches.push_back(std::move(*batch));
  }
  return batches;
}

Status Run(Options options, const FlagParser& parser) {
  TOWER_RETURN_IF_ERROR(CheckOptions(parser, &options));
  TOWER_ASSIGN_OR_RETURN(const PrecisionPolicy precision,
                         ParsePrecisionPolicy(options.precision));
  // ---- Devices (as `tower train` configures them).
  Context& context = Context::Global();
  TOWER_RETURN_IF_ERROR(ApplyDeviceFlags(options.device, context));
  TOWER_ASSIGN_OR_RETURN(const MirroredStrategyOptions flagged,
                         ApplyStrategyFlags(options.strategy, options.device, context));

  // ---- The data: BENCHMARKS.md's generator, materialised once.
  TOWER_ASSIGN_OR_RETURN(data::Dataset dataset, data::Dataset::Synthetic(SyntheticData(options)));
  TOWER_ASSIGN_OR_RETURN(const std::vector<data::Batch> batches, GlobalBatches(options, dataset));

  // ---- The trainers: one, or today's path and deterministic mode side by side, whose
  // timed windows alternate so that the machine's noise falls on both alike.
  std::vector<std::unique_ptr<Trainer>> trainers;
  const std::vector<Variant> sides = Sides(options, flagged, precision);
  for (const Variant& variant : sides) {
    TOWER_ASSIGN_OR_RETURN(trainers.emplace_back(),
                           MakeTrainer(options, variant, flagged, dataset));
  }
  int64_t params = 0;
  for (const Variable* v : trainers[0]->model->trainable_variables()) {
    params += v->shape().num_elements();
  }

  // ---- Warm-up (its rate sizes the windows: the slowest trainer's fills --window-s),
  // then timed windows.
  double slowest = 0;
  for (auto& trainer : trainers) {
    TOWER_ASSIGN_OR_RETURN(double rate, WarmUp(*trainer, batches, options.warmup_s));
    slowest = slowest == 0 ? rate : std::min(slowest, rate);
  }
  if (options.steps <= 0) {
    options.steps = std::max<int64_t>(5, static_cast<int64_t>(options.window_s * slowest));
  }
  if (options.ab_trace) return TraceOverhead(options, *trainers[0], batches);
  const double round_trip_before_ns = options.round_trip ? bench::CrossCoreRoundTripNs(1) : 0;
  for (int64_t rep = 0; rep < options.repeats; ++rep) {
    for (auto& trainer : trainers) {
      TOWER_ASSIGN_OR_RETURN(const double seconds, TimedSteps(*trainer, batches, options.steps));
      trainer->rates.push_back(static_cast<double>(options.steps) / seconds);
    }
  }
  const std::string suffix =
      options.round_trip ? " round_trip_ns=" + Fmt("%.0f", round_trip_before_ns) + "," +
                               Fmt("%.0f", bench::CrossCoreRoundTripNs(1))
                         : "";
  for (const auto& trainer : trainers) {
    Print(options, *trainer, options.steps, params, dataset.feature_dim(), suffix);
  }
  std::fflush(stdout);
  for (const auto& trainer : trainers) {
    if (options.check_loss && !(trainer->last_loss < trainer->first_loss)) {
      return InternalError("the loss did not fall: " + Fmt("%g", trainer->first_loss) + " -> " +
                           Fmt("%g", trainer->last_loss));
    }
  }
  return OkStatus();
}

}  // namespace
}  // namespace tower

int main(int argc, char** argv) {
  tower::Options options;
  tower::FlagParser parser("train_bench");
  parser.AddString("workload", &options.workload, "linreg or mlp (docs/BENCHMARKS.md)");
  parser.AddDouble("window-s", &options.window_s, "seconds per timed window (the peers' too)");
  parser.AddInt("steps", &options.steps, "timed steps per window instead (0: fill --window-s)");
  parser.AddDouble("warmup-s", &options.warmup_s, "untimed steps first, seconds");
  parser.AddInt("repeats", &options.repeats, "timed windows; the median is printed");
  parser.AddInt("batches", &options.batches, "distinct global batches, generated once and cycled");
  parser.AddInt("global-batch", &options.global_batch, "rows per step (0: 64 linreg, 256 mlp)");
  parser.AddInt("hidden", &options.hidden, "mlp hidden width (0: 1024), for sweeps");
  parser.AddInt("depth", &options.depth, "mlp hidden layers (0: 2), for sweeps");
  parser.AddDouble("lr", &options.lr, "SGD learning rate (0: 0.2 linreg, 0.01 mlp)");
  parser.AddBool("ab-deterministic", &options.ab_deterministic,
                 "today's path and deterministic mode side by side, timed windows alternating "
                 "(one line each)");
  parser.AddString("precision", &options.precision,
                   "float32, mixed_bfloat16 or mixed_float16 (model/precision.h)");
  parser.AddBool("ab-trace", &options.ab_trace,
                 "the step with the trace (--trace) off and on, timed windows alternating, and "
                 "a span's cost with no trace running (one line, trace_overhead ...)");
  parser.AddBool("ab-precision", &options.ab_precision,
                 "float32 and --precision side by side, timed windows alternating (one line "
                 "each, ending precision=...)");
  parser.AddBool("share-variables", &options.share_variables,
                 "logical CPU replicas share one copy of the variables (default on)");
  parser.AddBool("ab-share-variables", &options.ab_share_variables,
                 "a copy per replica and one shared copy side by side, timed windows "
                 "alternating (one line each)");
  parser.AddBool("ab-fold-gradients", &options.ab_fold_gradients,
                 "unfolded and folded gradients side by side, timed windows alternating (one "
                 "line each, folded=0|1)");
  parser.AddBool("share-packing", &options.share_packing,
                 "replicas that share a thread and their weights pack each weight once per "
                 "step (default on)");
  parser.AddBool("ab-share-packing", &options.ab_share_packing,
                 "each replica packing its weights and one packing per thread side by side, "
                 "timed windows alternating (one line each, shared_packing=0|1)");
  parser.AddBool("ab-batch-replica-rows", &options.ab_batch_replica_rows,
                 "each replica computing its own shard and batched replicas side by side, "
                 "timed windows alternating (one line each, batched=0|1)");
  parser.AddBool("check-loss", &options.check_loss, "fail unless the loss fell (smoke test)");
  parser.AddBool("round-trip", &options.round_trip,
                 "print round_trip_ns=BEFORE,AFTER: the cores' cache-line round trip around the "
                 "timed windows");
  tower::AddStrategyFlags(&parser, &options.strategy);
  tower::AddDeviceFlags(&parser, &options.device);
  return tower::bench::RunMain(parser, argc, argv, [&] { return tower::Run(options, parser); });
}
