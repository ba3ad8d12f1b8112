#include "strategy/step/step_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "ops/math_ops.h"
#include "strategy/step/numerics.h"
#include "util/cache_line.h"
#include "util/fiber.h"
#include "strategy/collectives/flight_recorder.h"
#include "util/trace.h"

namespace tower {

// What every replica of a step reads, and what replica 0 finds, kept from step to step. The
// replicas' std::function is built once: made on the caller's stack for every step, it was
// written there every step, and a replica on another core fetched that line before it could
// fetch the step's state (two dependent transfers between cores before a replica could
// start; now one).
struct StepRunner::ReplicaStep {
  // The function holds one pointer inline (no allocation).
  explicit ReplicaStep(StepRunner* runner)
      : fn([runner](ReplicaContext& ctx) { return runner->RunReplica(ctx); }) {}

  alignas(kCacheLineBytes) const std::function<Status(ReplicaContext&)> fn;
  // Written by the caller before each run; read-only while the replicas run. One cache line
  // (the static_assert below): the caller rewrites it every step, and a replica on another
  // core fetches each of its lines before its step can start. A 2-replica `linreg` step
  // (~5 µs) ran at 0.92× the speed of the step before the StepRunner with this state on two
  // lines, and 0.98–0.99× on one (2026-11-30, 2-core VM). Hence the request's fields flat,
  // the widest first, and the flags last.
  struct alignas(kCacheLineBytes) State {
    Distribution* dist = nullptr;
    const data::Batch* batch = nullptr;
    std::vector<float>* predictions = nullptr;  // StepRequest::predictions
    int64_t in_dim = 0, out_dim = 0;
    int64_t iteration = 0;  // StepRequest::iteration
    int32_t micro_batches = 1;
    float loss_scale = 0;           // 0: off
    bool training = false;          // StepRequest::training
    bool gather = false;            // other workers' predictions come with the loss's sum
    bool update_in_reduce = false;  // the model updates slices as the sums form
    bool batched = false;           // run once per batch of replicas (RunOnReplicaBatches)
    bool check_numerics = false;
    bool record_norm = false;
    bool time_reducer = false;  // replica 0 times its reducer calls
    bool step_waits_for_device = false;
  } state;
  static_assert(sizeof(State) == kCacheLineBytes, "a replica fetches one line to start a step");
  // What replica 0 finds during the step, on lines of their own: the other replicas read
  // `state` while replica 0 writes these.
  struct alignas(kCacheLineBytes) Results {
    double loss = 0;     // after the all-reduce every replica holds the same
    bool finite = true;  // under loss scaling: every summed gradient was finite
    double all_reduce_seconds = 0;
    double gradient_norm = std::numeric_limits<double>::quiet_NaN();
  } results;
};

namespace {

// check_numerics: OK, or InvalidArgument naming the first NaN or Inf of `tensor`.
Status CheckFinite(const Tensor& tensor, const std::string& what, const std::string& step) {
  TOWER_ASSIGN_OR_RETURN(std::optional<NonFinite> found, FirstNonFinite(tensor));
  if (!found.has_value()) return OkStatus();
  return InvalidArgumentError("check-numerics: " + step + ": " + what + " has " +
                              (found->nan ? "NaN" : "Inf") + " at element " +
                              std::to_string(found->index) + " of " +
                              tensor.shape().ToString() +
                              " (lower the learning rate, or check the data)");
}

// A non-finite tensor's code for check-numerics across replicas: 2 · (which + 1), + 1 for
// NaN (0: every value finite); `which` is 0 for the loss, k + 1 for gradient k in backward
// order. Small integers: exact in the float32 all-reduce.
StatusOr<int> NonFiniteCode(const Tensor& tensor, int which) {
  TOWER_ASSIGN_OR_RETURN(std::optional<NonFinite> found, FirstNonFinite(tensor));
  if (!found.has_value()) return 0;
  return 2 * (which + 1) + (found->nan ? 1 : 0);
}

// "the loss", or the model's name of gradient which − 1.
std::string DescribeNonFinite(const StepModel& model, int which) {
  return which == 0 ? "the loss" : model.DescribeGradient(static_cast<size_t>(which - 1));
}

// check-numerics with several replicas in sync: every replica's first non-finite tensor of
// its own (`code`, NonFiniteCode), exchanged by one all-reduce, so that every replica fails
// alike, naming the first replica (lowest global index) with one.
Status CheckReplicasNumerics(const StepModel& model, ReplicaContext& ctx, int code,
                             int64_t iteration) {
  const int replicas = ctx.num_replicas_in_sync();
  std::vector<float> codes(static_cast<size_t>(replicas), 0.0f);
  codes[ctx.global_replica_id()] = static_cast<float>(code);
  TOWER_ASSIGN_OR_RETURN(Tensor all, Tensor::FromHost(ctx.device(), Shape{replicas}, codes));
  Tensor* exchanged[] = {&all};
  TOWER_RETURN_IF_ERROR(ctx.AllReduceSum(exchanged));
  TOWER_RETURN_IF_ERROR(ctx.FinishReductions());
  TOWER_ASSIGN_OR_RETURN(codes, all.ToHost());
  for (int g = 0; g < replicas; ++g) {
    const int found = static_cast<int>(codes[g]);
    if (found == 0) continue;
    return InvalidArgumentError(
        "check-numerics: global step " + std::to_string(iteration + 1) + ": replica " +
        std::to_string(g) + " of " + std::to_string(replicas) + " was first: " +
        DescribeNonFinite(model, found / 2 - 1) + " has " + (found % 2 == 1 ? "NaN" : "Inf") +
        " in its own values, before the all-reduce (lower the learning rate, or check the "
        "data of that replica's rows)");
  }
  return OkStatus();
}

// check_numerics after the all-reduce: the loss, then the gradients in backward order. Every
// replica holds the same sums, so all of them stop at the same step with the same message
// (none is left waiting in a collective).
Status CheckSummedNumerics(const StepModel& model, const ReplicaPass& pass, bool training,
                           int64_t iteration) {
  const std::string step = "global step " + std::to_string(iteration + 1);
  TOWER_RETURN_IF_ERROR(CheckFinite(pass.loss, "the loss", step));
  if (!training) return OkStatus();
  const GradientLayout layout = model.Gradients();
  for (size_t b = 0; b < layout.variable.size(); ++b) {
    TOWER_RETURN_IF_ERROR(
        CheckFinite(pass.gradients[layout.variable[b]], model.DescribeGradient(b), step));
  }
  return OkStatus();
}

// The whole batch's outputs [global_rows, out_dim] on every replica of every worker, once
// summed over replicas: each replica's own rows, zeros elsewhere (x + 0 is exact).
StatusOr<Tensor> OwnRowsOfAll(Device* device, const Tensor& outputs, RowRange mine,
                              int64_t global_rows, int64_t out_dim) {
  std::vector<float> all(static_cast<size_t>(global_rows * out_dim), 0.0f);
  if (mine.count > 0) TOWER_RETURN_IF_ERROR(outputs.ToHostBytes(all.data() + mine.first * out_dim));
  return Tensor::FromHost(device, Shape{global_rows, out_dim}, all);
}

// A number no step of any model in this process had before (StepModel::SetWeightsVersion).
// Alone on its cache line: the caller writes it every step, and the statics the linker puts
// beside it (the replicas' FiberLocal slots, read by every replica's core as its step
// starts) would otherwise move between cores with it.
uint64_t NextWeightsVersion() {
  static CacheLinePadded<std::atomic<uint64_t>> last;
  return last.value.fetch_add(1, std::memory_order_relaxed) + 1;
}

// A replica's reducer as the model's backward sees it (GradientSink), and as the runner calls
// it: when `seconds` is set, the wall time spent inside Add and Finish is added to it
// (StepResult::all_reduce_seconds); when `first_nonfinite` is set and still 0, each gradient
// is checked before it is summed (check-numerics across replicas). Lives on the stack.
class ReplicaReducer final : public GradientSink {
 public:
  ReplicaReducer(GradientReducer& reducer, double* seconds, int* first_nonfinite)
      : reducer_(reducer), seconds_(seconds), first_nonfinite_(first_nonfinite) {}

  Status Begin(Span<const int64_t> gradient_bytes, int pass, int passes) {
    taken_ = 0;
    return reducer_.Begin(gradient_bytes, pass, passes);
  }
  StatusOr<Span<Tensor* const>> AddInto(size_t first, size_t count) override {
    return reducer_.RunningSums(first, count);
  }
  Status Take(Tensor* gradient) override {
    // This replica's own value, before the reducer sums it in place.
    ++taken_;
    if (first_nonfinite_ != nullptr && *first_nonfinite_ == 0) {
      TOWER_ASSIGN_OR_RETURN(*first_nonfinite_, NonFiniteCode(*gradient, taken_));
    }
    return Timed([&] { return reducer_.Add(gradient); });
  }
  Status Finish(Span<Tensor* const> extra) {
    return Timed([&] { return reducer_.Finish(extra); });
  }
  bool HandOverSums(SummedGradientSink* sink) { return reducer_.HandOverSums(sink); }

 private:
  template <typename Call>
  Status Timed(const Call& call) {
    if (seconds_ == nullptr) return call();
    const auto start = std::chrono::steady_clock::now();
    Status status = call();
    *seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return status;
  }

  GradientReducer& reducer_;
  double* seconds_;
  int* first_nonfinite_;
  int taken_ = 0;  // gradients of this pass so far
};

// The model's update of the summed slices the reducer hands over (update inside the
// all-reduce). The reducer calls the sink of the replica that sums: this one.
class UpdateFromSums final : public SummedGradientSink {
 public:
  UpdateFromSums(const StepModel& model, int replica) : model_(model), replica_(replica) {}
  void Consume(size_t gradient, int64_t begin, int64_t end, const float* sum) override {
    model_.UpdateSlice(replica_, gradient, begin, end, sum);
  }

 private:
  const StepModel& model_;
  int replica_;
};

// Host scratch of a replica's thread (its fiber) for a pass over several shards: no
// allocation once sized.
struct RowsScratch {
  std::vector<float> features, targets, outputs;
  std::vector<int64_t> source_rows;
};

int64_t TotalRows(Span<const RowRange> ranges) {
  int64_t rows = 0;
  for (const RowRange& range : ranges) rows += range.count;
  return rows;
}

// Rows `ranges` of a row-major [rows, width] host matrix `data`, one after the other: a
// pointer into `data` for one range, else their copy in `*scratch`.
template <typename T>
const T* Rows(const T* data, int64_t width, Span<const RowRange> ranges,
              std::vector<T>* scratch) {
  if (ranges.size() == 1) return data + ranges[0].first * width;
  scratch->resize(static_cast<size_t>(TotalRows(ranges) * width));
  T* to = scratch->data();
  for (const RowRange& range : ranges) {
    std::copy(data + range.first * width, data + range.end() * width, to);
    to += range.count * width;
  }
  return scratch->data();
}

// The inverse for a pass's outputs [rows of `ranges` in order, width]: each range's rows
// to its place in `to` ([global rows, width], host).
Status ScatterRows(const Tensor& outputs, int64_t width, Span<const RowRange> ranges, float* to,
                   std::vector<float>* scratch) {
  if (ranges.size() == 1) return outputs.ToHostBytes(to + ranges[0].first * width);
  scratch->resize(static_cast<size_t>(TotalRows(ranges) * width));
  TOWER_RETURN_IF_ERROR(outputs.ToHostBytes(scratch->data()));
  const float* from = scratch->data();
  for (const RowRange& range : ranges) {
    std::copy(from, from + range.count * width, to + range.first * width);
    from += range.count * width;
  }
  return OkStatus();
}

// One pass's inputs on `device`: features [rows, in_dim] and the loss's targets, for the
// batch's rows `ranges` (one range, or a batched step's shards one after the other).
struct PassInputs {
  Tensor features;
  Tensor targets;
};
StatusOr<PassInputs> MakePassInputs(const StepModel& model, Device* device,
                                    const data::Batch& batch, int64_t in_dim,
                                    Span<const RowRange> ranges, int64_t rows,
                                    RowsScratch& scratch) {
  PassInputs inputs;
  TOWER_ASSIGN_OR_RETURN(
      inputs.features,
      Tensor::FromHostBytes(device, Shape{rows, in_dim}, DType::kFloat32,
                            Rows(batch.features.data(), in_dim, ranges, &scratch.features)));
  TOWER_ASSIGN_OR_RETURN(
      inputs.targets,
      model.PrepareTargets(device,
                           Rows(batch.targets.data(), batch.target_dim, ranges, &scratch.targets),
                           rows, batch.target_dim,
                           batch.source_rows.empty()
                               ? nullptr
                               : Rows(batch.source_rows.data(), 1, ranges, &scratch.source_rows)));
  return inputs;
}

// Every replica reads its loss: on a GPU this waits for the step's work, or, read early
// (PassOptions::start_loss_read), for its forward pass only.
StatusOr<float> ReadLoss(const Tensor& loss, bool started_early) {
  float value = 0;
  if (started_early) {
    TOWER_RETURN_IF_ERROR(loss.device()->stream().FinishRead(&value));
  } else {
    TOWER_RETURN_IF_ERROR(CheckLossIsOneFloat(loss));
    TOWER_RETURN_IF_ERROR(loss.ToHostBytes(&value));
  }
  return value;
}

// Clears a replica's pass when the step ends: nothing of a step outlives it (the next
// step's peak memory must not hold these).
struct ReleasePass {
  ReplicaPass& pass;
  ~ReleasePass() {
    pass.outputs = Tensor();
    pass.loss = Tensor();
    for (Tensor& gradient : pass.gradients) gradient = Tensor();
  }
};

// Turns the reducer's hand-over of sums to the model's slice updates on for a step, and off
// again when it ends.
struct HandOver {
  ReplicaReducer& reducer;
  bool on;
  ~HandOver() {
    if (on) reducer.HandOverSums(nullptr);
  }
};

// Replicas that share their variables multiply by the same weights: the step's own version
// lets them pack a weight once for all of them (the threads that multiply at once share the
// work; the replicas a thread runs later reuse it). No replica uses a weight after its
// update: an update follows the all-reduce of its gradient, which waits for every replica's
// backward through that layer, its input gradient's product included.
struct WeightsVersion {
  StepModel& model;
  WeightsVersion(StepModel& model, uint64_t version) : model(model) {
    model.SetWeightsVersion(version);
  }
  ~WeightsVersion() { model.SetWeightsVersion(0); }
};

}  // namespace

StepRunner::StepRunner(StepModel& model)
    : model_(model), replica_step_(std::make_unique<ReplicaStep>(this)) {}

StepRunner::~StepRunner() = default;

Status StepRunner::CheckSettings(const Distribution& distribution) const {
  const int micro_batches = settings_.micro_batches;
  const int shards = distribution.virtual_shards();
  const int replicas = distribution.num_replicas_in_sync();
  if (micro_batches > 1 && shards > 0 && shards / replicas < micro_batches) {
    return InvalidArgumentError(
        "gradient accumulation of " + std::to_string(micro_batches) + " micro-batches in "
        "deterministic mode: the virtual shards are the micro-batches, and " +
        std::to_string(shards) + " virtual shards over " + std::to_string(replicas) +
        " replicas give some replica only " + std::to_string(shards / replicas) +
        "; use at least " + std::to_string(micro_batches * replicas) + " virtual shards");
  }
  return OkStatus();
}

bool StepRunner::SharesWeightPacking(const Distribution& distribution) const {
  return settings_.share_weight_packing && distribution.ReplicasShareVariables() &&
         distribution.num_local_replicas() > 1;
}

Status StepRunner::RunReplica(ReplicaContext& ctx) {
  const ReplicaStep::State& step = replica_step_->state;
  ReplicaStep::Results& results = replica_step_->results;
  Distribution& dist = *step.dist;
  const data::Batch& batch = *step.batch;
  const bool training = step.training;
  const int r = ctx.replica_id();
  Device* device = ctx.device();
  trace::Span step_span(training ? "step" : "evaluation step", trace::Category::kStep,
                        static_cast<int>(step.iteration + 1));
  // One pass over the replica's shard, one per micro-batch, or one per virtual shard
  // (deterministic mode); the reducer keeps each pass's gradients and loss and sums them all
  // after the last. Scratch of this replica's thread (its fiber, where replicas share a
  // thread), reused step after step: no allocation once sized.
  static FiberLocal<std::vector<RowRange>> pass_rows;
  static FiberLocal<ReplicaPass> replica_pass;
  static FiberLocal<std::vector<RowRange>> computed_shards;
  static FiberLocal<RowsScratch> rows_scratch;
  std::vector<RowRange>& passes = pass_rows.Get();
  dist.PassRows(batch.rows, ctx.global_replica_id(), step.micro_batches, &passes);
  // check-numerics with several replicas: each notes its own first non-finite tensor.
  const bool check_across_replicas = step.check_numerics && dist.num_replicas_in_sync() > 1;
  int first_nonfinite = 0;
  ReplicaReducer reducer(ctx.gradient_reducer(),
                         training && r == 0 && step.time_reducer ? &results.all_reduce_seconds
                                                                 : nullptr,
                         check_across_replicas ? &first_nonfinite : nullptr);
  ReplicaPass& pass = replica_pass.Get();
  ReleasePass release{pass};
  UpdateFromSums update_from_sums(model_, r);
  HandOver hand_over{reducer, step.update_in_reduce && reducer.HandOverSums(&update_from_sums)};
  Tensor all_outputs;
  Tensor* extras[] = {&pass.loss, &all_outputs};  // no allocation per step
  const Span<Tensor* const> extra(extras, step.gather ? 2 : 1);
  // One replica on a GPU: its loss is final once forward has computed it (no other
  // replica's to add), so it is read then, and the step need not wait for backward and the
  // update (StepSettings::step_waits_for_device). A trace keeps the wait: its step spans
  // then cover the step's device work.
  const bool read_loss_early = training && !step.step_waits_for_device && passes.size() == 1 &&
                               dist.num_replicas_in_sync() == 1 &&
                               !device->stream().host_addressable() && !trace::Recording();
  // A batched step (Distribution::RunOnReplicaBatches) runs one pass over the shards of
  // every replica of the batch.
  std::vector<RowRange>& shards = computed_shards.Get();
  if (step.batched) dist.BatchShards(batch.rows, r, &shards);
  RowsScratch& scratch = rows_scratch.Get();
  const Span<const int64_t> gradient_bytes =
      training ? model_.Gradients().bytes : Span<const int64_t>();
  for (size_t p = 0; p < passes.size(); ++p) {
    const Span<const RowRange> ranges =
        step.batched ? Span<const RowRange>(shards) : Span<const RowRange>(&passes[p], 1);
    const RowRange rows = ranges.size() == 1 ? ranges[0] : RowRange{0, TotalRows(ranges)};
    TOWER_ASSIGN_OR_RETURN(PassInputs inputs, MakePassInputs(model_, device, batch, step.in_dim,
                                                             ranges, rows.count, scratch));
    PassOptions options;
    options.targets = &inputs.targets;
    options.loss_rows = batch.rows;
    if (step.loss_scale != 0) options.loss_scale = step.loss_scale;
    options.backward = training;
    options.sink = &reducer;
    options.start_loss_read = read_loss_early;
    TOWER_RETURN_IF_ERROR(
        reducer.Begin(gradient_bytes, static_cast<int>(p), static_cast<int>(passes.size())));
    const int code_before = first_nonfinite;
    TOWER_RETURN_IF_ERROR(model_.ForwardBackward(r, inputs.features, options, &pass));
    // The loss comes before every gradient: the first non-finite tensor when it is one.
    if (check_across_replicas && code_before == 0) {
      TOWER_ASSIGN_OR_RETURN(const int loss_code, NonFiniteCode(pass.loss, 0));
      if (loss_code != 0) first_nonfinite = loss_code;
    }
    // The loss rides in the last bucket: one all-reduce also gives every replica the
    // global loss (and, across workers, every row's prediction).
    if (step.gather) {
      TOWER_ASSIGN_OR_RETURN(all_outputs, OwnRowsOfAll(device, pass.outputs, rows, batch.rows,
                                                       step.out_dim));
    } else if (step.predictions != nullptr && rows.count > 0) {
      TOWER_RETURN_IF_ERROR(ScatterRows(pass.outputs, step.out_dim, ranges,
                                        step.predictions->data(), &scratch.outputs));
    }
    TOWER_RETURN_IF_ERROR(reducer.Finish(extra));
  }
  if (check_across_replicas) {
    TOWER_RETURN_IF_ERROR(CheckReplicasNumerics(model_, ctx, first_nonfinite, step.iteration));
  }
  if (step.check_numerics) {
    TOWER_RETURN_IF_ERROR(CheckSummedNumerics(model_, pass, training, step.iteration));
  }
  if (training) TOWER_RETURN_IF_ERROR(ApplyUpdate(ctx, pass, hand_over.on));
  TOWER_ASSIGN_OR_RETURN(const float loss_value, ReadLoss(pass.loss, read_loss_early));
  if (r == 0) results.loss = loss_value;
  if (step.gather && r == 0) {
    TOWER_RETURN_IF_ERROR(all_outputs.ToHostBytes(step.predictions->data()));
  }
  return OkStatus();
}

Status StepRunner::ApplyUpdate(ReplicaContext& ctx, ReplicaPass& pass, bool updated_in_reduce) {
  const ReplicaStep::State& step = replica_step_->state;
  ReplicaStep::Results& results = replica_step_->results;
  const int r = ctx.replica_id();
  const int64_t iteration = step.iteration;
  // Who updates the shared variables, each a slice: every replica, or in a batched step
  // every batch.
  const int updaters = step.batched ? step.dist->batched_groups() : 0;
  if (step.record_norm && r == 0) {
    // Every replica holds the same sums: replica 0 measures them, unscaled (the scale is a
    // power of two: dividing the norm is exact). Non-finite when the step will be skipped.
    TOWER_ASSIGN_OR_RETURN(const double norm, GlobalNorm(pass.gradients));
    results.gradient_norm = step.loss_scale != 0 ? norm / step.loss_scale : norm;
  }
  if (step.loss_scale != 0) {
    // Every replica holds the same sums: each decides alone, all alike.
    TOWER_ASSIGN_OR_RETURN(const bool finite, AllFinite(pass.gradients));
    if (r == 0) results.finite = finite;
    if (!finite) return OkStatus();
    // Unscaled (the scale is a power of two: exact), then the update.
    for (Tensor& gradient : pass.gradients) {
      TOWER_ASSIGN_OR_RETURN(gradient, ops::Scale(gradient, 1.0f / step.loss_scale));
    }
  } else if (updated_in_reduce) {
    return OkStatus();
  }
  trace::Span updating("update", trace::Category::kOptimizer);
  return model_.Update(r, iteration, pass.gradients, updaters);
}

StatusOr<StepResult> StepRunner::Run(Distribution& dist, const StepRequest& request) {
  const bool training = request.training;
  std::vector<float>* const predictions = request.predictions;
  if (predictions != nullptr) {
    predictions->assign(static_cast<size_t>(request.batch->rows * request.out_dim), 0.0f);
  }
  // The step every collective of it carries (flight records, fingerprints across workers).
  if (training) SetCurrentStep(request.iteration + 1);
  // Replicas that share their variables update them as the gradients' sums form, each its
  // slices of the all-reduce, while they are in cache (where the reducer can hand the sums
  // over; checking the numerics needs the summed gradients kept, and global-norm clipping
  // needs every sum before any update, so then they are not). Loss scaling decides after
  // every sum whether the step happens at all: no update inside the all-reduce either. Nor
  // when the step records the sums' global norm: like global-norm clipping, it needs every
  // sum kept.
  const bool scaling = training && settings_.loss_scale.has_value();
  const bool record_norm = training && settings_.record_gradient_norm;
  bool update_in_reduce = training && dist.ReplicasShareVariables() &&
                          !settings_.check_numerics && !scaling && !record_norm;
  if (update_in_reduce) {
    TOWER_ASSIGN_OR_RETURN(update_in_reduce, model_.PrepareSliceUpdates(request.iteration));
  }
  ReplicaStep& replica_step = *replica_step_;
  ReplicaStep::Results& results = replica_step.results;
  results = ReplicaStep::Results();
  ReplicaStep::State& step = replica_step.state;
  step.dist = &dist;
  step.batch = request.batch;
  step.predictions = predictions;
  step.in_dim = request.in_dim;
  step.out_dim = request.out_dim;
  step.iteration = request.iteration;
  step.training = training;
  // Other workers hold the other rows' predictions: they come with the loss's all-reduce.
  step.gather = predictions != nullptr && dist.num_replicas_in_sync() > dist.num_local_replicas();
  step.update_in_reduce = update_in_reduce;
  // Replicas batched per thread run the step once per batch, over the shards of all its
  // replicas, when each replica would run one pass (not under gradient accumulation) and no
  // check names the replica of a value (with several replicas, check-numerics names the
  // first one whose own values are not finite).
  step.batched =
      dist.batched_groups() > 0 && settings_.micro_batches == 1 && !settings_.check_numerics;
  step.check_numerics = settings_.check_numerics;
  step.record_norm = record_norm;
  step.time_reducer = settings_.record_step_times;
  step.step_waits_for_device = settings_.step_waits_for_device;
  step.micro_batches = settings_.micro_batches;
  step.loss_scale = scaling ? settings_.loss_scale->scale() : 0.0f;
  {
    // Only where the replicas share a weight's packing: otherwise every version stays 0.
    std::optional<WeightsVersion> weights_version;
    if (SharesWeightPacking(dist)) weights_version.emplace(model_, NextWeightsVersion());
    TOWER_RETURN_IF_ERROR(step.batched ? dist.RunOnReplicaBatches(replica_step.fn)
                                       : dist.RunOnReplicas(replica_step.fn));
  }
  if (scaling) settings_.loss_scale->Update(results.finite);
  StepResult result;
  result.loss = results.loss;
  result.applied = results.finite;
  result.loss_scale = step.loss_scale;
  result.all_reduce_seconds = results.all_reduce_seconds;
  result.gradient_norm =
      results.finite ? results.gradient_norm : std::numeric_limits<double>::quiet_NaN();
  return result;
}

StatusOr<std::vector<float>> StepRunner::Predict(Distribution& dist,
                                                const std::vector<float>& features, int64_t rows,
                                                int64_t in_dim, int64_t out_dim) {
  std::vector<float> outputs(static_cast<size_t>(rows * out_dim));
  const bool other_workers = dist.num_replicas_in_sync() > dist.num_local_replicas();
  TOWER_RETURN_IF_ERROR(dist.RunOnReplicas([&](ReplicaContext& ctx) -> Status {
    std::vector<RowRange> passes;
    dist.PassRows(rows, ctx.global_replica_id(), /*micro_batches=*/1, &passes);
    // Across workers, this replica's rows (zeros elsewhere) for one all-reduce.
    std::vector<float> mine(other_workers ? static_cast<size_t>(rows * out_dim) : 0, 0.0f);
    float* const destination = other_workers ? mine.data() : outputs.data();
    for (const RowRange& pass_rows : passes) {
      TOWER_ASSIGN_OR_RETURN(
          Tensor x, Tensor::FromHostBytes(ctx.device(), Shape{pass_rows.count, in_dim},
                                          DType::kFloat32, features.data() + pass_rows.first * in_dim));
      ReplicaPass pass;
      TOWER_RETURN_IF_ERROR(model_.ForwardBackward(ctx.replica_id(), x, PassOptions(), &pass));
      if (pass_rows.count > 0) {
        TOWER_RETURN_IF_ERROR(pass.outputs.ToHostBytes(destination + pass_rows.first * out_dim));
      }
    }
    if (!other_workers) return OkStatus();
    // Other workers hold the other rows: one all-reduce gives everyone all of them.
    TOWER_ASSIGN_OR_RETURN(Tensor gathered,
                           Tensor::FromHost(ctx.device(), Shape{rows, out_dim}, mine));
    TOWER_RETURN_IF_ERROR(ctx.AllReduceSum({&gathered}));
    TOWER_RETURN_IF_ERROR(ctx.FinishReductions());
    if (ctx.replica_id() != 0) return OkStatus();
    return gathered.ToHostBytes(outputs.data());
  }));
  return outputs;
}

Status StepRunner::SumAndUpdate(const Distribution& dist, ReplicaContext& ctx, int64_t iteration,
                                std::vector<Tensor>& gradients) {
  const GradientLayout layout = model_.Gradients();
  GradientReducer& reducer = ctx.gradient_reducer();
  TOWER_RETURN_IF_ERROR(reducer.Begin(layout.bytes, /*pass=*/0, /*passes=*/1));
  for (const size_t variable : layout.variable) {
    TOWER_RETURN_IF_ERROR(reducer.Add(&gradients[variable]));
  }
  TOWER_RETURN_IF_ERROR(reducer.Finish({}));
  TOWER_RETURN_IF_ERROR(model_.Update(ctx.replica_id(), iteration, gradients, /*updaters=*/0));
  // Shared variables: each replica updated a slice; none may read them before all have
  // (an all-reduce of nothing is the replicas' barrier).
  if (dist.ReplicasShareVariables()) TOWER_RETURN_IF_ERROR(ctx.AllReduceSum({}));
  return OkStatus();
}

Status StepRunner::UpdateEveryReplica(const Distribution& dist, int64_t iteration,
                                      const std::vector<Tensor>& gradients) {
  for (int r = 0; r < dist.num_local_replicas(); ++r) {
    TOWER_RETURN_IF_ERROR(model_.Update(r, iteration, gradients, /*updaters=*/0));
  }
  return OkStatus();
}

}  // namespace tower
