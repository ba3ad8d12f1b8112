#include "strategy/collectives/mpi/mpi_world.h"

#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "strategy/collectives/mpi/worker_report.h"
#include "strategy/collectives/flight_recorder.h"
#include "util/trace.h"
#include "util/logging.h"
#include "util/strings.h"

namespace tower {
namespace {

constexpr int kArriveTag = 7001;
constexpr int kProbeTag = 7002;
// How long a stalled collective's survivors wait for each other's probes: they reach their
// deadlines within a message latency of each other.
constexpr std::chrono::milliseconds kProbeWindow(1000);
// How long MPI_Abort may take before this worker exits by itself: it can block on a peer it
// cannot reach (a cut link), and a worker that gave up must end.
constexpr std::chrono::milliseconds kAbortGrace(1000);
// How long a worker that failed at a collective waits before it ends the job. Its peers fail
// at the same collective (a divergence, a deadline) and each writes its flight recorder file
// as it does; once mpirun ends the job, a rank that has not yet seen the failure gets a
// SIGTERM with its SIGKILL following at once (Open MPI's default odls_base_sigkill_timeout),
// too soon to write its file under load. So the first to fail waits for the others.
constexpr std::chrono::milliseconds kPeerRecordGrace(1000);

std::string HexFingerprint(uint64_t fingerprint) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

Status MpiError(int code, const std::string& call) {
  return InternalError(call + " failed: " + MpiErrorText(code));
}

#define TOWER_MPI_RETURN_IF_ERROR(call)                             \
  do {                                                              \
    const int tower_mpi_code_ = (call);                             \
    if (tower_mpi_code_ != MPI_SUCCESS) return MpiError(tower_mpi_code_, #call); \
  } while (0)

// Open MPI's TCP transport writes to its peers with writev, which raises SIGPIPE when a
// peer's process has died and its connection was reset. SIGPIPE's default action ends this
// worker at once and without a word, so a survivor that happened to be sending to the dead
// peer could never name it (the multi-host test of a killed host, now and then under load).
// Ignored, the write fails with EPIPE, which Open MPI treats as a lost connection, and
// Tower's deadline names the peer. A handler the program installed itself is kept.
void IgnoreSigpipeUnlessHandled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      (current.sa_flags & SA_SIGINFO) == 0) {
    signal(SIGPIPE, SIG_IGN);
  }
}

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Why workers missed `where` (a collective): the ones that do not answer are `gone`, the ones
// that answer but never came are `behind` (names as Describe gives them).
std::string NeverReachedMessage(const std::vector<std::string>& gone,
                                const std::vector<std::string>& behind, const std::string& where,
                                std::chrono::milliseconds timeout) {
  std::string message;
  if (!gone.empty()) {
    message = Join(gone, ", ") + " never reached " + where + " within " +
              std::to_string(timeout.count()) + " ms and does not answer";
    if (!behind.empty()) message += "; " + Join(behind, ", ") + " still answers but is behind";
  } else {
    message = Join(behind, ", ") + " never reached " + where + " within " +
              std::to_string(timeout.count()) +
              " ms, though it still answers (stuck in an earlier collective, or its code took "
              "another path)";
  }
  return message;
}

}  // namespace

bool MpiWorld::LaunchedByMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

StatusOr<MpiWorld*> MpiWorld::Get() {
  static std::mutex* mu = new std::mutex();
  static MpiWorld* world = nullptr;
  std::lock_guard<std::mutex> lock(*mu);
  if (world != nullptr) return world;
  IgnoreSigpipeUnlessHandled();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (code != MPI_SUCCESS) {
      return UnavailableError("MPI could not start: " + MpiErrorText(code));
    }
    std::atexit(FinalizeAtExit);
  }
  // Errors come back as codes (turned into Status), not as an abort inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  auto* created = new MpiWorld();
  MPI_Comm_rank(MPI_COMM_WORLD, &created->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &created->size_);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  FlightRecorder::Get().SetProcess(created->rank_, created->size_, host);
  StatusOr<std::vector<std::string>> hosts =
      created->AllGather(host, std::chrono::minutes(2), "exchanging host names");
  if (!hosts.ok()) return hosts.status();
  created->hosts_ = *hosts;
  world = created;
  return world;
}

std::string MpiWorld::Describe(int rank) const {
  std::string text = "rank " + std::to_string(rank);
  if (rank < static_cast<int>(hosts_.size())) text += " (host " + hosts_[rank] + ")";
  return text;
}

Status MpiWorld::Wait(void* request, std::chrono::milliseconds timeout, const std::string& what) {
  auto* req = static_cast<MPI_Request*>(request);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto halfway = std::chrono::steady_clock::now() + timeout / 2;
  bool warned = false;
  for (int polls = 0;; ++polls) {
    int done = 0;
    const int code = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (code == MPI_SUCCESS && done) return OkStatus();
    const auto now = std::chrono::steady_clock::now();
    if (!warned && now > halfway) {
      // Every worker arrived, so nobody is missing: the data of one of them is slow to come.
      TOWER_LOG(WARNING) << Describe(rank_) << ": collective " << sequence_ << " (" << what
                         << ") has been in flight for " << (timeout / 2).count()
                         << " ms, half the deadline, after every worker arrived; it gives up at "
                         << timeout.count() << " ms";
      warned = true;
    }
    const bool late = now > deadline;
    if (code != MPI_SUCCESS || late) {
      const std::string happened =
          code != MPI_SUCCESS ? "failed (" + MpiErrorText(code) + ")"
                              : "did not complete within " + std::to_string(timeout.count()) +
                                    " ms";
      const std::vector<int> silent = Probe(std::min(timeout, kProbeWindow));
      if (silent.empty()) {
        return DeadlineExceededError(Describe(rank_) + ": " + what + " (collective " +
                                     std::to_string(sequence_) + ") " + happened +
                                     ", though every worker still answers");
      }
      MarkUnreachable(silent);
      std::vector<std::string> names;
      for (int rank : silent) names.push_back(Describe(rank));
      return DeadlineExceededError(Join(names, ", ") + " stopped answering during collective " +
                                   std::to_string(sequence_) + " (" + what + "): it " +
                                   happened + "; " + Describe(rank_) + " gives up");
    }
    // Poll hot at first (collectives usually finish in microseconds), then gently.
    if (polls > 2000) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

std::vector<int> MpiWorld::Probe(std::chrono::milliseconds window) {
  probe_token_ = sequence_;
  probe_received_.assign(static_cast<size_t>(size_), 0);
  std::vector<int> peers;
  std::vector<MPI_Request> receives;
  std::vector<bool> heard;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    MPI_Request receive = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;
    const bool posted = MPI_Irecv(&probe_received_[peer], 1, MPI_UINT64_T, peer, kProbeTag,
                                  MPI_COMM_WORLD, &receive) == MPI_SUCCESS;
    if (MPI_Isend(&probe_token_, 1, MPI_UINT64_T, peer, kProbeTag, MPI_COMM_WORLD, &send) ==
            MPI_SUCCESS &&
        send != MPI_REQUEST_NULL) {
      MPI_Request_free(&send);  // a send to a dead peer may never complete
    }
    peers.push_back(peer);
    receives.push_back(posted ? receive : MPI_REQUEST_NULL);
    heard.push_back(false);
  }
  const auto deadline = std::chrono::steady_clock::now() + window;
  size_t count = 0;
  while (count < peers.size() && std::chrono::steady_clock::now() <= deadline) {
    for (size_t i = 0; i < peers.size(); ++i) {
      if (heard[i] || receives[i] == MPI_REQUEST_NULL) continue;
      int done = 0;
      if (MPI_Test(&receives[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        receives[i] = MPI_REQUEST_NULL;  // an error on this peer's link: silent
        continue;
      }
      if (done) {
        heard[i] = true;
        ++count;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::vector<int> silent;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (heard[i]) continue;
    silent.push_back(peers[i]);
    if (receives[i] != MPI_REQUEST_NULL) {
      MPI_Cancel(&receives[i]);
      MPI_Request_free(&receives[i]);
    }
  }
  return silent;
}

void MpiWorld::MarkUnreachable(const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> lock(unreachable_mu_);
  for (int rank : ranks) {
    if (std::find(unreachable_.begin(), unreachable_.end(), rank) == unreachable_.end()) {
      unreachable_.push_back(rank);
    }
  }
  std::sort(unreachable_.begin(), unreachable_.end());
}

std::vector<int> MpiWorld::unreachable() const {
  std::lock_guard<std::mutex> lock(unreachable_mu_);
  return unreachable_;
}

uint64_t MpiWorld::BeginCollective(const char* kind, const char* dtype, int64_t elements,
                                   uint64_t layout, int64_t bytes, const std::string& what) {
  CollectiveRecord record;
  record.scope = "workers";
  record.kind = kind;
  record.sequence = sequence_ + 1;  // Arrive's
  record.step = CurrentStep();
  record.bucket = CurrentBucket();
  record.bytes = bytes;
  record.dtype = dtype;
  record.fingerprint = CollectiveFingerprint(kind, record.step, dtype, elements, layout);
  record_ticket_ = FlightRecorder::Get().Begin(record, what);
  record_kind_ = kind;
  record_bytes_ = bytes;
  record_start_ns_ = trace::Recording() ? trace::NowNs() : 0;
  return record.fingerprint;
}

Status MpiWorld::EndCollective(const Status& status) {
  FlightRecorder& recorder = FlightRecorder::Get();
  recorder.End(record_ticket_, status.ok() ? CollectiveState::kDone : CollectiveState::kFailed);
  if (record_start_ns_ != 0 && trace::Recording()) {
    // On the lane of the replica that runs it (replica 0's), inside its bucket's sum.
    trace::RecordComplete(record_kind_, trace::Category::kWorkers, trace::CurrentLane(),
                          CurrentBucket(), record_bytes_, record_start_ns_,
                          trace::NowNs() - record_start_ns_);
  }
  if (!status.ok()) {
    const Status dumped = recorder.Dump(Describe(rank_) + ": " + status.message());
    if (!dumped.ok()) TOWER_LOG(WARNING) << dumped.message();
    dumped_failure_ = true;
  }
  return status;
}

// Arrive's exchange of one collective with every peer: a receive of the peer's {sequence,
// fingerprint} and a send of ours. A peer is through when its arrival came and ours reached
// it: a send to a peer that died after sending its own arrival never completes, and must not
// block (it did, in MPI_Waitall).
struct MpiWorld::Arrivals {
  uint64_t sequence = 0;
  std::vector<uint64_t> seen;  // each rank's {sequence, fingerprint}, at 2 * rank
  std::vector<int> peers;      // every rank but this one; the vectors below follow it
  std::vector<MPI_Request> receives;
  std::vector<MPI_Request> sends;
  std::vector<bool> arrived;
  std::vector<bool> sent;
  size_t arrived_count = 0;
  size_t sent_count = 0;
  bool through() const { return arrived_count == peers.size() && sent_count == peers.size(); }
};

Status MpiWorld::Arrive(std::chrono::milliseconds timeout, const std::string& what,
                        uint64_t fingerprint) {
  const uint64_t sequence = ++sequence_;
  if (size_ == 1) return OkStatus();
  Arrivals arrivals;
  arrivals.sequence = sequence;
  TOWER_RETURN_IF_ERROR(PostArrivals(fingerprint, arrivals));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto halfway = std::chrono::steady_clock::now() + timeout / 2;
  bool warned = false;
  for (int polls = 0; !arrivals.through(); ++polls) {
    TOWER_RETURN_IF_ERROR(PollArrivals(fingerprint, what, arrivals));
    if (arrivals.through()) break;
    if (!warned && std::chrono::steady_clock::now() > halfway) {
      WarnLateArrivals(arrivals, what, timeout);
      warned = true;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return MissedArrivals(what, timeout, arrivals);
    }
    if (polls > 2000) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return OkStatus();
}

Status MpiWorld::PostArrivals(uint64_t fingerprint, Arrivals& arrivals) {
  arrivals.seen.assign(2 * static_cast<size_t>(size_), 0);
  arrive_token_[0] = arrivals.sequence;
  arrive_token_[1] = fingerprint;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    MPI_Request receive, send;
    TOWER_MPI_RETURN_IF_ERROR(MPI_Irecv(&arrivals.seen[2 * peer], 2, MPI_UINT64_T, peer, kArriveTag,
                                        MPI_COMM_WORLD, &receive));
    TOWER_MPI_RETURN_IF_ERROR(MPI_Isend(arrive_token_, 2, MPI_UINT64_T, peer, kArriveTag,
                                        MPI_COMM_WORLD, &send));
    arrivals.receives.push_back(receive);
    arrivals.sends.push_back(send);
    arrivals.peers.push_back(peer);
  }
  arrivals.arrived.assign(arrivals.peers.size(), false);
  arrivals.sent.assign(arrivals.peers.size(), false);
  return OkStatus();
}

Status MpiWorld::PollArrivals(uint64_t fingerprint, const std::string& what, Arrivals& arrivals) {
  for (size_t i = 0; i < arrivals.peers.size(); ++i) {
    const int peer = arrivals.peers[i];
    if (!arrivals.sent[i]) {
      int done = 0;
      const int code = MPI_Test(&arrivals.sends[i], &done, MPI_STATUS_IGNORE);
      if (code != MPI_SUCCESS) return Unreachable(peer, arrivals.sequence, what, code);
      if (done) {
        arrivals.sent[i] = true;
        ++arrivals.sent_count;
      }
    }
    if (arrivals.arrived[i]) continue;
    int done = 0;
    const int code = MPI_Test(&arrivals.receives[i], &done, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS) return Unreachable(peer, arrivals.sequence, what, code);
    if (!done) continue;
    arrivals.arrived[i] = true;
    ++arrivals.arrived_count;
    TOWER_RETURN_IF_ERROR(CheckArrival(peer, arrivals.seen[2 * peer], arrivals.seen[2 * peer + 1],
                                       arrivals.sequence, fingerprint, what));
  }
  return OkStatus();
}

Status MpiWorld::Unreachable(int peer, uint64_t sequence, const std::string& what, int code) {
  MarkUnreachable({peer});
  return UnavailableError(Describe(peer) + " is unreachable at collective " +
                          std::to_string(sequence) + " (" + what + "): " + MpiErrorText(code) +
                          "; " + Describe(rank_) + " gives up");
}

Status MpiWorld::CheckArrival(int peer, uint64_t their_sequence, uint64_t their_fingerprint,
                              uint64_t sequence, uint64_t fingerprint,
                              const std::string& what) const {
  if (their_sequence != sequence) {
    return FailedPreconditionError(Describe(rank_) + " is at collective " +
                                   std::to_string(sequence) + " (" + what + ") but " +
                                   Describe(peer) + " is at collective " +
                                   std::to_string(their_sequence) + ": the workers diverged");
  }
  if (their_fingerprint != fingerprint) {
    return FailedPreconditionError(
        "the workers diverged at collective " + std::to_string(sequence) + ": " + Describe(rank_) +
        " runs " + what + " at step " + std::to_string(CurrentStep()) + " (fingerprint " +
        HexFingerprint(fingerprint) + ") but " + Describe(peer) + "'s has fingerprint " +
        HexFingerprint(their_fingerprint) +
        " (a collective skipped or added, another step, or other shapes); `tower doctor` "
        "on the flight recorder's files names the rank that went astray");
  }
  return OkStatus();
}

void MpiWorld::WarnLateArrivals(const Arrivals& arrivals, const std::string& what,
                                std::chrono::milliseconds timeout) const {
  // Half the deadline: say who is late while there is still time to look at it.
  std::vector<std::string> late;
  for (size_t i = 0; i < arrivals.peers.size(); ++i) {
    if (!arrivals.arrived[i] || !arrivals.sent[i]) late.push_back(Describe(arrivals.peers[i]));
  }
  TOWER_LOG(WARNING) << Describe(rank_) << " has waited " << (timeout / 2).count()
                     << " ms, half the deadline, at collective " << arrivals.sequence << " ("
                     << what << ") for " << Join(late, ", ") << "; it gives up at "
                     << timeout.count() << " ms";
}

Status MpiWorld::MissedArrivals(const std::string& what, std::chrono::milliseconds timeout,
                                Arrivals& arrivals) {
  std::vector<int> missing;
  for (size_t i = 0; i < arrivals.peers.size(); ++i) {
    if (!arrivals.arrived[i]) MPI_Cancel(&arrivals.receives[i]);
    if (!arrivals.sent[i]) {
      MPI_Cancel(&arrivals.sends[i]);
      MPI_Request_free(&arrivals.sends[i]);
    }
    if (!arrivals.arrived[i] || !arrivals.sent[i]) missing.push_back(arrivals.peers[i]);
  }
  // A missing worker may be alive but behind, stuck in an earlier collective that this
  // one completed (a dead worker's data reached some survivors and not others): the
  // probe tells it from one that is gone. Only the silent ones are named unreachable.
  const std::vector<int> silent = Probe(std::min(timeout, kProbeWindow));
  std::vector<std::string> gone, behind;
  std::vector<int> gone_ranks;
  for (int rank : missing) {
    if (std::find(silent.begin(), silent.end(), rank) != silent.end()) {
      gone.push_back(Describe(rank));
      gone_ranks.push_back(rank);
    } else {
      behind.push_back(Describe(rank));
    }
  }
  MarkUnreachable(gone_ranks);
  const std::string where = "collective " + std::to_string(arrivals.sequence) + " (" + what + ")";
  return DeadlineExceededError(NeverReachedMessage(gone, behind, where, timeout) + "; " +
                               Describe(rank_) + " gives up");
}

Status MpiWorld::AllReduceSum(float* data, int64_t count, std::chrono::milliseconds timeout,
                              const std::string& what) {
  return AllReduceSum(data, count, /*layout=*/0, timeout, what);
}

Status MpiWorld::AllReduceSum(float* data, int64_t count, uint64_t layout,
                              std::chrono::milliseconds timeout, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t fingerprint = BeginCollective(
      "all-reduce", "float32", count, layout, count * static_cast<int64_t>(sizeof(float)), what);
  return EndCollective([&]() -> Status {
    TOWER_RETURN_IF_ERROR(Arrive(timeout, what, fingerprint));
    if (size_ == 1 || count == 0) return OkStatus();
    MPI_Request request;
    TOWER_MPI_RETURN_IF_ERROR(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count),
                                             MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request));
    return Wait(&request, timeout, what);
  }());
}

Status MpiWorld::Broadcast(void* data, int64_t bytes, int root, std::chrono::milliseconds timeout,
                           const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t fingerprint = BeginCollective("broadcast", "bytes", bytes, root, bytes, what);
  return EndCollective([&]() -> Status {
    TOWER_RETURN_IF_ERROR(Arrive(timeout, what, fingerprint));
    if (size_ == 1 || bytes == 0) return OkStatus();
    MPI_Request request;
    TOWER_MPI_RETURN_IF_ERROR(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root,
                                         MPI_COMM_WORLD, &request));
    return Wait(&request, timeout, what);
  }());
}

Status MpiWorld::AllToAllOf(const void* send, const std::vector<int>& send_counts,
                            const std::vector<int>& send_offsets, void* receive,
                            const std::vector<int>& receive_counts,
                            const std::vector<int>& receive_offsets, Element element,
                            std::chrono::milliseconds timeout, const std::string& what) {
  const MPI_Datatype type = element == Element::kFloat ? MPI_FLOAT : MPI_UINT16_T;
  std::lock_guard<std::mutex> lock(mu_);
  int64_t sent = 0;
  for (int count : send_counts) sent += count;
  // Workers send different counts (uneven ranges): the fingerprint leaves counts out.
  const uint64_t fingerprint = BeginCollective(
      "all-to-all", element == Element::kFloat ? "float32" : "16-bit", /*elements=*/0,
      /*layout=*/0, sent * (element == Element::kFloat ? 4 : 2), what);
  return EndCollective([&]() -> Status {
    TOWER_RETURN_IF_ERROR(Arrive(timeout, what, fingerprint));
    MPI_Request request;
    TOWER_MPI_RETURN_IF_ERROR(MPI_Ialltoallv(send, send_counts.data(), send_offsets.data(),
                                             type, receive, receive_counts.data(),
                                             receive_offsets.data(), type, MPI_COMM_WORLD,
                                             &request));
    return Wait(&request, timeout, what);
  }());
}

Status MpiWorld::AllGatherInPlaceOf(void* data, const std::vector<int>& counts,
                                    const std::vector<int>& offsets, Element element,
                                    std::chrono::milliseconds timeout, const std::string& what) {
  const MPI_Datatype type = element == Element::kFloat ? MPI_FLOAT : MPI_UINT16_T;
  std::lock_guard<std::mutex> lock(mu_);
  // Every worker passes the same counts: all of them are in the fingerprint.
  int64_t total = 0;
  uint64_t layout = 0;
  for (int count : counts) {
    total += count;
    layout = layout * 1000003u + static_cast<uint64_t>(count);
  }
  const uint64_t fingerprint = BeginCollective(
      "all-gather", element == Element::kFloat ? "float32" : "16-bit", total, layout,
      (rank_ < static_cast<int>(counts.size()) ? counts[rank_] : 0) *
          (element == Element::kFloat ? 4 : 2),
      what);
  return EndCollective([&]() -> Status {
    TOWER_RETURN_IF_ERROR(Arrive(timeout, what, fingerprint));
    MPI_Request request;
    TOWER_MPI_RETURN_IF_ERROR(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data,
                                              counts.data(), offsets.data(), type,
                                              MPI_COMM_WORLD, &request));
    return Wait(&request, timeout, what);
  }());
}

Status MpiWorld::AllToAll(const float* send, const std::vector<int>& send_counts,
                          const std::vector<int>& send_offsets, float* receive,
                          const std::vector<int>& receive_counts,
                          const std::vector<int>& receive_offsets,
                          std::chrono::milliseconds timeout, const std::string& what) {
  return AllToAllOf(send, send_counts, send_offsets, receive, receive_counts, receive_offsets,
                    Element::kFloat, timeout, what);
}

Status MpiWorld::AllToAll(const uint16_t* send, const std::vector<int>& send_counts,
                          const std::vector<int>& send_offsets, uint16_t* receive,
                          const std::vector<int>& receive_counts,
                          const std::vector<int>& receive_offsets,
                          std::chrono::milliseconds timeout, const std::string& what) {
  return AllToAllOf(send, send_counts, send_offsets, receive, receive_counts, receive_offsets,
                    Element::kUInt16, timeout, what);
}

Status MpiWorld::AllGatherInPlace(float* data, const std::vector<int>& counts,
                                  const std::vector<int>& offsets,
                                  std::chrono::milliseconds timeout, const std::string& what) {
  return AllGatherInPlaceOf(data, counts, offsets, Element::kFloat, timeout, what);
}

Status MpiWorld::AllGatherInPlace(uint16_t* data, const std::vector<int>& counts,
                                  const std::vector<int>& offsets,
                                  std::chrono::milliseconds timeout, const std::string& what) {
  return AllGatherInPlaceOf(data, counts, offsets, Element::kUInt16, timeout, what);
}

StatusOr<std::vector<std::string>> MpiWorld::AllGather(const std::string& mine,
                                                       std::chrono::milliseconds timeout,
                                                       const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  // Strings differ in length between workers (host names, descriptions).
  const uint64_t fingerprint = BeginCollective("all-gather", "bytes", /*elements=*/0,
                                               /*layout=*/0, mine.size(), what);
  StatusOr<std::vector<std::string>> gathered = AllGatherArrived(mine, timeout, what, fingerprint);
  TOWER_RETURN_IF_ERROR(EndCollective(gathered.status()));
  return gathered;
}

StatusOr<std::vector<std::string>> MpiWorld::AllGatherArrived(const std::string& mine,
                                                              std::chrono::milliseconds timeout,
                                                              const std::string& what,
                                                              uint64_t fingerprint) {
  TOWER_RETURN_IF_ERROR(Arrive(timeout, what, fingerprint));
  std::vector<int> lengths(static_cast<size_t>(size_), 0);
  int length = static_cast<int>(mine.size());
  MPI_Request request;
  TOWER_MPI_RETURN_IF_ERROR(
      MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD, &request));
  TOWER_RETURN_IF_ERROR(Wait(&request, timeout, what));
  std::vector<int> offsets(static_cast<size_t>(size_), 0);
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  TOWER_MPI_RETURN_IF_ERROR(MPI_Iallgatherv(mine.data(), length, MPI_CHAR, all.data(),
                                            lengths.data(), offsets.data(), MPI_CHAR,
                                            MPI_COMM_WORLD, &request));
  TOWER_RETURN_IF_ERROR(Wait(&request, timeout, what));
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.push_back(all.substr(offsets[r], lengths[r]));
  return out;
}

void MpiWorld::AbortJob(int exit_code) {
  if (!dumped_failure_) {
    // No collective failed here (another error ended this worker): the ring still shows
    // where every collective stood.
    const Status dumped = FlightRecorder::Get().Dump(
        Describe(rank_) + ": the job is aborted (exit code " + std::to_string(exit_code) + ")");
    if (!dumped.ok()) TOWER_LOG(WARNING) << dumped.message();
  } else if (size_ > 1) {
    // A collective failed here, so it fails on the others too: let them record it first.
    std::this_thread::sleep_for(kPeerRecordGrace);
  }
  std::vector<UnreachableWorker> report;
  for (int rank : unreachable()) {
    report.push_back({rank, rank < static_cast<int>(hosts_.size()) ? hosts_[rank] : "?"});
  }
  if (!report.empty()) {
    const std::string line = UnreachableWorkersLine(report) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  std::thread([exit_code] {
    std::this_thread::sleep_for(kAbortGrace);
    std::_Exit(exit_code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace tower
