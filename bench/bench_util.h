// What every benchmark program shares: the median of timed windows, and the main() around
// a flag parser and a run function.
#ifndef TOWER_BENCH_BENCH_UTIL_H_
#define TOWER_BENCH_BENCH_UTIL_H_

#include <functional>
#include <vector>

#include "util/flags.h"
#include "util/status.h"

namespace tower::bench {

// The median (the mean of the middle two for an even count); `values` must not be empty.
double Median(std::vector<double> values);

// Parses argv with `parser` and calls `run`: usage for --help (exit 0), one "error: …" line
// for bad flags (exit 2) or a failed `run` (exit 1).
int RunMain(FlagParser& parser, int argc, char** argv, const std::function<Status()>& run);

}  // namespace tower::bench

#endif  // TOWER_BENCH_BENCH_UTIL_H_
