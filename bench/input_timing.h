// What the input benchmarks (input_bench, binary_input_bench) share: a reader's wall and CPU
// time, its report line, a dataset read to its end, the files' sequential read (cat, dd) and
// a peer run in Python.
#ifndef TOWER_BENCH_INPUT_TIMING_H_
#define TOWER_BENCH_INPUT_TIMING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "util/statusor.h"

namespace tower::bench {

// Wall seconds of `run`; LastCpuSeconds() then gives this process's CPU seconds in it
// (std::clock: this process's threads only, not a child's).
double Seconds(const std::function<void()>& run);
double LastCpuSeconds();

// "name  seconds s  MB/s  [rows/s]  [CPU s  MB/CPU-s]": MB of 10^6 bytes; rows when > 0; the
// CPU columns (from the last Seconds() call) for a reader in this process (`cpu`).
void Report(const std::string& name, double seconds, int64_t bytes, int64_t rows, bool cpu = true);

// Reads every element of `dataset`; the rows.
StatusOr<int64_t> Drain(const data::Dataset& dataset);

// Drops the files' pages from the page cache (fdatasync, then POSIX_FADV_DONTNEED), so the
// next read comes from storage, as a dataset larger than memory is read. Per file: no other
// file's pages, and no root needed.
Status DropFromPageCache(const std::vector<std::string>& paths);

// `paths` (`bytes` in all) read by cat, then by dd bs=1M, to /dev/null: a report line for each
// ("cat<label>", "dd<label>"); the faster's seconds. `cold`: each read from storage
// (DropFromPageCache first).
StatusOr<double> SequentialRead(const std::string& label, const std::vector<std::string>& paths,
                                int64_t bytes, bool cold = false);

// `code` run by PeerPython() and timed as `name`, when `module` imports there (else a line
// saying it is not installed).
void TimePython(const std::string& name, const std::string& module, const std::string& code,
                int64_t bytes, int64_t rows);

}  // namespace tower::bench

#endif  // TOWER_BENCH_INPUT_TIMING_H_
