#include "tools/train_stream.h"

#include <cstdio>
#include <utility>

#include "data/csv_shards.h"
#include "data/csv_stream.h"
#include "data/fingerprint.h"
#include "tools/binary_data.h"
#include "strategy/step/distribution.h"
#include "util/strings.h"

namespace tower {

void AddStreamingFlags(FlagParser* parser, StreamingFlags* flags) {
  parser->AddBool("stream", &flags->stream,
                  "read the CSV --data in chunks instead of whole (files larger than memory; "
                  "chosen on its own for a list a.csv,b.csv or a glob): each worker reads only its "
                  "--shares, and the run is endless: give --steps");
  parser->AddInt("shuffle-buffer", &flags->shuffle_buffer,
                 "streaming with --shuffle: rows in each share's shuffle buffer (tf.data's "
                 "shuffle(buffer_size))");
  parser->AddInt("shares", &flags->shares,
                 "streaming: the data's shares (whole files when there are enough, else byte "
                 "ranges); global batch b is every share's b-th batch of --global-batch/N rows; "
                 "default: the number of workers");
}

bool WantsStreaming(const std::string& data, const StreamingFlags& flags) {
  if (flags.stream) return true;
  if (StartsWith(data, "synthetic:")) return false;
  return data.find(',') != std::string::npos || data.find_first_of("*?[") != std::string::npos;
}

namespace {

constexpr int64_t kDefaultShuffleBuffer = 10000;

int64_t ShuffleBuffer(const StreamingFlags& flags) {
  return flags.shuffle_buffer > 0 ? flags.shuffle_buffer : kDefaultShuffleBuffer;
}

Status CheckStreaming(const StreamingFlags& flags, const StreamingChecks& checks) {
  const char* why = "streamed data is read once, front to back, without a pass over all rows first";
  auto refuse = [&](const std::string& flag) {
    return InvalidArgumentError(flag + " is not available with streamed data (" + why + ")");
  };
  if (checks.epochs) return refuse("--epochs (an epoch's length is not known): give --steps;");
  if (checks.steps <= 0) {
    return InvalidArgumentError("streamed data is endless (each share repeats): give --steps");
  }
  if (checks.validation_split != 0) return refuse("--validation-split (use --validation-data)");
  if (checks.normalize) return refuse("--normalize");
  if (checks.normalize_target) return refuse("--normalize-target");
  if (flags.shuffle_buffer < 0) {
    return InvalidArgumentError("--shuffle-buffer=" + std::to_string(flags.shuffle_buffer) +
                                " must be at least 1");
  }
  if (flags.shuffle_buffer > 0 && !checks.shuffle) {
    return InvalidArgumentError("--shuffle-buffer needs --shuffle (without it rows keep the "
                                "files' order)");
  }
  if (flags.shares < 0) return InvalidArgumentError("--shares must be 1 or more (0: workers)");
  return OkStatus();
}

}  // namespace

StatusOr<Prepared> LoadTrainData(const std::string& spec, const std::string& target,
                                 const std::string& features, bool classifier,
                                 const StreamingFlags& streaming, const StreamingChecks& checks) {
  if (IsBinaryData(spec)) {
    // .npy, .npz and TFRecord files (lists and globs too) are read in place, row by row.
    if (streaming.stream || streaming.shares != 0 || streaming.shuffle_buffer != 0) {
      return InvalidArgumentError("--stream, --shares and --shuffle-buffer apply to CSV files; " +
                                  spec + " is read in place (no --stream needed)");
    }
    return LoadData(spec, target, classifier, {}, features);
  }
  if (!WantsStreaming(spec, streaming)) {
    if (streaming.shares != 0 || streaming.shuffle_buffer != 0) {
      return InvalidArgumentError("--shares and --shuffle-buffer apply to streamed data: add "
                                  "--stream (or give several files or a glob)");
    }
    return LoadData(spec, target, classifier, {}, features);
  }
  TOWER_RETURN_IF_ERROR(CheckStreaming(streaming, checks));
  if (target.empty()) {
    return InvalidArgumentError("--target is required for CSV data: the column(s) to predict");
  }
  data::CsvStreamOptions options;
  TOWER_ASSIGN_OR_RETURN(options.files, data::ExpandDataFiles(spec));
  options.csv.target_columns = Split(target, ',');
  if (!features.empty()) options.csv.feature_columns = Split(features, ',');
  // Class ids as numbers: names would need every label before the first row is used.
  options.csv.class_labels = classifier;
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<const data::CsvFileSet> files,
                         data::CsvFileSet::Open(std::move(options)));
  TOWER_ASSIGN_OR_RETURN(
      data::Dataset all,
      data::Dataset::FromStream(std::make_shared<data::CsvShareStream>(files, 0, 1)));
  return Prepared{std::move(all), "", features, std::move(files)};
}

StatusOr<std::string> DescribeTrainData(const Prepared& prepared) {
  if (prepared.files != nullptr) {
    TOWER_ASSIGN_OR_RETURN(std::string facts, prepared.files->Fingerprint());
    return "stream " + facts;
  }
  return data::DescribeContent(*prepared.dataset.source());
}

namespace {

// This worker's shares [first, end) of `shares`, checked against the rows its replicas train.
StatusOr<data::ShardedBatchOptions> WorkerShares(const PipelineFlags& flags,
                                                 const Distribution& distribution) {
  const int64_t workers = distribution.num_workers();
  const int64_t rank = distribution.worker_rank();
  data::ShardedBatchOptions options;
  options.shares = flags.streaming.shares > 0 ? flags.streaming.shares : workers;
  if (options.shares % workers != 0) {
    return InvalidArgumentError("--shares=" + std::to_string(options.shares) +
                                " must be a multiple of the " + std::to_string(workers) +
                                " workers (each worker reads whole shares)");
  }
  options.first_share = rank * options.shares / workers;
  options.end_share = (rank + 1) * options.shares / workers;
  options.global_batch = flags.global_batch;
  if (options.global_batch % options.shares != 0) {
    return InvalidArgumentError("--global-batch=" + std::to_string(flags.global_batch) +
                                " must be a multiple of the " + std::to_string(options.shares) +
                                " shares (each share gives the same rows to every batch)");
  }
  const int64_t local = options.global_batch / options.shares;
  const int64_t lo = options.first_share * local;
  const int64_t hi = options.end_share * local;
  for (int r = 0; r < distribution.num_local_replicas(); ++r) {
    const RowRange rows =
        distribution.ShardRows(flags.global_batch, distribution.first_global_replica() + r);
    if (rows.count > 0 && (rows.first < lo || rows.end() > hi)) {
      return InvalidArgumentError(
          "--global-batch=" + std::to_string(flags.global_batch) + " over " +
          std::to_string(distribution.num_replicas_in_sync()) + " replicas gives worker " +
          std::to_string(rank) + " rows outside its shares' (" + std::to_string(lo) + ".." +
          std::to_string(hi - 1) + "): make it a multiple of the replicas and the shares");
    }
  }
  options.shuffle_buffer = flags.shuffle ? ShuffleBuffer(flags.streaming) : 0;
  options.seed = static_cast<uint64_t>(flags.seed);
  return options;
}

}  // namespace

StatusOr<data::Dataset> InputPipeline(const PipelineFlags& flags, const Prepared& prepared,
                                      const data::Dataset& training, int64_t rows,
                                      const Sequential& model, bool chief, std::ostream& out) {
  data::Dataset dataset = training;
  if (prepared.files != nullptr) {
    TOWER_ASSIGN_OR_RETURN(data::ShardedBatchOptions options,
                           WorkerShares(flags, *model.distribution()));
    const std::string loss = model.loss()->name();
    if (loss != "mse" && loss != "mean_squared_error") {
      options.class_count = model.layers().back()->output_dim();
    }
    TOWER_ASSIGN_OR_RETURN(std::shared_ptr<const data::ShardedBatchStream> stream,
                           data::ShardedBatchStream::Create(prepared.files, options));
    TOWER_ASSIGN_OR_RETURN(dataset, data::Dataset::FromStream(stream));
    if (flags.verbose > 0 && chief) {
      out << "Streaming " << prepared.files->options().files.size() << " file(s), "
          << prepared.files->total_bytes() << " bytes, in " << options.shares << " share"
          << (options.shares == 1 ? "" : "s") << " (shuffle buffer " << options.shuffle_buffer
          << " rows per share)\n";
    }
  } else {
    if (flags.shuffle) {
      const int64_t buffer = rows > 0 ? rows : 10 * flags.global_batch;
      dataset = dataset.Shuffle(buffer, static_cast<uint64_t>(flags.seed));
    }
    dataset = dataset.Batch(flags.global_batch, flags.drop_remainder);
  }
  // While GPU replicas run a step, the host's cores wait: the pipeline reads the next batches
  // meanwhile on a thread of its own (measured on an H200 in docs/GPU_VALIDATION.md). CPU
  // replicas use every core, so there the pipeline stays inline. Batches arrive in the same
  // order either way: the weights do not depend on it.
  const bool gpu_replicas = !model.distribution()->replica_device(0)->is_cpu();
  const int64_t prefetch = flags.prefetch >= 0 ? flags.prefetch : (gpu_replicas ? 2 : 0);
  if (prefetch > 0) {
    dataset = dataset.Prefetch(prefetch);
    if (flags.verbose > 0 && chief) {
      out << "Input pipeline: " << prefetch << " batch" << (prefetch == 1 ? "" : "es")
          << " read ahead on a thread of its own\n";
    }
  }
  return dataset;
}

std::string StreamingSignature(const Prepared& prepared, const StreamingFlags& flags,
                               const Sequential& model) {
  if (prepared.files == nullptr) return "";
  const int64_t shares = flags.shares > 0 ? flags.shares : model.distribution()->num_workers();
  return " stream-shares=" + std::to_string(shares) +
         " shuffle-buffer=" + std::to_string(ShuffleBuffer(flags));
}

void ReportDataReads(const Prepared& prepared, const Sequential& model, int64_t verbose,
                     std::ostream& out) {
  if (prepared.files == nullptr || verbose <= 0) return;
  const int64_t read = prepared.files->bytes_read();
  const int64_t total = prepared.files->total_bytes();
  char percent[32];
  std::snprintf(percent, sizeof(percent), "%.1f", total > 0 ? 100.0 * read / total : 0.0);
  out << "Worker " << model.distribution()->worker_rank() << " read " << read
      << " bytes of the data's " << total << " (" << percent << " %)\n"
      << std::flush;
}

std::string InputWaitLine(const StepTimes& times) {
  const double percent =
      times.step_seconds > 0 ? 100.0 * times.input_wait_seconds / times.step_seconds : 0.0;
  char line[160];
  std::snprintf(line, sizeof(line),
                "input: the steps waited %.2f s of %.2f s for their batches (%.1f %%)",
                times.input_wait_seconds, times.step_seconds, percent);
  return line;
}

void ReportInputWait(const History& history, int64_t verbose, bool chief, std::ostream& out) {
  if (verbose <= 0 || !chief) return;
  out << InputWaitLine(history.step_times) << "\n" << std::flush;
}

}  // namespace tower
