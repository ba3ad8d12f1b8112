#include "bench/input_timing.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <optional>

#include "bench/bench_util.h"
#include "util/strings.h"

namespace tower::bench {
namespace {

double last_cpu_seconds = 0;

}  // namespace

double Seconds(const std::function<void()>& run) {
  const std::clock_t cpu = std::clock();
  const auto start = std::chrono::steady_clock::now();
  run();
  last_cpu_seconds = static_cast<double>(std::clock() - cpu) / CLOCKS_PER_SEC;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double LastCpuSeconds() { return last_cpu_seconds; }

void Report(const std::string& name, double seconds, int64_t bytes, int64_t rows, bool cpu) {
  std::printf("%-18s %8.2f s %9.1f MB/s", name.c_str(), seconds, bytes / seconds / 1e6);
  if (rows > 0) std::printf(" %12.0f rows/s", rows / seconds);
  if (cpu && last_cpu_seconds > 0) {
    std::printf("  %7.2f CPU s %9.1f MB/CPU-s", last_cpu_seconds, bytes / last_cpu_seconds / 1e6);
  }
  std::printf("\n");
  std::fflush(stdout);
}

StatusOr<int64_t> Drain(const data::Dataset& dataset) {
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<data::Iterator> it, dataset.MakeIterator(0));
  int64_t rows = 0;
  while (true) {
    TOWER_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, it->Next());
    if (!batch.has_value()) return rows;
    rows += batch->rows;
  }
}

Status DropFromPageCache(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return NotFoundError(path + ": cannot open it to drop its cached pages");
    const bool dropped =
        ::fdatasync(fd) == 0 && ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    ::close(fd);
    if (!dropped) return InternalError(path + ": its pages could not be dropped from the cache");
  }
  return OkStatus();
}

StatusOr<double> SequentialRead(const std::string& label, const std::vector<std::string>& paths,
                                int64_t bytes, bool cold) {
  const std::string files = Join(paths, " ");
  if (cold) TOWER_RETURN_IF_ERROR(DropFromPageCache(paths));
  const double cat =
      Seconds([&] { (void)!std::system(("cat " + files + " > /dev/null").c_str()); });
  Report("cat" + label, cat, bytes, 0, false);
  if (cold) TOWER_RETURN_IF_ERROR(DropFromPageCache(paths));
  const double dd = Seconds([&] {
    (void)!std::system(
        ("for f in " + files + "; do dd if=$f of=/dev/null bs=1M 2>/dev/null; done").c_str());
  });
  Report("dd" + label, dd, bytes, 0, false);
  return std::min(cat, dd);
}

void TimePython(const std::string& name, const std::string& module, const std::string& code,
                int64_t bytes, int64_t rows) {
  const std::string python = PeerPython();
  if (std::system((python + " -c 'import " + module + "' 2>/dev/null").c_str()) != 0) {
    std::printf("%-18s not installed (%s -c 'import %s' fails)\n", name.c_str(), python.c_str(),
                module.c_str());
    return;
  }
  const std::string command = python + " -c '" + code + "'";
  int status = 0;
  const double seconds = Seconds([&] { status = std::system(command.c_str()); });
  if (status != 0) {
    std::printf("%-18s failed (exit status %d)\n", name.c_str(), status);
    return;
  }
  Report(name, seconds, bytes, rows, false);
}

}  // namespace tower::bench
