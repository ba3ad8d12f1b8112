#include "tools/model_commands.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

#include "data/csv.h"
#include "data/dataset.h"
#include "device/context.h"
#include "device/device_flags.h"
#include "model/model_file.h"
#include "model/sequential.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/replica_devices.h"
#include "strategy/strategy_from_environment.h"
#include "util/file.h"
#include "util/flags.h"
#include "util/strings.h"

namespace tower {
namespace {

struct ModelFlags {
  std::string model;
  std::string data;
  std::string out;
  int64_t global_batch = 256;
  int64_t replicas = 1;
  double collective_timeout_s = 300;
  DeviceFlags device;
};

// A usage error: one line, exit 2; under mpirun the other workers end too.
int Usage(std::ostream& err, const Status& status) {
  err << "error: " << status.message() << "\n" << std::flush;
  AbortOtherWorkers(2);
  return 2;
}

bool IsClassifier(const ModelDescription& description) {
  return description.loss == "sparse_categorical_crossentropy";
}

// The model of a file, built (under a strategy when there are replicas or workers) with its
// weights loaded. Metrics: mae and mse for regression, accuracy for classification.
struct LoadedModel {
  ModelDescription description;
  std::unique_ptr<MirroredStrategy> strategy;
  std::unique_ptr<Sequential> model;
};

StatusOr<LoadedModel> Load(const ModelFlags& flags) {
  if (flags.model.empty()) return InvalidArgumentError("--model is required (a file tower train --save wrote)");
  if (flags.data.empty()) return InvalidArgumentError("--data is required: a CSV file with a header row");
  if (flags.global_batch <= 0) return InvalidArgumentError("--global-batch must be positive");
  if (!(flags.collective_timeout_s >= 0.001 && flags.collective_timeout_s <= 7 * 86400)) {
    return InvalidArgumentError("--collective-timeout must be between 0.001 and 604800 seconds");
  }
  LoadedModel loaded;
  TOWER_ASSIGN_OR_RETURN(loaded.description, ReadModelDescription(flags.model));
  TOWER_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Layer>> layers,
                         LayersFromSpec(loaded.description.layers));
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<Loss> loss, LossFromName(loaded.description.loss));
  Context& context = Context::Global();
  TOWER_RETURN_IF_ERROR(ApplyDeviceFlags(flags.device, context));
  MirroredStrategyOptions options;
  TOWER_ASSIGN_OR_RETURN(options.devices,
                         ConfigureReplicaDevices(flags.replicas, flags.device, context));
  options.collective_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(flags.collective_timeout_s * 1000));
  if (LaunchedByMpirun() || !options.devices.empty()) {
    TOWER_ASSIGN_OR_RETURN(loaded.strategy, CreateStrategyFromEnvironment(options));
  }
  loaded.model = std::make_unique<Sequential>(std::move(layers));
  {
    std::unique_ptr<DistributionScope> scope;
    if (loaded.strategy != nullptr) scope = loaded.strategy->Scope();
    const std::vector<std::string> metrics =
        IsClassifier(loaded.description) ? std::vector<std::string>{"accuracy"}
                                         : std::vector<std::string>{"mae", "mse"};
    // The optimizer is never used.
    TOWER_RETURN_IF_ERROR(loaded.model->Compile(std::move(loss), SGD(0.01f), metrics));
  }
  TOWER_RETURN_IF_ERROR(loaded.model->Build(
      static_cast<int64_t>(loaded.description.feature_names.size())));
  // The weights only: the optimizer's state (whichever trained it) plays no part here.
  TOWER_RETURN_IF_ERROR(loaded.model->LoadWeights(flags.model, /*with_optimizer_state=*/false));
  if (!loaded.description.target_mean.empty()) {
    TOWER_RETURN_IF_ERROR(loaded.model->SetTargetNormalization(loaded.description.target_mean,
                                                               loaded.description.target_std)
                              .WithContext(flags.model));
  }
  return loaded;
}

void AddCommonFlags(FlagParser* parser, ModelFlags* flags) {
  parser->AddString("model", &flags->model, "a model file written by tower train --save");
  parser->AddString("data", &flags->data, "a CSV file with a header row (columns found by name)");
  parser->AddInt("global-batch", &flags->global_batch, "rows per step, split across replicas");
  parser->AddInt("replicas", &flags->replicas, "data-parallel replicas (logical CPUs or virtual GPUs as needed)");
  parser->AddDouble("collective-timeout", &flags->collective_timeout_s,
                    "seconds a collective waits for every replica and worker before failing");
  AddDeviceFlags(parser, &flags->device);
}

bool IsChief(const LoadedModel& loaded) {
  return loaded.strategy == nullptr || loaded.strategy->is_chief();
}

// A CSV field: quoted when it holds a delimiter, a quote or a line end.
std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

}  // namespace

int RunEvaluateCommand(const std::vector<std::string>& args, std::ostream& out,
                       std::ostream& err) {
  ModelFlags flags;
  FlagParser parser("tower evaluate");
  AddCommonFlags(&parser, &flags);
  Status status = parser.Parse(args);
  if (!status.ok()) return Usage(err, status);
  if (parser.help_requested()) {
    out << "Evaluates a saved model on a CSV file: the loss and metrics, one name=value per "
           "line.\n" << parser.Usage();
    return 0;
  }
  StatusOr<LoadedModel> loaded = Load(flags);
  if (!loaded.ok()) return Usage(err, loaded.status());
  data::CsvOptions csv;
  csv.feature_columns = loaded->description.feature_names;
  csv.target_columns = loaded->description.target_names;
  // A classifier's labels as it knows them: its class names, else ids.
  csv.class_labels = IsClassifier(loaded->description);
  csv.class_names = loaded->description.class_names;
  StatusOr<data::Dataset> dataset = data::Dataset::FromCsv(flags.data, csv);
  if (!dataset.ok()) return Usage(err, dataset.status());
  StatusOr<Logs> logs = loaded->model->Evaluate(dataset->Batch(flags.global_batch));
  if (!logs.ok()) {
    err << "error: " << logs.status().message() << "\n" << std::flush;
    loaded->model->distribution()->Abort(1);
    return 1;
  }
  if (IsChief(*loaded)) {
    out << "loss=" << Number(logs->at("loss")) << "\n";
    for (const auto& [name, value] : *logs) {
      if (name != "loss") out << name << "=" << Number(value) << "\n";
    }
  }
  return 0;
}

int RunPredictCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ModelFlags flags;
  FlagParser parser("tower predict");
  AddCommonFlags(&parser, &flags);
  parser.AddString("out", &flags.out, "write the predictions here (CSV, one column per target)");
  Status status = parser.Parse(args);
  if (!status.ok()) return Usage(err, status);
  if (parser.help_requested()) {
    out << "Predicts with a saved model: one CSV row per row of --data.\n" << parser.Usage();
    return 0;
  }
  if (flags.out.empty()) return Usage(err, InvalidArgumentError("--out is required: where the predictions go"));
  StatusOr<LoadedModel> loaded = Load(flags);
  if (!loaded.ok()) return Usage(err, loaded.status());
  data::CsvOptions csv;
  csv.feature_columns = loaded->description.feature_names;  // targets, if any, are ignored
  StatusOr<data::CsvTable> table = data::ReadCsv(flags.data, csv);
  if (!table.ok()) return Usage(err, table.status());
  StatusOr<std::vector<float>> outputs = loaded->model->Predict(table->features, table->rows);
  if (!outputs.ok()) {
    err << "error: " << outputs.status().message() << "\n" << std::flush;
    loaded->model->distribution()->Abort(1);
    return 1;
  }
  if (!IsChief(*loaded)) return 0;
  const ModelDescription& description = loaded->description;
  const int64_t width = loaded->model->output_dim();
  std::ostringstream text;
  for (size_t k = 0; k < description.target_names.size(); ++k) {
    text << (k ? "," : "") << CsvField(description.target_names[k]);
  }
  text << "\n";
  for (int64_t row = 0; row < table->rows; ++row) {
    const float* values = outputs->data() + row * width;
    if (IsClassifier(description)) {
      // The class with the largest logit.
      int64_t best = 0;
      for (int64_t k = 1; k < width; ++k) {
        if (values[k] > values[best]) best = k;
      }
      if (description.class_names.empty()) {
        text << best << "\n";
      } else {
        text << CsvField(description.class_names[static_cast<size_t>(best)]) << "\n";
      }
    } else {
      for (int64_t k = 0; k < width; ++k) text << (k ? "," : "") << Number(values[k]);
      text << "\n";
    }
  }
  const std::string csv_text = text.str();
  status = WriteFileAtomically(flags.out, "--out=" + flags.out, [&](const AppendBytes& append) {
    return append(csv_text.data(), csv_text.size());
  });
  if (!status.ok()) {
    err << "error: " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace tower
