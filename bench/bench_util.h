// What every benchmark program shares: the median of timed windows, the cores' cache-line
// round trip, and the main() around a flag parser and a run function.
#ifndef TOWER_BENCH_BENCH_UTIL_H_
#define TOWER_BENCH_BENCH_UTIL_H_

#include <functional>
#include <vector>

#include "util/flags.h"
#include "util/status.h"

namespace tower::bench {

// The median (the mean of the middle two for an even count); `values` must not be empty.
double Median(std::vector<double> values);

// Median ns per round trip of one cache line between two threads pinned to the first two
// CPUs this process may use (each spins until the other has answered), over `repeats`
// windows of 100,000 trips after one of warm-up; 0 when the process has only one CPU. The
// calling thread's affinity is restored afterwards. The host this runs on moves between
// states whose round trips differ 3× (docs/BENCHMARKS.md): the figure says which one a
// measurement ran in.
double CrossCoreRoundTripNs(int repeats);

// The Python that runs the peers (NumPy, pandas): Debian's /usr/bin/python3, where
// python3-numpy and python3-pandas install them (a python3 earlier on PATH, such as a pyenv
// one, may lack them), else the python3 on PATH.
const char* PeerPython();

// Parses argv with `parser` and calls `run`: usage for --help (exit 0), one "error: …" line
// for bad flags (exit 2) or a failed `run` (exit 1).
int RunMain(FlagParser& parser, int argc, char** argv, const std::function<Status()>& run);

}  // namespace tower::bench

#endif  // TOWER_BENCH_BENCH_UTIL_H_
