#include "model/trace_callback.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "strategy/step/distribution.h"
#include "model/sequential.h"
#include "util/file.h"
#include "util/trace.h"

namespace tower {
namespace {

// An event's name as the trace shows it: which layer, bucket or step.
std::string DisplayName(const trace::Event& event) {
  const std::string name = event.name;
  if (event.category == trace::Category::kWorkers) {
    return name + " across workers" +
           (event.arg >= 0 ? " (bucket " + std::to_string(event.arg) + ")" : std::string());
  }
  if (event.arg < 0) return name;
  switch (event.category) {
    case trace::Category::kForward:
    case trace::Category::kBackward: return name + " layer " + std::to_string(event.arg);
    case trace::Category::kAllReduce: return name + " " + std::to_string(event.arg);
    case trace::Category::kStep: return name + " " + std::to_string(event.arg);
    default: return name;
  }
}

nlohmann::json EventArgs(const trace::Event& event) {
  nlohmann::json args = nlohmann::json::object();
  if (event.arg >= 0) {
    switch (event.category) {
      case trace::Category::kForward:
      case trace::Category::kBackward: args["layer"] = event.arg; break;
      case trace::Category::kAllReduce:
      case trace::Category::kWorkers: args["bucket"] = event.arg; break;
      case trace::Category::kStep: args["step"] = event.arg; break;
      default: args["arg"] = event.arg; break;
    }
  }
  if (event.bytes >= 0) args["bytes"] = event.bytes;
  return args;
}

std::string LaneName(const Distribution& distribution, int lane) {
  if (lane == trace::kMainLane) return "training loop and input pipeline";
  const int replicas = distribution.num_local_replicas();
  if (lane >= trace::StreamLane(0)) {
    const int replica = lane - trace::StreamLane(0);
    return "replica " + std::to_string(replica) + " stream" +
           (replica < replicas ? " (" + distribution.replica_device(replica)->full_name() + ")"
                               : "");
  }
  std::string name = "replica " + std::to_string(lane) +
         (lane < replicas ? " (" + distribution.replica_device(lane)->full_name() + ")" : "");
  // A batch's first replica computes every member's rows in batched steps
  // (Distribution::batched_groups): its lane says whose.
  const int batches = distribution.batched_groups();
  if (lane < batches) {
    name += ", " + Distribution::DescribeBatch(replicas, batches, lane) + " in batched steps";
  }
  return name;
}

// This worker's events (and the names of its process and lanes) as the members of a JSON
// array, without the brackets; times in µs from `origin_unix_ns`.
std::string WorkerFragment(const Distribution& distribution,
                           const std::vector<trace::Event>& events, int64_t origin_unix_ns) {
  const int pid = distribution.worker_rank();
  const int64_t steady_to_unix = trace::StartUnixNs() - trace::StartSteadyNs();
  auto micros = [](int64_t ns) { return static_cast<double>(ns) / 1000.0; };
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid},
                 {"args", {{"name", "worker " + std::to_string(pid) + ": " +
                                        distribution.DescribeWorker(pid)}}}});
  out.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid},
                 {"args", {{"sort_index", pid}}}});
  std::set<int> lanes = {trace::kMainLane};
  for (int r = 0; r < distribution.num_local_replicas(); ++r) lanes.insert(r);
  for (const trace::Event& event : events) lanes.insert(event.lane);
  for (int lane : lanes) {
    out.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", lane},
                   {"args", {{"name", LaneName(distribution, lane)}}}});
    out.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", lane},
                   {"args", {{"sort_index", lane}}}});
  }
  for (const trace::Event& event : events) {
    out.push_back({{"name", DisplayName(event)},
                   {"cat", trace::CategoryName(event.category)},
                   {"ph", "X"},
                   {"pid", pid},
                   {"tid", event.lane},
                   {"ts", micros(event.start_ns + steady_to_unix - origin_unix_ns)},
                   {"dur", micros(event.duration_ns)},
                   {"args", EventArgs(event)}});
  }
  std::string text = out.dump();
  // Without the brackets: the chief joins the workers' members into one array.
  return text.size() >= 2 ? text.substr(1, text.size() - 2) : std::string();
}

}  // namespace

StatusOr<std::pair<int64_t, int64_t>> ParseTraceSteps(const std::string& spec) {
  const size_t colon = spec.find(':');
  auto bad = [&] {
    return InvalidArgumentError("--trace-steps='" + spec +
                                "': give the first and last step to trace as A:B, "
                                "1 <= A <= B (e.g. 5:8)");
  };
  if (colon == std::string::npos) return bad();
  try {
    size_t used_a = 0, used_b = 0;
    const std::string a = spec.substr(0, colon), b = spec.substr(colon + 1);
    const long long first = std::stoll(a, &used_a);
    const long long last = std::stoll(b, &used_b);
    if (used_a != a.size() || used_b != b.size() || first < 1 || last < first) return bad();
    return std::make_pair(static_cast<int64_t>(first), static_cast<int64_t>(last));
  } catch (const std::exception&) {
    return bad();
  }
}

Status StepTrace::OnTrainBegin(Sequential& model) {
  if (first_step_ < 1 || last_step_ < first_step_) {
    return InvalidArgumentError("StepTrace: steps " + std::to_string(first_step_) + ":" +
                                std::to_string(last_step_) + " are not 1 <= first <= last");
  }
  Distribution* distribution = model.distribution();
  if (distribution != nullptr && distribution->is_chief()) {
    // Said now rather than after the traced steps: the file's folder must exist.
    const size_t slash = path_.rfind('/');
    const std::string folder = slash == std::string::npos ? "." : path_.substr(0, slash);
    struct stat info;
    if (!folder.empty() && (stat(folder.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))) {
      return InvalidArgumentError("trace file " + path_ + ": the folder '" + folder +
                                  "' does not exist (create it, or trace to another path)");
    }
  }
  recording_ = false;
  done_ = false;
  return OkStatus();
}

Status StepTrace::OnBatchBegin(Sequential& model, int64_t step) {
  if (!done_ && !recording_ && step >= first_step_ && step <= last_step_) {
    trace::Start();
    recording_ = true;
  }
  return OkStatus();
}

Status StepTrace::OnBatchEnd(Sequential& model, int64_t step, const Logs& logs) {
  if (recording_ && step >= last_step_) return Finish(model);
  return OkStatus();
}

Status StepTrace::OnTrainEnd(Sequential& model, const History& history) {
  if (recording_) return Finish(model);
  return OkStatus();
}

Status StepTrace::Finish(Sequential& model) {
  recording_ = false;
  done_ = true;
  const std::vector<trace::Event> events = trace::Stop();
  Distribution* distribution = model.distribution();
  if (distribution == nullptr) return FailedPreconditionError("StepTrace: the model is not compiled");
  // One clock for every worker: the earliest start among them is 0.
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> starts,
                         distribution->GatherFromWorkers(std::to_string(trace::StartUnixNs())));
  int64_t origin = trace::StartUnixNs();
  for (const std::string& start : starts) origin = std::min<int64_t>(origin, std::stoll(start));
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> fragments,
                         distribution->GatherFromWorkers(
                             WorkerFragment(*distribution, events, origin)));
  if (!distribution->is_chief()) return OkStatus();
  TOWER_RETURN_IF_ERROR(WriteFileAtomically(
      path_, "writing the trace " + path_, [&](const AppendBytes& append) -> Status {
        const std::string head = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
        TOWER_RETURN_IF_ERROR(append(head.data(), head.size()));
        bool first = true;
        for (const std::string& fragment : fragments) {
          if (fragment.empty()) continue;
          if (!first) TOWER_RETURN_IF_ERROR(append(",\n", 2));
          TOWER_RETURN_IF_ERROR(append(fragment.data(), fragment.size()));
          first = false;
        }
        const std::string tail = "\n]}\n";
        return append(tail.data(), tail.size());
      }));
  written_ = true;
  return OkStatus();
}

}  // namespace tower
