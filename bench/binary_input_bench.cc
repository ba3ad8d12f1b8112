// binary_input_bench: how fast the binary formats read, against the files' sequential read.
//
// Generates --mb megabytes of .npy (features float32 [rows, --features], targets float32
// [rows, 1], as np.save writes them) and a TFRecord file of tf.train.Example holding the same
// rows (float_list "x" of --features values, float_list "y" of 1; about 1.6x the bytes, for
// the protobuf and the framing), never committed, removed at the end unless --keep; then reads
// each, timed once, in one run:
//   cat / dd            the files' bytes to /dev/null (the page cache's speed: the files were
//                       just written, so every reader below reads cached pages too)
//   npy Batch           Dataset::FromNpy(...).Batch(256), one pass (tower train's unshuffled
//                       path)
//   npy Shuffle         the same through Shuffle(10000).Batch(256)
//   tfrecord open       Dataset::FromTfRecords: the pass that indexes and checks every record
//   tfrecord Batch      then .Batch(256), one pass (each batch read and decoded)
//   tfrecord Shuffle    the same through Shuffle(10000).Batch(256)
//   numpy np.load       both .npy files loaded and summed in python3, where NumPy is installed
// Each line gives MB/s (10^6 bytes of that format's files) and rows/s of wall time, and for
// the readers in this process MB per CPU second too; the last line, Tower's .npy reader's
// MB/s as a share of the faster sequential read (issue 57's target: at least 70 %).
// --csv also writes the same rows as CSV ("x0".."x15", "y"; 6 decimals, the values exactly
// as in the .npy), kept with --keep, for `tower train --stream` against the .npy.
// Run it alone on a quiet machine:
//   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE bazel-bin/bench/binary_input_bench --mb=1100
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/input_timing.h"
#include "data/dataset.h"
#include "data/tfrecord.h"
#include "util/flags.h"

namespace tower {
namespace {

using bench::Drain;
using bench::Report;
using bench::Seconds;

struct Flags {
  int64_t mb = 1100;
  int64_t features = 16;
  std::string dir = "/tmp";
  bool keep = false;
  bool csv = false;
};

// The generated files and what they hold.
struct Files {
  std::string x_npy, y_npy, tfrecord, csv;
  int64_t rows = 0;
  int64_t npy_bytes = 0;  // both .npy files
  int64_t tfrecord_bytes = 0;
};

// A .npy v1.0 header of float32 [rows, columns] (np.save's, padded to 64 bytes).
std::string NpyHeader(int64_t rows, int64_t columns) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) +
                     ", " + std::to_string(columns) + "), }";
  const size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
  dict.resize(total - 10 - 1, ' ');
  dict += '\n';
  std::string header("\x93NUMPY\x01\x00", 8);
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

void Varint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    *out += static_cast<char>(value | 0x80);
    value >>= 7;
  }
  *out += static_cast<char>(value);
}

// Appends a length-delimited field (wire type 2).
void Field(int field, const std::string& bytes, std::string* out) {
  Varint(static_cast<uint64_t>(field) << 3 | 2, out);
  Varint(bytes.size(), out);
  *out += bytes;
}

// Features.feature's map entry {key = name, value = Feature{float_list{packed values}}}.
std::string FloatEntry(const char* name, const float* values, int64_t n) {
  std::string packed, float_list, feature, entry;
  Field(1, std::string(reinterpret_cast<const char*>(values), n * sizeof(float)), &packed);
  Field(2, packed, &feature);  // Feature.float_list; `packed` is FloatList's bytes
  Field(1, name, &entry);
  Field(2, feature, &entry);
  return entry;
}

// A serialized tf.train.Example {features {feature {"x": ...} feature {"y": ...}}}.
std::string Example(const float* x, int64_t n, float y) {
  std::string features, example;
  Field(1, FloatEntry("x", x, n), &features);
  Field(1, FloatEntry("y", &y, 1), &features);
  Field(1, features, &example);
  return example;
}

// Appends one CSV row: "%.6f" of each value (they are multiples of 1e-6 in (-1, 1), plus y).
void CsvRow(const float* x, int64_t n, float y, std::string* out) {
  char cell[32];
  for (int64_t j = 0; j <= n; ++j) {
    const int length = std::snprintf(cell, sizeof(cell), "%.6f", j < n ? x[j] : y);
    out->append(cell, length);
    *out += j < n ? ',' : '\n';
  }
}

class Writer {
 public:
  explicit Writer(std::string path) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), "wb");
  }
  ~Writer() {
    if (file_ != nullptr) std::fclose(file_);
  }
  bool ok() const { return file_ != nullptr && ok_; }
  // Writes `buffer` and empties it.
  void Flush(std::string* buffer) {
    if (file_ != nullptr && std::fwrite(buffer->data(), 1, buffer->size(), file_) != buffer->size())
      ok_ = false;
    buffer->clear();
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  bool ok_ = true;
};

// Writes the files: rows of `features` values x ~ U(-1, 1) (multiples of 1e-6) and y = x0 +
// 0.5 x1.
StatusOr<Files> Generate(const Flags& flags) {
  Files files;
  const std::string stem = flags.dir + "/binary_input_bench_" + std::to_string(::getpid());
  files.x_npy = stem + "_x.npy";
  files.y_npy = stem + "_y.npy";
  files.tfrecord = stem + ".tfrecord";
  if (flags.csv) files.csv = stem + ".csv";
  const int64_t n = flags.features;
  files.rows = std::max<int64_t>(1, flags.mb * 1000000 / (4 * (n + 1)));
  Writer x(files.x_npy), y(files.y_npy), tf(files.tfrecord),
      csv(flags.csv ? files.csv : "/dev/null");
  std::string xb = NpyHeader(files.rows, n), yb = NpyHeader(files.rows, 1), tb, cb;
  files.npy_bytes = static_cast<int64_t>(xb.size() + yb.size()) + files.rows * 4 * (n + 1);
  for (int64_t j = 0; j < n; ++j) cb += "x" + std::to_string(j) + ",";
  cb += "y\n";
  uint64_t state = 88172645463325252ull;
  std::vector<float> row(n);
  for (int64_t r = 0; r < files.rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      row[j] = static_cast<float>(static_cast<int64_t>((state >> 40) % 1999999) - 999999) / 1e6f;
    }
    const float target = row[0] + (n > 1 ? 0.5f * row[1] : 0.0f);
    xb.append(reinterpret_cast<const char*>(row.data()), n * sizeof(float));
    yb.append(reinterpret_cast<const char*>(&target), sizeof(float));
    data::AppendTfRecord(Example(row.data(), n, target), &tb);
    if (flags.csv) CsvRow(row.data(), n, target, &cb);
    if (xb.size() >= (1 << 20)) {
      files.tfrecord_bytes += static_cast<int64_t>(tb.size());
      x.Flush(&xb), y.Flush(&yb), tf.Flush(&tb), csv.Flush(&cb);
    }
  }
  files.tfrecord_bytes += static_cast<int64_t>(tb.size());
  x.Flush(&xb), y.Flush(&yb), tf.Flush(&tb), csv.Flush(&cb);
  if (!x.ok() || !y.ok() || !tf.ok() || !csv.ok()) {
    return InvalidArgumentError(stem + "*: cannot create or write (is --dir=" + flags.dir +
                                " writable, with room for " + std::to_string(flags.mb * 3) +
                                " MB?)");
  }
  return files;
}

// Times Drain(dataset) as `name`: its seconds; an error if it fails or misses rows.
StatusOr<double> TimeDrain(const char* name, const data::Dataset& dataset, int64_t bytes,
                           int64_t rows) {
  StatusOr<int64_t> read = 0;
  const double seconds = Seconds([&] { read = Drain(dataset); });
  Report(name, seconds, bytes, rows);
  TOWER_RETURN_IF_ERROR(read.status());
  if (*read != rows) {
    return InternalError(std::string(name) + " read " + std::to_string(*read) + " rows of " +
                         std::to_string(rows));
  }
  return seconds;
}

void NumpyLoad(const Files& files) {
  bench::TimePython("numpy np.load", "numpy",
                    "import numpy; s = numpy.load(\"" + files.x_npy + "\").sum() + numpy.load(\"" +
                        files.y_npy + "\").sum()",
                    files.npy_bytes, files.rows);
}

Status Run(const Flags& flags) {
  if (flags.mb < 1) return InvalidArgumentError("--mb must be at least 1");
  if (flags.features < 1) return InvalidArgumentError("--features must be at least 1");
  StatusOr<Files> made = Files();
  const double generate = Seconds([&] { made = Generate(flags); });
  TOWER_RETURN_IF_ERROR(made.status());
  const Files& files = *made;
  std::printf(
      "%s, %s: %lld bytes; %s: %lld bytes; %lld rows of %lld features and 1 target "
      "(generated in %.1f s)\n",
      files.x_npy.c_str(), files.y_npy.c_str(), static_cast<long long>(files.npy_bytes),
      files.tfrecord.c_str(), static_cast<long long>(files.tfrecord_bytes),
      static_cast<long long>(files.rows), static_cast<long long>(flags.features), generate);
  if (flags.csv) std::printf("%s: the same rows as CSV\n", files.csv.c_str());
  TOWER_ASSIGN_OR_RETURN(
      const double sequential,
      bench::SequentialRead(" .npy", {files.x_npy, files.y_npy}, files.npy_bytes));
  double npy_batch = 0;
  {
    TOWER_ASSIGN_OR_RETURN(data::Dataset npy, data::Dataset::FromNpy(files.x_npy, files.y_npy));
    TOWER_ASSIGN_OR_RETURN(npy_batch,
                           TimeDrain("npy Batch", npy.Batch(256), files.npy_bytes, files.rows));
    TOWER_RETURN_IF_ERROR(
        TimeDrain("npy Shuffle", npy.Shuffle(10000, 1).Batch(256), files.npy_bytes, files.rows)
            .status());
  }  // closed: pages a process maps cannot be dropped from the page cache below
  NumpyLoad(files);

  TOWER_RETURN_IF_ERROR(
      bench::SequentialRead(" .tfrecord", {files.tfrecord}, files.tfrecord_bytes).status());
  data::TfRecordOptions options;
  options.features = {"x"};
  options.target_features = {"y"};
  StatusOr<data::Dataset> tfrecord = data::Dataset();
  Report("tfrecord open",
         Seconds([&] { tfrecord = data::Dataset::FromTfRecords({files.tfrecord}, options); }),
         files.tfrecord_bytes, files.rows);
  TOWER_RETURN_IF_ERROR(tfrecord.status());
  TOWER_RETURN_IF_ERROR(
      TimeDrain("tfrecord Batch", tfrecord->Batch(256), files.tfrecord_bytes, files.rows).status());
  TOWER_RETURN_IF_ERROR(TimeDrain("tfrecord Shuffle", tfrecord->Shuffle(10000, 1).Batch(256),
                                  files.tfrecord_bytes, files.rows)
                            .status());
  std::printf("npy Batch / sequential read: %.0f %% (target >= 70 %%)\n",
              100 * sequential / npy_batch);
  // From storage: the same .npy reads with the files' pages dropped first, as data larger than
  // memory is read (the reads above come from the page cache: the files were just written).
  TOWER_ASSIGN_OR_RETURN(
      const double cold_sequential,
      bench::SequentialRead(" .npy cold", {files.x_npy, files.y_npy}, files.npy_bytes, true));
  TOWER_RETURN_IF_ERROR(bench::DropFromPageCache({files.x_npy, files.y_npy}));
  TOWER_ASSIGN_OR_RETURN(data::Dataset npy, data::Dataset::FromNpy(files.x_npy, files.y_npy));
  TOWER_ASSIGN_OR_RETURN(const double cold_batch,
                         TimeDrain("npy Batch cold", npy.Batch(256), files.npy_bytes, files.rows));
  std::printf("npy Batch / sequential read, from storage: %.0f %% (target >= 70 %%)\n",
              100 * cold_sequential / cold_batch);
  if (!flags.keep) {
    for (const std::string* path : {&files.x_npy, &files.y_npy, &files.tfrecord, &files.csv}) {
      if (!path->empty()) std::remove(path->c_str());
    }
  }
  return OkStatus();
}

}  // namespace
}  // namespace tower

int main(int argc, char** argv) {
  tower::Flags flags;
  tower::FlagParser parser("binary_input_bench");
  parser.AddInt("mb", &flags.mb, "megabytes (10^6 bytes) of .npy to generate and read");
  parser.AddInt("features", &flags.features, "feature columns (float32) per row");
  parser.AddString("dir", &flags.dir, "where the generated files go");
  parser.AddBool("keep", &flags.keep, "keep the generated files");
  parser.AddBool("csv", &flags.csv, "also write the rows as CSV (for tower train --stream)");
  return tower::bench::RunMain(parser, argc, argv, [&] { return Run(flags); });
}
