#include "strategy/collectives/mpi/worker_report.h"

#include "util/strings.h"

namespace tower {
namespace {

constexpr std::string_view kPrefix = "tower-worker: ";
constexpr std::string_view kUnreachable = "unreachable: ";
constexpr std::string_view kStarted = "started: rank ";
constexpr std::string_view kFinished = "finished: rank ";

std::string RankLine(std::string_view kind, int rank, int size) {
  return std::string(kPrefix) + std::string(kind) + std::to_string(rank) + " of " +
         std::to_string(size);
}

}  // namespace

std::string UnreachableWorkersLine(const std::vector<UnreachableWorker>& workers) {
  std::vector<std::string> parts;
  for (const UnreachableWorker& worker : workers) {
    parts.push_back("rank " + std::to_string(worker.rank) + " on " + worker.host);
  }
  return std::string(kPrefix) + std::string(kUnreachable) + Join(parts, ", ");
}

std::string StartedLine(int rank, int size) { return RankLine(kStarted, rank, size); }
std::string FinishedLine(int rank, int size) { return RankLine(kFinished, rank, size); }

WorkerReport ParseWorkerReport(std::string_view line) {
  WorkerReport report;
  const size_t at = line.find(kPrefix);
  if (at == std::string_view::npos) return report;
  std::string_view rest = line.substr(at + kPrefix.size());
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r')) rest.remove_suffix(1);
  if (StartsWith(rest, kUnreachable)) {
    rest.remove_prefix(kUnreachable.size());
    std::vector<UnreachableWorker> workers;
    for (const std::string& part : Split(rest, ',')) {
      // " rank 2 on host3"
      std::string_view item = part;
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      if (!StartsWith(item, "rank ")) return WorkerReport();
      item.remove_prefix(5);
      const size_t on = item.find(" on ");
      if (on == std::string_view::npos) return WorkerReport();
      const std::optional<int64_t> rank = ParseInt64(item.substr(0, on));
      const std::string_view host = item.substr(on + 4);
      if (!rank.has_value() || *rank < 0 || host.empty() ||
          host.find(' ') != std::string_view::npos) {
        return WorkerReport();
      }
      workers.push_back({static_cast<int>(*rank), std::string(host)});
    }
    if (workers.empty()) return report;
    report.kind = WorkerReport::Kind::kUnreachable;
    report.unreachable = std::move(workers);
    return report;
  }
  for (const auto& [kind, word] : {std::pair{WorkerReport::Kind::kStarted, kStarted},
                                    std::pair{WorkerReport::Kind::kFinished, kFinished}}) {
    if (!StartsWith(rest, word)) continue;
    rest.remove_prefix(word.size());
    const size_t of = rest.find(" of ");
    if (of == std::string_view::npos) return report;
    const std::optional<int64_t> rank = ParseInt64(rest.substr(0, of));
    const std::optional<int64_t> size = ParseInt64(rest.substr(of + 4));
    if (!rank.has_value() || !size.has_value() || *rank < 0 || *size <= *rank) return report;
    report.kind = kind;
    report.rank = static_cast<int>(*rank);
    report.size = static_cast<int>(*size);
  }
  return report;
}

}  // namespace tower
