#include "bench/bench_util.h"

#include <algorithm>
#include <cstdio>

namespace tower::bench {

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

int RunMain(FlagParser& parser, int argc, char** argv, const std::function<Status()>& run) {
  Status status = parser.Parse(argc, argv, 1);
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", status.message().c_str());
    return 2;
  }
  if (parser.help_requested()) {
    std::printf("%s", parser.Usage().c_str());
    return 0;
  }
  status = run();
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace tower::bench
