// input_bench: how fast CSV input reads, against the file's sequential read.
//
// Generates a CSV of --mb megabytes (16 features and a target, "%.6f"-like cells; never
// committed; removed at the end unless --keep), then reads it, each timed once, in one run:
//   cat / dd       the file's bytes to /dev/null (the page cache's speed once it is cached:
//                  the file was just written, so every reader below reads cached pages too)
//   stream         data/csv_stream.h, one share, chunks of 4096 rows (the unshuffled path)
//   shards+shuffle tower train's shuffled path (data/csv_shards.h): one share, a buffer of
//                  10000 rows, global batches of 256 rows, one pass
//   shards skip    the same batches passed with Skip, as a resumed run fast-forwards: the
//                  rows' lines found, not parsed; the buffer's last rows parsed where they are
//   rows+Shuffle   one-row elements through Dataset's Shuffle(10000) and Batch(256)
//   in memory      ReadCsv (the file read whole, then parsed)
//   pandas, numpy  read_csv and np.loadtxt in python3, where installed (np.loadtxt on the
//                  first --numpy-mb megabytes only: it reads about 10 MB/s)
// Each line gives MB/s (10^6 bytes) and rows/s of wall time, and for the readers in this
// process MB per CPU second too (they are single-threaded: MB/s per core, less sensitive
// than wall time to other processes sharing the cores).
// Run it alone on a quiet machine:
//   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE bazel-bin/bench/input_bench --mb=1100
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include "bench/bench_util.h"
#include "bench/input_timing.h"
#include "data/csv.h"
#include "data/csv_shards.h"
#include "data/csv_stream.h"
#include "data/dataset.h"
#include "util/flags.h"

namespace tower {
namespace {

using bench::Drain;
using bench::Report;
using bench::Seconds;

struct Flags {
  int64_t mb = 1100;
  int64_t numpy_mb = 50;
  std::string dir = "/tmp";
  bool keep = false;
};

// "-0.123456": 9 characters of a value in (-1, 1) from 20 random bits.
char* Cell(uint64_t bits, char* out) {
  int64_t v = static_cast<int64_t>(bits % 1999999) - 999999;
  if (v < 0) {
    *out++ = '-';
    v = -v;
  }
  *out++ = '0';
  *out++ = '.';
  for (int d = 5; d >= 0; --d) {
    out[d] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return out + 6;
}

// Writes about `bytes` of CSV; returns the rows.
StatusOr<int64_t> Generate(const std::string& path, int64_t bytes) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return InvalidArgumentError(path + ": cannot create");
  std::string header;
  for (int j = 0; j < 16; ++j) header += "x" + std::to_string(j) + ",";
  header += "y\n";
  std::fputs(header.c_str(), file);
  int64_t written = static_cast<int64_t>(header.size());
  int64_t rows = 0;
  uint64_t state = 88172645463325252ull;
  std::string block(1 << 20, '\0');
  while (written < bytes) {
    char* out = block.data();
    char* const limit = block.data() + block.size() - 256;
    while (out < limit && written + (out - block.data()) < bytes) {
      for (int j = 0; j < 17; ++j) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out = Cell(state >> 40, out);
        *out++ = j == 16 ? '\n' : ',';
      }
      ++rows;
    }
    const size_t n = static_cast<size_t>(out - block.data());
    if (std::fwrite(block.data(), 1, n, file) != n) {
      std::fclose(file);
      return InvalidArgumentError(path + ": cannot write");
    }
    written += static_cast<int64_t>(n);
  }
  std::fclose(file);
  return rows;
}

Status Run(const Flags& flags) {
  if (flags.mb < 1) return InvalidArgumentError("--mb must be at least 1");
  const std::string path = flags.dir + "/input_bench_" + std::to_string(::getpid()) + ".csv";
  const int64_t bytes = flags.mb * 1000000;
  int64_t rows = 0;
  Status generated;
  const double generate = Seconds([&] {
    StatusOr<int64_t> made = Generate(path, bytes);
    generated = made.status();
    if (made.ok()) rows = *made;
  });
  TOWER_RETURN_IF_ERROR(generated);
  std::printf("%s: %lld bytes, %lld rows of 16 features and 1 target (generated in %.1f s)\n",
              path.c_str(), static_cast<long long>(bytes), static_cast<long long>(rows), generate);
  TOWER_RETURN_IF_ERROR(bench::SequentialRead("", {path}, bytes).status());

  data::CsvStreamOptions options;
  options.files = {path};
  options.csv.target_columns = {"y"};
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<const data::CsvFileSet> files,
                         data::CsvFileSet::Open(options));
  TOWER_ASSIGN_OR_RETURN(data::Dataset chunks,
                         data::Dataset::FromStream(std::make_shared<data::CsvShareStream>(
                             files, 0, 1, /*rows_per_element=*/4096)));
  StatusOr<int64_t> read = 0;
  Report("stream", Seconds([&] { read = Drain(chunks); }), bytes, rows);
  TOWER_RETURN_IF_ERROR(read.status());
  if (*read != rows) return InternalError("stream read " + std::to_string(*read) + " rows");
  TOWER_ASSIGN_OR_RETURN(
      data::Dataset single,
      data::Dataset::FromStream(std::make_shared<data::CsvShareStream>(files, 0, 1)));
  data::ShardedBatchOptions sharded;
  sharded.global_batch = 256;
  sharded.shuffle_buffer = 10000;
  TOWER_ASSIGN_OR_RETURN(std::shared_ptr<const data::ShardedBatchStream> shards,
                         data::ShardedBatchStream::Create(files, sharded));
  TOWER_ASSIGN_OR_RETURN(data::Dataset batches, data::Dataset::FromStream(shards));
  Report("shards+shuffle", Seconds([&] { read = Drain(batches.Take(rows / 256)); }), bytes, rows);
  TOWER_RETURN_IF_ERROR(read.status());
  {
    TOWER_ASSIGN_OR_RETURN(std::unique_ptr<data::Iterator> skipping, batches.MakeIterator(0));
    StatusOr<int64_t> passed = 0;
    Report("shards skip", Seconds([&] { passed = skipping->Skip(rows / 256); }), bytes, rows);
    TOWER_RETURN_IF_ERROR(passed.status());
    if (*passed != rows / 256) return InternalError("shards skip passed too few batches");
  }
  Report("rows+Shuffle", Seconds([&] { read = Drain(single.Shuffle(10000, 1).Batch(256)); }), bytes,
         rows);
  TOWER_RETURN_IF_ERROR(read.status());
  {
    StatusOr<data::CsvTable> table = data::CsvTable();
    Report("in memory", Seconds([&] { table = data::ReadCsv(path, options.csv); }), bytes, rows);
    TOWER_RETURN_IF_ERROR(table.status());
  }
  bench::TimePython("pandas", "pandas", "import pandas; pandas.read_csv(\"" + path + "\")", bytes,
                    rows);
  const int64_t numpy_bytes = std::min(bytes, flags.numpy_mb * 1000000);
  const int64_t numpy_rows = rows * numpy_bytes / bytes;
  bench::TimePython("numpy", "numpy",
                    "import numpy, itertools; f = open(\"" + path +
                        "\"); numpy.loadtxt(itertools.islice(f, " + std::to_string(numpy_rows + 1) +
                        "), delimiter=\",\", skiprows=1)",
                    numpy_bytes, numpy_rows);
  if (!flags.keep) std::remove(path.c_str());
  return OkStatus();
}

}  // namespace
}  // namespace tower

int main(int argc, char** argv) {
  tower::Flags flags;
  tower::FlagParser parser("input_bench");
  parser.AddInt("mb", &flags.mb, "megabytes (10^6 bytes) of CSV to generate and read");
  parser.AddInt("numpy-mb", &flags.numpy_mb, "megabytes np.loadtxt reads (of the same file)");
  parser.AddString("dir", &flags.dir, "where the generated file goes");
  parser.AddBool("keep", &flags.keep, "keep the generated file");
  return tower::bench::RunMain(parser, argc, argv, [&] { return Run(flags); });
}
