#include "bench/bench_util.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <utility>

#include "util/cache_line.h"

namespace tower::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The first two CPUs this process may run on, or {-1, -1} when it may run on only one.
std::pair<int, int> TwoCpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return {-1, -1};
  int found[2] = {-1, -1};
  int count = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && count < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) found[count++] = cpu;
  }
  return count == 2 ? std::make_pair(found[0], found[1]) : std::make_pair(-1, -1);
}

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

}  // namespace

double CrossCoreRoundTripNs(int repeats) {
  const auto [cpu_a, cpu_b] = TwoCpus();
  if (cpu_a < 0) return 0;
  constexpr int64_t kTrips = 100000;  // per window: ~10-50 ms
  struct alignas(kCacheLineBytes) Line {
    std::atomic<int64_t> value{0};
  };
  Line ping, pong;
  const int64_t total = kTrips * (repeats + 1);  // the first window warms up
  std::thread answerer([&, cpu_b = cpu_b] {
    PinTo(cpu_b);
    for (int64_t i = 1; i <= total; ++i) {
      while (ping.value.load(std::memory_order_acquire) != i) _mm_pause();
      pong.value.store(i, std::memory_order_release);
    }
  });
  // The caller's affinity comes back afterwards: the replica threads must not inherit a pin.
  cpu_set_t before;
  CPU_ZERO(&before);
  pthread_getaffinity_np(pthread_self(), sizeof(before), &before);
  PinTo(cpu_a);
  std::vector<double> ns;
  int64_t i = 0;
  for (int window = 0; window <= repeats; ++window) {
    const auto start = Clock::now();
    for (int64_t k = 0; k < kTrips; ++k) {
      ++i;
      ping.value.store(i, std::memory_order_release);
      while (pong.value.load(std::memory_order_acquire) != i) _mm_pause();
    }
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (window > 0) ns.push_back(s * 1e9 / kTrips);
  }
  answerer.join();
  pthread_setaffinity_np(pthread_self(), sizeof(before), &before);
  return Median(ns);
}

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

const char* PeerPython() {
  return ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

}  // namespace tower::bench
