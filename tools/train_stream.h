// Streaming CSV for `tower train` (data/csv_stream.h): flags, refusals, the input pipeline of
// every run (streamed or not), the data facts workers compare, the bytes each one read and how
// long the steps waited for their batches.
//
// Streaming is chosen with --stream, or on its own when --data names several files
// (a.csv,b.csv) or a glob (part-*.csv). A streamed run is endless (tf.data's repeat()):
// it trains --steps steps; each worker reads only its shares of the files; global batch b is
// the concatenation of every share's b-th local batch (--global-batch / --shares rows each),
// so one process with N replicas and --shares=N trains as N workers with one share each.
// What needs a pass over every row first is refused with one line: --epochs,
// --validation-split, --normalize, --normalize-target and text class labels. Class ids are
// checked as rows are read (a bad one stops the run naming its file and byte).
#ifndef TOWER_TOOLS_TRAIN_STREAM_H_
#define TOWER_TOOLS_TRAIN_STREAM_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "data/dataset.h"
#include "model/sequential.h"
#include "tools/train_data.h"
#include "util/flags.h"
#include "util/statusor.h"

namespace tower {

struct StreamingFlags {
  bool stream = false;             // --stream
  int64_t shuffle_buffer = 0;      // --shuffle-buffer: rows per share's buffer; 0: 10000
  int64_t shares = 0;              // --shares: 0 = the number of workers
};

void AddStreamingFlags(FlagParser* parser, StreamingFlags* flags);

// --stream, or --data naming several files or a glob.
bool WantsStreaming(const std::string& data, const StreamingFlags& flags);

// The flags that streaming refuses or needs.
struct StreamingChecks {
  bool shuffle = false;  // --shuffle
  int64_t steps = 0;
  bool epochs = false;  // --epochs given
  double validation_split = 0;
  bool normalize = false;
  bool normalize_target = false;
};

// LoadData (binary files, one CSV file, synthetic data), or for streamed CSV the files' set
// (Prepared::files) and a one-pass dataset over all of them (for its schema; training reads
// InputPipeline's). `features`: --features (empty: every column but the targets).
StatusOr<Prepared> LoadTrainData(const std::string& spec, const std::string& target,
                                 const std::string& features, bool classifier,
                                 const StreamingFlags& streaming, const StreamingChecks& checks);

// What workers compare before the first step: the content of an in-memory dataset (every row
// hashed), or for a stream its files, sizes, columns and sampled fingerprint.
StatusOr<std::string> DescribeTrainData(const Prepared& prepared);

struct PipelineFlags {
  bool shuffle = false;
  int64_t seed = 0;
  int64_t global_batch = 32;
  bool drop_remainder = false;
  int64_t prefetch = -1;
  int64_t verbose = 1;
  StreamingFlags streaming;
};

// The training batches: shuffled, batched, read ahead for GPU replicas; for a stream, this
// worker's shares as global batches (InvalidArgument when the batch cannot be cut so).
StatusOr<data::Dataset> InputPipeline(const PipelineFlags& flags, const Prepared& prepared,
                                      const data::Dataset& training, int64_t rows,
                                      const Sequential& model, bool chief, std::ostream& out);

// What a backup must match to resume a stream: the resolved shares and buffer ("" when not
// streaming).
std::string StreamingSignature(const Prepared& prepared, const StreamingFlags& flags,
                               const Sequential& model);

// "Worker 1 read 52428800 bytes of the data's 104857600 (50.0 %)", per worker, for a stream.
void ReportDataReads(const Prepared& prepared, const Sequential& model, int64_t verbose,
                     std::ostream& out);

// "input: the steps waited 0.42 s of 12.30 s for their batches (3.4 %)": the time Fit's steps
// spent in the input pipeline's Next() of the time they took in all (History::step_times),
// which says whether the input is the bottleneck of the step. No newline.
std::string InputWaitLine(const StepTimes& times);
// InputWaitLine and a newline on `out`, unless --verbose=0, by the chief only: its own steps
// (another worker's slow input shows up in the chief's all-reduce wait, not here).
void ReportInputWait(const History& history, int64_t verbose, bool chief, std::ostream& out);

}  // namespace tower

#endif  // TOWER_TOOLS_TRAIN_STREAM_H_
