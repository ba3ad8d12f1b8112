#include "tools/train_command.h"
#include "tools/train_data.h"
#include "tools/train_stream.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>

#include "data/dataset.h"
#include "device/config.h"
#include "device/device_flags.h"
#include "model/callbacks.h"
#include "model/replica_step_log.h"
#include "model/trace_callback.h"
#include "model/dense.h"
#include "model/model_file.h"
#include "model/normalization.h"
#include "model/sequential.h"
#include "model/tensorboard/tensorboard_callback.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/collectives/mpi/worker_report.h"
#include "strategy/replica_devices.h"
#include "strategy/strategy_flags.h"
#include "strategy/strategy_from_environment.h"
#include "tools/output_paths.h"
#include "util/file.h"
#include "util/flags.h"
#include "strategy/collectives/flight_recorder.h"
#include "util/strings.h"

namespace tower {
namespace {

struct TrainFlags {
  std::string data;
  std::string target, features;  // --features: columns, .npz array or TFRecord features
  std::string layers;
  std::string loss = "mse";
  std::string optimizer = "sgd";
  double lr = -1;  // -1: the workload's (synthetic) or 0.01
  double momentum = 0;
  bool nesterov = false;
  double weight_decay = -1;  // -1: AdamW's default (0.004); adamw only
  std::string lr_schedule = "constant";
  int64_t warmup_steps = 0;
  double clip_value = 0;
  double clip_norm = 0;
  int64_t accumulate = 1;
  std::string precision = "float32";
  int64_t global_batch = 32;
  int64_t epochs = 0;
  int64_t steps = 0;
  bool shuffle = false;
  int64_t prefetch = -1;  // batches read ahead on a thread; -1: 2 on GPU replicas, 0 on CPUs
  bool drop_remainder = false;
  int64_t seed = 0;
  std::string init;
  std::string save;
  std::string metrics_out;
  std::string metrics;
  std::string tensorboard;  // log directory ("" off)
  std::string tensorboard_update_freq = "epoch";
  int64_t verbose = 1;
  // Fault tolerance.
  std::string backup;
  int64_t backup_every = 100;
  bool resume = false;
  bool check_numerics = false;
  // Validation.
  double validation_split = 0;
  std::string validation_data;
  int64_t early_stopping = -1;  // patience in epochs; -1: off
  bool normalize = false;
  bool normalize_target = false;
  std::string save_best;
  // Distribution.
  StrategyFlags strategy;  // --replicas, --devices, --cross-device-ops, ... (strategy/strategy_flags.h)
  bool log_device_placement = false;
  DeviceFlags device;
  StreamingFlags streaming;  // --stream, --shuffle-buffer, --shares (tools/train_stream.h)
  // Seeing inside a run.
  std::string trace;
  std::string trace_steps = "2:6";
  std::string flight_recorder;
};

// The models of the workloads of docs/BENCHMARKS.md, used when the flags leave them out, with a
// learning rate that trains them stably. (The mlp benchmark's SGD at 0.01 is a throughput
// setting: on targets of standard deviation ≈ 16 it makes the loss jump from 228 to ~2500 in
// three steps, and such dynamics amplify float rounding between runs a thousandfold.)
struct WorkloadDefaults {
  std::string layers;
  double lr;
};

WorkloadDefaults DefaultsFor(const std::string& synthetic_name) {
  if (synthetic_name == "mlp") return {"1024:relu,1024:relu,1", 0.002};
  if (synthetic_name == "linreg") return {"1", 0.2};
  return {"", 0.01};
}

StatusOr<std::vector<std::shared_ptr<Layer>>> ParseLayers(const std::string& spec) {
  if (spec.empty()) {
    return InvalidArgumentError("--layers is required for CSV data, e.g. --layers=64:relu,1");
  }
  StatusOr<std::vector<std::shared_ptr<Layer>>> layers = LayersFromSpec(spec);
  if (!layers.ok()) return layers.status().WithContext("--layers");
  return layers;
}

StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const TrainFlags& flags, double lr) {
  if (!(lr > 0) || !std::isfinite(lr)) {
    return InvalidArgumentError("--lr=" + std::to_string(lr) + " must be a positive number");
  }
  if (flags.momentum < 0 || flags.momentum >= 1) {
    return InvalidArgumentError("--momentum must be in [0, 1)");
  }
  if (flags.weight_decay != -1 && flags.optimizer != "adamw") {
    return InvalidArgumentError("--weight-decay applies to --optimizer=adamw");
  }
  if (flags.optimizer == "sgd") {
    return SGD(static_cast<float>(lr), static_cast<float>(flags.momentum), flags.nesterov);
  }
  if (flags.optimizer == "adam" || flags.optimizer == "adamw") {
    if (flags.momentum != 0 || flags.nesterov) {
      return InvalidArgumentError("--momentum and --nesterov apply to --optimizer=sgd");
    }
    if (flags.optimizer == "adam") return Adam(static_cast<float>(lr));
    const double decay = flags.weight_decay == -1 ? 0.004 : flags.weight_decay;
    if (!(decay >= 0) || !std::isfinite(decay)) {
      return InvalidArgumentError("--weight-decay=" + std::to_string(decay) +
                                  " must be a number >= 0");
    }
    return AdamW(static_cast<float>(lr), static_cast<float>(decay));
  }
  return InvalidArgumentError("--optimizer='" + flags.optimizer + "': use sgd, adam or adamw");
}

// The schedule, clipping and accumulation flags, applied to the optimizer and the model.
Status ConfigureTraining(const TrainFlags& flags, double lr, Optimizer& optimizer) {
  if (flags.warmup_steps < 0) {
    return InvalidArgumentError("--warmup-steps must be 0 or more, got " +
                                std::to_string(flags.warmup_steps));
  }
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<LearningRateSchedule> schedule,
                         ParseLearningRateSchedule(flags.lr_schedule, static_cast<float>(lr),
                                                   flags.warmup_steps));
  optimizer.set_schedule(std::move(schedule));
  GradientClipping clipping;
  clipping.clip_value = static_cast<float>(flags.clip_value);
  clipping.global_clip_norm = static_cast<float>(flags.clip_norm);
  Status clip = optimizer.SetClipping(clipping);
  if (!clip.ok()) return clip.WithContext("--clip-value / --clip-norm");
  return OkStatus();
}

// What a run trains (data, model, optimizer, batching, seed): a backup written by a run with
// another signature is not resumed. Replica counts may change between runs.
std::string RunSignature(const TrainFlags& flags, const std::string& layers, double lr) {
  return Join(std::vector<std::string>{
                  "data=" + flags.data, "target=" + flags.target, "layers=" + layers,
                  "loss=" + flags.loss, "optimizer=" + flags.optimizer,
                  "lr=" + std::to_string(lr), "momentum=" + std::to_string(flags.momentum),
                  "nesterov=" + std::to_string(flags.nesterov),
                  "weight-decay=" + std::to_string(flags.weight_decay),
                  "lr-schedule=" + flags.lr_schedule,
                  "warmup-steps=" + std::to_string(flags.warmup_steps),
                  "clip-value=" + std::to_string(flags.clip_value),
                  "clip-norm=" + std::to_string(flags.clip_norm),
                  "accumulate=" + std::to_string(flags.accumulate),
                  "precision=" + flags.precision,
                  "all-reduce-dtype=" + flags.strategy.all_reduce_dtype,
                  "global-batch=" + std::to_string(flags.global_batch),
                  "shuffle=" + std::to_string(flags.shuffle),
                  "drop-remainder=" + std::to_string(flags.drop_remainder),
                  "seed=" + std::to_string(flags.seed), "metrics=" + flags.metrics,
                  "validation-split=" + std::to_string(flags.validation_split)},
              " ");
}

int Usage(std::ostream& err, const Status& status) {
  err << "error: " << status.message() << "\n";
  return 2;
}

// What the flags and the data decide, checked before any device is touched (validate), and
// what the model is built from (build).
struct TrainPlan {
  std::pair<int64_t, int64_t> trace_steps{0, 0};  // --trace-steps, once checked
  int64_t tensorboard_every_steps = 0;            // --tensorboard-update-freq, in steps
  Prepared prepared;                              // the data as loaded
  std::string layer_spec;  // the layers as the saved model describes them ("normalize,..." too)
  bool normalized = false;  // a Normalization layer leads, adapted to the training rows
  std::vector<std::shared_ptr<Layer>> layers;
  std::unique_ptr<Loss> loss;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<std::string> metrics;
  double lr = 0;
  data::Dataset training_data;                // without the rows held out for validation
  int64_t rows = 0;                           // of training_data; < 0: endless (synthetic)
  std::optional<data::Dataset> validation;    // --validation-split or --validation-data
  std::pair<std::vector<float>, std::vector<float>> target_stats;  // mean, std (empty: off)
};

void AddTrainFlags(FlagParser* parser, TrainFlags* flags) {
  parser->AddString("data", &flags->data, "a CSV file with a header row, x.npy, d.npz, TFRecord files of tf.train.Example (a.tfrecord,b.tfrecord or a glob), or synthetic:linreg / synthetic:mlp");
  parser->AddString("target", &flags->target, "what to predict: CSV column(s) or TFRecord feature(s), comma-separated; the targets' .npy file (with --data=x.npy); the array's name (with .npz)");
  parser->AddString("features", &flags->features, "what to predict from (default: everything but --target): CSV columns or TFRecord features, comma-separated; the array's name (with .npz)");
  parser->AddString("layers", &flags->layers, "dense layers UNITS[:ACTIVATION],... (e.g. 64:relu,64:relu,1)");
  parser->AddString("loss", &flags->loss, "mse or sparse_categorical_crossentropy");
  parser->AddString("optimizer", &flags->optimizer, "sgd, adam or adamw");
  parser->AddDouble("lr", &flags->lr, "learning rate (default: the workload's, else 0.01)");
  parser->AddDouble("momentum", &flags->momentum, "SGD momentum");
  parser->AddBool("nesterov", &flags->nesterov, "Nesterov momentum");
  parser->AddDouble("weight-decay", &flags->weight_decay, "adamw: decoupled weight decay (each step var -= lr * W * var; default 0.004)");
  parser->AddString("lr-schedule", &flags->lr_schedule, "constant, exponential:decay_steps=N,decay_rate=R[,staircase], step:boundaries=B1/B2,values=V0/V1/V2 or cosine:decay_steps=N[,alpha=A]; --lr is the initial rate");
  parser->AddInt("warmup-steps", &flags->warmup_steps, "raise the rate linearly from 0 over N steps, then follow --lr-schedule");
  parser->AddDouble("clip-value", &flags->clip_value, "clip each summed gradient element into [-V, V] (Keras clipvalue)");
  parser->AddDouble("clip-norm", &flags->clip_norm, "scale the summed gradients so that their global norm is at most N (Keras global_clipnorm)");
  parser->AddString("precision", &flags->precision, "float32, mixed_bfloat16 (bfloat16 products and activations on AVX512-BF16 CPUs) or mixed_float16 (emulated on CPUs; with dynamic loss scaling)");
  parser->AddInt("accumulate", &flags->accumulate, "gradient accumulation: run each replica's shard of a --global-batch as K micro-batches, one all-reduce per step (K times less activation memory)");
  parser->AddInt("global-batch", &flags->global_batch, "rows per step, split across replicas");
  parser->AddInt("epochs", &flags->epochs, "passes over the data");
  parser->AddInt("steps", &flags->steps, "steps to train (instead of, or as a cap on, epochs)");
  parser->AddBool("shuffle", &flags->shuffle, "shuffle rows each epoch (default: file order)");
  parser->AddInt("prefetch", &flags->prefetch, "batches the input pipeline reads ahead on a thread of its own while the replicas compute (tf.data's prefetch); -1: 2 when the replicas are GPUs (the host's cores are free), 0 (inline) when they are CPUs (every core computes)");
  parser->AddBool("drop-remainder", &flags->drop_remainder, "drop a final partial batch");
  parser->AddInt("seed", &flags->seed, "seed of the initial weights and the shuffle");
  parser->AddString("init", &flags->init, "initial weights (and optimizer state) from a safetensors file");
  parser->AddString("save", &flags->save, "write weights and optimizer state here when done");
  parser->AddString("metrics-out", &flags->metrics_out, "per-epoch metrics: .csv, else JSON lines (with per-step lines)");
  parser->AddString("metrics", &flags->metrics, "extra metrics: mae, mse, accuracy");
  parser->AddString("tensorboard", &flags->tensorboard, "write TensorBoard scalars under this directory (created if needed): DIR/train (loss, metrics; per step also learning rate, gradient norm, loss scale, step and all-reduce times) and DIR/validation; `tensorboard --logdir=DIR` shows them");
  parser->AddString("tensorboard-update-freq", &flags->tensorboard_update_freq, "with --tensorboard: epoch (epoch scalars only), batch (every step too) or N (every N-th step too)");
  parser->AddInt("verbose", &flags->verbose, "0 quiet, 1 progress bar, 2 one line per epoch, and what each replica did in the first step");
  parser->AddString("backup", &flags->backup, "write weights, optimizer state and the data position here (atomically) every --backup-every steps and at the end");
  parser->AddInt("backup-every", &flags->backup_every, "steps between backups");
  parser->AddBool("resume", &flags->resume, "continue from the --backup file if there is one (a killed run then ends with the same weights, bitwise)");
  parser->AddBool("check-numerics", &flags->check_numerics, "stop at the first NaN or Inf in a loss or gradient, naming it");
  parser->AddBool("normalize", &flags->normalize, "scale every feature to mean 0, std 1 with the training data's statistics (a Normalization layer, saved with the model)");
  parser->AddBool("normalize-target", &flags->normalize_target, "regression: train on targets scaled to mean 0, std 1 (the training data's statistics, saved with the model); predictions and metrics stay in the original units");
  parser->AddDouble("validation-split", &flags->validation_split, "hold out the last fraction F of the rows (before shuffling) for validation each epoch");
  parser->AddString("validation-data", &flags->validation_data, "validate each epoch on this file (the training data's columns)");
  parser->AddInt("early-stopping", &flags->early_stopping, "stop after N epochs without improving val_loss (loss without validation data)");
  parser->AddString("save-best", &flags->save_best, "write the weights of the epoch with the best val_loss (loss without validation data) here");
  AddStrategyFlags(parser, &flags->strategy);
  parser->AddBool("log-device-placement", &flags->log_device_placement, "print where every op runs");
  parser->AddString("trace", &flags->trace, "write a trace of --trace-steps to this JSON file (Chrome's Trace Event Format: open it in Perfetto or chrome://tracing): every replica's layers, all-reduces, waits and updates, every worker's in one file");
  parser->AddString("trace-steps", &flags->trace_steps, "with --trace: the first and last step traced, A:B");
  parser->AddString("flight-recorder", &flags->flight_recorder, "on a collective's deadline, a divergence between workers, an abort or SIGUSR1, every worker writes its last collectives here (flight_recorder.rank<R>.json; default $TOWER_FLIGHT_RECORDER_DIR); `tower doctor DIR` reads them");
  AddDeviceFlags(parser, &flags->device);
  AddStreamingFlags(parser, &flags->streaming);
}

// Everything that can be checked before the data is read.
Status CheckTrainFlags(const TrainFlags& flags, const FlagParser& parser, TrainPlan* plan) {
  Status status;
  if (flags.data.empty()) {
    return InvalidArgumentError("--data is required: a CSV, .npy, .npz or TFRecord file, "
                                "synthetic:linreg or synthetic:mlp (see --help)");
  }
  if (flags.epochs < 0 || flags.steps < 0 || (flags.epochs == 0 && flags.steps == 0)) {
    return InvalidArgumentError("give --epochs=E or --steps=S (positive)");
  }
  if (flags.global_batch <= 0) return InvalidArgumentError("--global-batch must be positive");
  TOWER_RETURN_IF_ERROR(CheckStrategyFlags(flags.strategy, parser));
  // The pipeline holds up to that many batches in host memory: a bound keeps a typo from
  // filling it.
  constexpr int64_t kMaxPrefetch = 64;
  if (flags.prefetch < -1 || flags.prefetch > kMaxPrefetch) {
    return InvalidArgumentError("--prefetch=" + std::to_string(flags.prefetch) +
                                ": give the batches to read ahead, 0 (none) to " +
                                std::to_string(kMaxPrefetch) + ", or -1 for the default");
  }
  if (flags.verbose < 0 || flags.verbose > 2) return InvalidArgumentError("--verbose is 0, 1 or 2");
  std::pair<int64_t, int64_t> trace_steps{0, 0};
  if (!flags.trace.empty() || parser.WasSet("trace-steps")) {
    if (flags.trace.empty()) return InvalidArgumentError("--trace-steps needs --trace=FILE");
    StatusOr<std::pair<int64_t, int64_t>> parsed = ParseTraceSteps(flags.trace_steps);
    if (!parsed.ok()) return parsed.status();
    trace_steps = *parsed;
  }
  if (!flags.flight_recorder.empty()) {
    // Made now (each host its own), so that a dump in trouble does not fail for want of it.
    if (Status made = MakeDirectories(flags.flight_recorder); !made.ok()) {
      return made.WithContext("--flight-recorder");
    }
  }
  FlightRecorder::Get().SetDumpDirectory(flags.flight_recorder);
  if (flags.backup_every <= 0) {
    return InvalidArgumentError("--backup-every must be a positive number of steps");
  }
  if (flags.resume && flags.backup.empty()) {
    return InvalidArgumentError("--resume needs --backup=PATH (the file to resume from)");
  }
  int64_t tensorboard_every_steps = 0;
  if (!flags.tensorboard.empty() || parser.WasSet("tensorboard-update-freq")) {
    if (flags.tensorboard.empty()) {
      return InvalidArgumentError("--tensorboard-update-freq needs --tensorboard=DIR");
    }
    StatusOr<int64_t> every = TensorBoard::ParseUpdateFreq(flags.tensorboard_update_freq);
    if (!every.ok()) return every.status().WithContext("--tensorboard-update-freq");
    tensorboard_every_steps = *every;
    status = CheckCreatableDirectory("tensorboard", flags.tensorboard);
    if (!status.ok()) return status;
  }
  if (flags.early_stopping < -1) {
    return InvalidArgumentError("--early-stopping is a number of epochs (0 or more)");
  }
  for (const auto& [flag, path] : {std::pair<std::string, std::string>{"save", flags.save},
                                   {"backup", flags.backup},
                                   {"metrics-out", flags.metrics_out},
                                   {"save-best", flags.save_best}}) {
    status = CheckWritable(flag, path);
    if (!status.ok()) return status;
  }
  plan->trace_steps = trace_steps;
  plan->tensorboard_every_steps = tensorboard_every_steps;
  return OkStatus();
}

// Reads the data and checks the model against it: loss, metrics, layers, optimizer, classes,
// the validation rows.
Status PlanModelAndData(const TrainFlags& flags, const FlagParser& parser, TrainPlan* plan) {
  StatusOr<std::unique_ptr<Loss>> loss = LossFromName(flags.loss);
  if (!loss.ok()) return loss.status();
  std::vector<std::string> metrics;
  if (!flags.metrics.empty()) metrics = Split(flags.metrics, ',');
  for (const std::string& name : metrics) {
    if (!MetricFromName(name).ok()) return MetricFromName(name).status();
  }
  const bool classifier = flags.loss != "mse" && flags.loss != "mean_squared_error";
  if (classifier && flags.normalize_target) {
    return InvalidArgumentError(
        "--normalize-target is for regression (--loss=mse): "
        "class ids are not scaled");
  }
  StatusOr<Prepared> prepared = LoadTrainData(
      flags.data, flags.target, flags.features, classifier, flags.streaming,
      {flags.shuffle, flags.steps, parser.WasSet("epochs"), flags.validation_split,
       flags.normalize, flags.normalize_target});
  if (!prepared.ok()) return prepared.status();
  const WorkloadDefaults defaults = DefaultsFor(prepared->synthetic);
  // The model's layers as the file will describe them: a leading "normalize" with --normalize.
  const std::string dense_spec = flags.layers.empty() ? defaults.layers : flags.layers;
  const std::string layer_spec =
      (flags.normalize && !dense_spec.empty() ? "normalize," : "") + dense_spec;
  // --layers=normalize,... is the same as --normalize.
  const bool normalized = layer_spec == "normalize" || StartsWith(layer_spec, "normalize,");
  StatusOr<std::vector<std::shared_ptr<Layer>>> layers = ParseLayers(layer_spec);
  if (!layers.ok()) return layers.status();
  const double lr = flags.lr > 0 || parser.WasSet("lr") ? flags.lr : defaults.lr;
  StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(flags, lr);
  if (!optimizer.ok()) return optimizer.status();
  TOWER_RETURN_IF_ERROR(ConfigureTraining(flags, lr, **optimizer));
  if (flags.accumulate < 1 || flags.accumulate > flags.global_batch) {
    return InvalidArgumentError("--accumulate=" + std::to_string(flags.accumulate) +
                                " must be between 1 and --global-batch (" +
                                std::to_string(flags.global_batch) + ")");
  }
  const int64_t outputs = (*layers).back()->output_dim();
  TOWER_RETURN_IF_ERROR((*loss)->CheckShapes(outputs, prepared->dataset.target_dim()));
  std::optional<int64_t> classes;
  const std::vector<std::string>& class_names = prepared->dataset.schema().class_names;
  if (static_cast<int64_t>(class_names.size()) > outputs) {
    return InvalidArgumentError("the data has " + std::to_string(class_names.size()) +
                                " classes (" + Join(class_names, ", ") + "), the last layer " +
                                std::to_string(outputs) + " units: give it one per class");
  }
  if (classifier && prepared->synthetic.empty()) {
    classes = outputs;
    TOWER_RETURN_IF_ERROR(CheckClassIds(prepared->dataset, outputs));
  }
  if (prepared->dataset.num_rows() < 0 && flags.steps == 0) {
    return InvalidArgumentError("synthetic data without rows= is endless: give --steps");
  }
  const ValidationFlags validation{flags.validation_split, flags.validation_data, flags.target};
  TOWER_RETURN_IF_ERROR(PrepareValidation(validation, *prepared, prepared->dataset.num_rows(),
                                          classes, &plan->training_data, &plan->rows,
                                          &plan->validation));
  plan->prepared = *std::move(prepared);
  plan->layer_spec = layer_spec;
  plan->normalized = normalized;
  plan->layers = *std::move(layers);
  plan->loss = *std::move(loss);
  plan->optimizer = *std::move(optimizer);
  plan->metrics = std::move(metrics);
  plan->lr = lr;
  return OkStatus();
}

// The devices and, for several replicas or under mpirun, the strategy (in *strategy_out). 0,
// or the exit code after the error was printed (and, as one worker of several, the job
// ended).
int CreateStrategy(const TrainFlags& flags, const Prepared& prepared, std::ostream& out,
                   std::ostream& err, std::unique_ptr<MirroredStrategy>* strategy_out) {
  Context& context = Context::Global();
  Status status = ApplyDeviceFlags(flags.device, context);
  if (!status.ok()) return Usage(err, status);
  StatusOr<MirroredStrategyOptions> applied =
      ApplyStrategyFlags(flags.strategy, flags.device, context);
  if (!applied.ok()) return Usage(err, applied.status());
  MirroredStrategyOptions strategy_options = *std::move(applied);
  config::SetLogDevicePlacement(flags.log_device_placement);
  // Under mpirun this process is one worker of a MultiWorkerMirroredStrategy, and --replicas
  // counts its local replicas.
  if (LaunchedByMpirun() || !strategy_options.devices.empty()) {
    StatusOr<std::unique_ptr<MirroredStrategy>> created =
        CreateStrategyFromEnvironment(strategy_options);
    if (!created.ok()) {
      const int code = Usage(err, created.status());
      // One worker of several: end the whole job now (the others may still wait in setup),
      // and never wait in MPI's teardown for a worker that is gone.
      AbortOtherWorkers(code);
      return code;
    }
    *strategy_out = std::move(*created);
    if (std::getenv(kWorkerReportEnv) != nullptr) {
      // For a supervisor (tower launch): this worker joined the job.
      const World& world = (*strategy_out)->extended().world();
      out << StartedLine(world.rank(), world.size()) << "\n" << std::flush;
    }
  }
  MirroredStrategy* strategy = strategy_out->get();
  if (strategy != nullptr && LaunchedByMpirun()) {
    // Workers on several hosts each read their own copy of the data: a stale or other file
    // on one host is refused here, before the first step, naming both sides.
    StatusOr<std::string> content = DescribeTrainData(prepared);
    MirroredExtended& extended = strategy->extended();
    status = content.ok() ? extended.CheckConsistent("data " + *content) : content.status();
    if (!status.ok()) {
      const int code = Usage(err, status.WithContext("--data=" + flags.data));
      extended.Abort(code);
      return code;
    }
  }

  return 0;
}

// The model of the plan, compiled under the strategy (if any), built, normalised, initialised
// and described for the files it saves.
StatusOr<std::unique_ptr<Sequential>> BuildModel(const TrainFlags& flags, TrainPlan& plan,
                                                 MirroredStrategy* strategy) {
  auto model =
      std::make_unique<Sequential>(std::move(plan.layers), static_cast<uint64_t>(flags.seed));
  Status status;
  {
    std::unique_ptr<DistributionScope> scope;
    if (strategy != nullptr) scope = strategy->Scope();
    status = model->Compile(std::move(plan.loss), std::move(plan.optimizer), plan.metrics);
  }
  if (!status.ok()) return status;
  status = model->Build(plan.prepared.dataset.feature_dim());
  if (!status.ok()) return status;
  if (flags.normalize_target) {
    StatusOr<std::pair<std::vector<float>, std::vector<float>>> stats =
        TargetStatistics(plan.training_data);
    if (!stats.ok()) return stats.status().WithContext("--normalize-target");
    plan.target_stats = *stats;
    status = model->SetTargetNormalization(plan.target_stats.first, plan.target_stats.second);
    if (!status.ok()) return status.WithContext("--normalize-target");
  }
  if (plan.normalized) {
    // The statistics of the training rows only (never the validation rows), before --init or
    // --resume, which bring their own.
    status = static_cast<NormalizationLayer&>(*model->layers().front()).Adapt(plan.training_data);
    if (!status.ok()) return status.WithContext("--normalize");
  }
  if (!flags.init.empty()) {
    status = model->LoadWeights(flags.init);
    if (!status.ok()) return status.WithContext("--init");
  }
  model->set_check_numerics(flags.check_numerics);
  status = model->SetGradientAccumulation(static_cast<int>(flags.accumulate));
  if (!status.ok()) return status;
  {
    StatusOr<PrecisionPolicy> policy = ParsePrecisionPolicy(flags.precision);
    status = policy.ok() ? model->SetPrecisionPolicy(*policy) : policy.status();
    if (!status.ok()) return status.WithContext("--precision");
  }
  // The saved files rebuild the model (tower evaluate / predict need nothing else).
  {
    ModelDescription description;
    description.layers = plan.layer_spec;
    description.loss = model->loss()->name();
    description.feature_names = plan.prepared.dataset.schema().feature_names;
    description.target_names = plan.prepared.dataset.schema().target_names;
    description.class_names = plan.prepared.dataset.schema().class_names;
    description.target_mean = plan.target_stats.first;
    description.target_std = plan.target_stats.second;
    model->set_description(std::move(description));
  }
  return model;
}

// --resume: where the backup left off, if there is one (said on `out` by the chief).
StatusOr<std::optional<FitPosition>> ResumePosition(const TrainFlags& flags, Sequential& model,
                                                    const std::string& signature, bool chief,
                                                    std::ostream& out) {
  std::optional<FitPosition> resume;
  if (flags.resume && std::ifstream(flags.backup).good()) {
    StatusOr<FitPosition> position = model.RestoreBackup(flags.backup, signature);
    if (!position.ok()) return position.status().WithContext("--resume");
    resume = *position;
    if (flags.verbose > 0 && chief) {
      out << "Resuming from " << flags.backup << ": epoch " << resume->epoch + 1 << ", "
          << resume->step_in_epoch << " steps into it (" << resume->total_steps << " steps done)\n";
    }
  } else if (flags.resume && flags.verbose > 0 && chief) {
    out << "No backup at " << flags.backup << " yet: starting from the beginning\n";
  }

  return resume;
}

// Fit's options: epochs and steps, validation, backups and the callbacks the flags ask for.
// `validation_batches` holds the batched validation rows Fit reads.
Status MakeFitOptions(const TrainFlags& flags, const TrainPlan& plan, const data::Dataset& dataset,
                      data::Dataset* validation_batches, FitOptions* fit) {
  fit->verbose = static_cast<int>(flags.verbose);
  if (plan.rows < 0) {
    fit->epochs = 1;
    fit->steps_per_epoch = flags.steps;
  } else {
    const int64_t per_epoch = dataset.num_batches();
    if (per_epoch <= 0) {
      return InvalidArgumentError("--global-batch=" + std::to_string(flags.global_batch) +
                                  " with --drop-remainder leaves no batch of the " +
                                  std::to_string(plan.rows) + " rows");
    }
    fit->epochs = static_cast<int>(flags.epochs > 0 ? flags.epochs
                                                    : (flags.steps + per_epoch - 1) / per_epoch);
    if (flags.steps > 0) fit->max_steps = flags.steps;
  }
  if (plan.validation.has_value()) {
    *validation_batches = plan.validation->Batch(flags.global_batch);
    fit->validation = validation_batches;
  }
  const std::string monitor = plan.validation.has_value() ? "val_loss" : "loss";
  if (flags.early_stopping >= 0) {
    fit->callbacks.push_back(std::make_shared<EarlyStopping>(monitor, flags.early_stopping));
  }
  if (!flags.save_best.empty()) {
    fit->callbacks.push_back(std::make_shared<BestCheckpoint>(flags.save_best, monitor));
  }
  fit->backup_path = flags.backup;
  fit->backup_every_steps = flags.backup.empty() ? 0 : flags.backup_every;
  if (!flags.tensorboard.empty()) {
    // Written by the chief only; other workers' callbacks do nothing.
    fit->callbacks.push_back(
        std::make_shared<TensorBoard>(flags.tensorboard, plan.tensorboard_every_steps));
  }
  if (!flags.metrics_out.empty()) {
    if (EndsWith(flags.metrics_out, ".csv")) {
      fit->callbacks.push_back(std::make_shared<CsvLogger>(flags.metrics_out));
    } else {
      fit->callbacks.push_back(std::make_shared<JsonLinesLogger>(flags.metrics_out, true));
    }
  }
  if (flags.verbose >= 2)
    fit->callbacks.push_back(std::make_shared<ReplicaStepLog>(flags.global_batch));
  if (!flags.trace.empty()) {
    fit->callbacks.push_back(
        std::make_shared<StepTrace>(flags.trace, plan.trace_steps.first, plan.trace_steps.second));
  }
  return OkStatus();
}

// Trains (resuming a backup when asked), saves and reports: the exit code.
int Train(const TrainFlags& flags, const TrainPlan& plan, MirroredStrategy* strategy,
          Sequential& model, std::ostream& out, std::ostream& err) {
  const MirroredExtended* extended = strategy != nullptr ? &strategy->extended() : nullptr;
  const bool chief = strategy == nullptr || strategy->is_chief();
  const std::string signature = RunSignature(flags, plan.layer_spec, plan.lr) +
                                StreamingSignature(plan.prepared, flags.streaming, model);
  StatusOr<std::optional<FitPosition>> resume = ResumePosition(flags, model, signature, chief, out);
  if (!resume.ok()) return Usage(err, resume.status());
  const StatusOr<data::Dataset> dataset =
      InputPipeline({flags.shuffle, flags.seed, flags.global_batch, flags.drop_remainder,
                     flags.prefetch, flags.verbose, flags.streaming},
                    plan.prepared, plan.training_data, plan.rows, model, chief, out);
  if (!dataset.ok()) return Usage(err, dataset.status());
  FitOptions fit;
  data::Dataset validation_batches;
  Status status = MakeFitOptions(flags, plan, *dataset, &validation_batches, &fit);
  if (!status.ok()) return Usage(err, status);
  fit.out = &out;
  fit.signature = signature;
  fit.resume = *resume;
  StatusOr<History> history = model.Fit(*dataset, fit);
  ReportDataReads(plan.prepared, model, flags.verbose, out);
  if (!history.ok()) {
    err << "error: " << history.status().message() << "\n" << std::flush;
    // Bad input met mid-run exits 2, as bad input found before training does.
    const int code =
        IsInputError(history.status(), {flags.data, flags.target, flags.validation_data}) ? 2 : 1;
    // One worker of several: end the whole job now rather than leave the others waiting
    // for a collective until their deadline.
    model.distribution()->Abort(code);
    return code;
  }
  ReportInputWait(*history, flags.verbose, chief, out);
  if (!flags.save.empty()) {
    status = model.SaveWeights(flags.save);
    if (!status.ok()) {
      err << "error: " << status.message() << "\n";
      return 1;
    }
    if (flags.verbose > 0 && chief) {
      out << "Saved weights to " << flags.save << "\n";
    }
  }
  if (extended != nullptr && extended->world().size() > 1 && flags.verbose > 0) {
    // What this worker's all-reduces sent to the others (each worker prints its own).
    out << "Worker " << extended->world().rank() << " sent "
        << extended->cross_device_ops().bytes_sent_to_other_workers()
        << " bytes to other workers in all-reduces (" << flags.strategy.all_reduce_dtype << ")\n"
        << std::flush;
  }
  if (extended != nullptr && std::getenv(kWorkerReportEnv) != nullptr) {
    // For a supervisor (tower launch): this worker finished.
    out << FinishedLine(extended->world().rank(), extended->world().size()) << "\n" << std::flush;
  }
  return 0;
}

}  // namespace

int RunTrainCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // Parse.
  TrainFlags flags;
  FlagParser parser("tower train");
  AddTrainFlags(&parser, &flags);
  Status status = parser.Parse(args);
  if (!status.ok()) return Usage(err, status);
  if (parser.help_requested()) {
    out << "Trains a dense network.\n" << parser.Usage();
    return 0;
  }
  // Validate: the flags, then the data and the model against it, before any device is used.
  TrainPlan plan;
  status = CheckTrainFlags(flags, parser, &plan);
  if (status.ok()) status = PlanModelAndData(flags, parser, &plan);
  if (!status.ok()) return Usage(err, status);
  // Build: the devices, the strategy, the model.
  std::unique_ptr<MirroredStrategy> strategy;
  if (const int code = CreateStrategy(flags, plan.prepared, out, err, &strategy); code != 0) {
    return code;
  }
  StatusOr<std::unique_ptr<Sequential>> model = BuildModel(flags, plan, strategy.get());
  if (!model.ok()) return Usage(err, model.status());
  // Run.
  return Train(flags, plan, strategy.get(), **model, out, err);
}

}  // namespace tower
