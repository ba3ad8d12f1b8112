#include "cudaemu/nccl/comm.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <utility>

#include "cudaemu/nccl/reduce.h"

namespace cudaemu::nccl {

std::mutex& Mu() {
  static std::mutex* const mu = new std::mutex();  // never destroyed: detached threads use it
  return *mu;
}

std::condition_variable& Cv() {
  static std::condition_variable* const cv = new std::condition_variable();
  return *cv;
}

namespace {

// ---- collectives: sizes -----------------------------------------------------------------

const char* CollectiveName(int32_t collective) {
  switch (collective) {
    case kAllReduce:
      return "ncclAllReduce";
    case kBroadcast:
      return "ncclBroadcast";
    case kReduce:
      return "ncclReduce";
    case kAllGather:
      return "ncclAllGather";
    case kReduceScatter:
      return "ncclReduceScatter";
    default:
      return "an unknown collective";
  }
}

bool Reduces(int32_t collective) {
  return collective == kAllReduce || collective == kReduce || collective == kReduceScatter;
}

size_t ElementBytes(const CollHeader& header) {
  return TypeSize(static_cast<ncclDataType_t>(header.type));
}

}  // namespace

bool operator==(const CollHeader& a, const CollHeader& b) {
  return a.collective == b.collective && a.type == b.type && a.count == b.count &&
         (!Reduces(a.collective) || a.op == b.op) &&
         ((a.collective != kBroadcast && a.collective != kReduce) || a.root == b.root);
}

std::string Describe(const CollHeader& header) {
  std::string text = std::string(CollectiveName(header.collective)) + "(count " +
                     std::to_string(header.count) + ", " +
                     TypeName(static_cast<ncclDataType_t>(header.type));
  if (Reduces(header.collective))
    text += std::string(", ") + OpName(static_cast<ncclRedOp_t>(header.op));
  if (header.collective == kBroadcast || header.collective == kReduce) {
    text += ", root " + std::to_string(header.root);
  }
  return text + ")";
}

size_t ContributionBytes(const CollHeader& header, int rank, int nranks) {
  const size_t bytes = header.count * ElementBytes(header);
  switch (header.collective) {
    case kBroadcast:
      return rank == header.root ? bytes : 0;
    case kReduceScatter:
      return bytes * static_cast<size_t>(nranks);
    default:
      return bytes;
  }
}

size_t ResultBytes(const CollHeader& header, int nranks) {
  const size_t bytes = header.count * ElementBytes(header);
  if (header.collective == kAllGather || header.collective == kReduceScatter) {
    return bytes * static_cast<size_t>(nranks);
  }
  return bytes;
}

void ResultPart(const CollHeader& header, int rank, int nranks, size_t* offset, size_t* bytes) {
  const size_t per_rank = header.count * ElementBytes(header);
  *offset = 0;
  switch (header.collective) {
    case kReduce:
      *bytes = rank == header.root ? per_rank : 0;
      return;
    case kReduceScatter:
      *offset = per_rank * static_cast<size_t>(rank);
      *bytes = per_rank;
      return;
    default:
      *bytes = ResultBytes(header, nranks);
      return;
  }
}

size_t ReceiveBytes(const CollHeader& header, int rank, int nranks) {
  size_t offset = 0, bytes = 0;
  ResultPart(header, rank, nranks, &offset, &bytes);
  return bytes;
}

// ---- faults --------------------------------------------------------------------------------

bool ParseWhere(const char* where, Fault* fault) {
  if (where == nullptr || where[0] == '\0' || std::strcmp(where, "collective") == 0) {
    fault->where = Fault::kCollective;
    fault->nth = 1;
    return true;
  }
  if (std::strcmp(where, "init") == 0) {
    fault->where = Fault::kInit;
    return true;
  }
  const char* prefix = "collective:";
  if (std::strncmp(where, prefix, std::strlen(prefix)) != 0) return false;
  const char* number = where + std::strlen(prefix);
  char* end = nullptr;
  const long long nth = std::strtoll(number, &end, 10);
  if (end == number || *end != '\0' || nth < 1) return false;
  fault->where = Fault::kCollective;
  fault->nth = nth;
  return true;
}

bool ParseFault(const std::string& text, Fault* fault) {
  *fault = Fault();
  if (text.empty()) return true;
  char* end = nullptr;
  const long rank = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || rank < 0 || rank > INT_MAX) return false;
  Fault parsed;
  parsed.rank = static_cast<int>(rank);
  if (*end == '\0') {
    if (!ParseWhere(nullptr, &parsed)) return false;
  } else if (*end != ':' || !ParseWhere(end + 1, &parsed)) {
    return false;
  }
  *fault = parsed;
  return true;
}

namespace {

struct FaultOverrides {
  bool stall_set = false;
  Fault stall;
  bool die_set = false;
  Fault die;
};

FaultOverrides& Overrides() {
  static FaultOverrides* const overrides = new FaultOverrides();  // guarded by Mu()
  return *overrides;
}

Fault CurrentFault(bool stall) {
  {
    std::lock_guard<std::mutex> lock(Mu());
    const FaultOverrides& o = Overrides();
    if (stall && o.stall_set) return o.stall;
    if (!stall && o.die_set) return o.die;
  }
  const char* name = stall ? "CUDAEMU_NCCL_STALL" : "CUDAEMU_NCCL_DIE";
  const char* text = std::getenv(name);
  Fault fault;
  if (text != nullptr && !ParseFault(text, &fault)) {
    std::fprintf(stderr, "cudaemu NCCL: ignoring %s=\"%s\": expected rank[:init|:collective:N]\n",
                 name, text);
  }
  return fault;
}

bool FaultAtInit(const Fault& fault, int rank) {
  return fault.where == Fault::kInit && fault.rank == rank;
}

bool FaultAtCollective(const Fault& fault, int rank, int64_t seq) {
  return fault.where == Fault::kCollective && fault.rank == rank && fault.nth == seq;
}

[[noreturn]] void Die(int rank, const std::string& where) {
  std::fprintf(stderr, "cudaemu NCCL: CUDAEMU_NCCL_DIE: rank %d kills its process (pid %d) at %s\n",
               rank, static_cast<int>(getpid()), where.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  while (true) {
    ::kill(getpid(), SIGKILL);
    ::pause();
  }
}

}  // namespace

void OverrideFault(bool stall, const Fault* fault) {
  std::lock_guard<std::mutex> lock(Mu());
  FaultOverrides& o = Overrides();
  if (stall) {
    o.stall_set = fault != nullptr;
    o.stall = fault != nullptr ? *fault : Fault();
  } else {
    o.die_set = fault != nullptr;
    o.die = fault != nullptr ? *fault : Fault();
  }
}

// ---- unique ids -------------------------------------------------------------------------------

namespace {

constexpr char kIdMagic[8] = {'c', 'u', 'e', 'm', 'N', 'C', 'C', 'L'};
constexpr size_t kTokenOffset = 8;
constexpr size_t kTokenChars = 32;
constexpr size_t kNameOffset = kTokenOffset + kTokenChars;
constexpr size_t kNameCapacity = NCCL_UNIQUE_ID_BYTES - kNameOffset;  // with its NUL

std::string RandomToken() {
  unsigned char bytes[kTokenChars / 2] = {};
  bool filled = false;
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    filled = ::read(fd, bytes, sizeof(bytes)) == static_cast<ssize_t>(sizeof(bytes));
    ::close(fd);
  }
  if (!filled) {
    std::random_device device;
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(device());
  }
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

}  // namespace

void NewRendezvous(bool across_processes, ncclUniqueId* id) {
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, kIdMagic, sizeof(kIdMagic));
  const std::string token = RandomToken();
  std::memcpy(id->internal + kTokenOffset, token.data(), kTokenChars);
  if (across_processes) {
    // An abstract socket (wire.h): no file to leave behind when a process dies.
    const std::string name = "cudaemu-nccl-" + token;
    static_assert(sizeof("cudaemu-nccl-") - 1 + kTokenChars < kNameCapacity);
    std::memcpy(id->internal + kNameOffset, name.data(), name.size());
  }
}

bool ReadRendezvous(const ncclUniqueId& id, Rendezvous* rendezvous) {
  if (std::memcmp(id.internal, kIdMagic, sizeof(kIdMagic)) != 0) return false;
  rendezvous->token.assign(id.internal + kTokenOffset, kTokenChars);
  const char* name = id.internal + kNameOffset;
  rendezvous->socket_name.assign(name, strnlen(name, kNameCapacity - 1));
  return true;
}

// ---- the hub ----------------------------------------------------------------------------------

namespace {

struct RankInfo {
  int device = 0;
  int64_t pid = 0;
  std::string uuid;
  bool multi_rank_gpu = false;
};

// Collective #seq while it gathers contributions, then its result until every rank of the
// hub's process has taken its part.
struct Round {
  int64_t seq = 0;
  CollHeader header;
  int first_rank = 0;
  std::vector<std::vector<char>> inputs;
  std::vector<bool> have;
  int arrived = 0;
  bool done = false;
  std::shared_ptr<const std::vector<char>> result;
  int pickups = 0;
};

// A result to send once Mu() is released.
struct Outgoing {
  std::shared_ptr<Connection> connection;
  MessageHeader header;
  std::shared_ptr<const std::vector<char>> data;  // payload data[offset, offset + bytes)...
  size_t offset = 0;
  size_t bytes = 0;
};
using Outbox = std::vector<Outgoing>;

void Flush(Outbox* out) {
  for (Outgoing& o : *out) o.connection->Send(o.header, o.data->data() + o.offset, o.bytes);
  out->clear();
}

// A small control message sent at once, under Mu(), so that it is on its way before anyone
// acts on the state change it announces (a process may exit right after). Never blocks; when
// it cannot be sent (another thread is sending), the connection is shut down instead, which
// the other side sees as the end of the stream.
void SendNow(const std::shared_ptr<Connection>& connection, uint32_t type, int64_t a,
             const std::string& text, bool shutdown_after) {
  MessageHeader h;
  h.type = type;
  h.a = a;
  if (!connection->SendIfIdle(h, text.data(), text.size()) || shutdown_after) {
    connection->Shutdown();
  }
}

std::vector<char> Compute(Round& round, int nranks) {
  const CollHeader& h = round.header;
  switch (h.collective) {
    case kBroadcast:
      return std::move(round.inputs[static_cast<size_t>(h.root)]);
    case kAllGather: {
      std::vector<char> result;
      result.reserve(ResultBytes(h, nranks));
      for (const auto& input : round.inputs)
        result.insert(result.end(), input.begin(), input.end());
      return result;
    }
    default: {
      std::vector<const char*> inputs;
      for (const auto& input : round.inputs) inputs.push_back(input.data());
      const size_t count =
          h.collective == kReduceScatter ? h.count * static_cast<size_t>(nranks) : h.count;
      std::vector<char> result = std::move(round.inputs[0]);  // reduced in place
      inputs[0] = result.data();
      ReduceInRankOrder(inputs, result.data(), count, static_cast<ncclDataType_t>(h.type),
                        static_cast<ncclRedOp_t>(h.op));
      return result;
    }
  }
}

}  // namespace

class Hub {
 public:
  Hub(int n, Rendezvous r)
      : nranks(n),
        rendezvous(std::move(r)),
        joined(n, false),
        remote(n, false),
        departed(n, false),
        info(n),
        connections(n),
        last_seq(n, 0) {}

  const int nranks;
  const Rendezvous rendezvous;

  // Guarded by Mu().
  Phase phase = Phase::kJoining;
  bool was_ready = false;  // every rank joined (it may have failed since)
  ncclResult_t error = ncclSuccess;
  std::string reason;
  int joined_count = 0;
  std::vector<bool> joined, remote, departed;
  std::vector<RankInfo> info;
  std::vector<std::shared_ptr<Connection>> connections;  // of the remote ranks
  std::vector<int64_t> last_seq;                         // of the departed ranks
  std::map<int64_t, std::shared_ptr<Round>> rounds;
  bool told_hub_left = false;

  std::string Name(int rank) const {
    if (rank < 0 || rank >= nranks || info[rank].pid == 0) return "rank " + std::to_string(rank);
    return "rank " + std::to_string(rank) + " (pid " + std::to_string(info[rank].pid) + ")";
  }

  void FailLocked(ncclResult_t code, const std::string& why) {
    if (phase == Phase::kFailed) return;
    phase = Phase::kFailed;
    error = code;
    reason = why;
    // Rounds still gathering never complete; finished ones stay for the ranks that take them.
    for (auto it = rounds.begin(); it != rounds.end();) {
      it = it->second->done ? std::next(it) : rounds.erase(it);
    }
    for (auto& connection : connections) {
      if (connection == nullptr) continue;
      SendNow(connection, kFailed, code, why, /*shutdown_after=*/true);
      connection = nullptr;
    }
    Cv().notify_all();
  }

  ncclResult_t JoinLocked(int rank, int n, const RankInfo& rank_info,
                          std::shared_ptr<Connection> connection, std::string* why) {
    if (phase == Phase::kFailed) {
      *why = reason;
      return error;
    }
    if (n != nranks || rank < 0 || rank >= nranks) {
      *why = "rank " + std::to_string(rank) + " joined with nranks " + std::to_string(n) +
             " but rank 0 made the communicator with nranks " + std::to_string(nranks);
      FailLocked(ncclInvalidUsage, *why);
      return ncclInvalidUsage;
    }
    if (joined[rank] || phase != Phase::kJoining) {
      *why = "rank " + std::to_string(rank) +
             " joined the communicator twice (one unique id "
             "per communicator, one call per rank)";
      FailLocked(ncclInvalidUsage, *why);
      return ncclInvalidUsage;
    }
    joined[rank] = true;
    ++joined_count;
    info[rank] = rank_info;
    remote[rank] = connection != nullptr;
    connections[rank] = std::move(connection);
    if (joined_count == nranks) {
      for (int i = 0; i < nranks && phase == Phase::kJoining; ++i) {
        for (int j = 0; j < i; ++j) {
          if (info[i].uuid != info[j].uuid || (info[i].multi_rank_gpu && info[j].multi_rank_gpu)) {
            continue;
          }
          FailLocked(ncclInvalidUsage, "Duplicate GPU detected : rank " + std::to_string(i) +
                                           " and rank " + std::to_string(j) +
                                           " both on CUDA device " +
                                           std::to_string(info[i].device) + " (" + info[i].uuid +
                                           "); set NCCL_MULTI_RANK_GPU_ENABLE=1 to allow it");
          break;
        }
      }
      if (phase == Phase::kJoining) {
        phase = Phase::kReady;
        was_ready = true;
        for (const auto& c : connections) {
          if (c != nullptr) SendNow(c, kReady, 0, "", /*shutdown_after=*/false);
        }
      }
      Cv().notify_all();
    }
    return ncclSuccess;
  }

  void SubmitLocked(int rank, int64_t seq, const CollHeader& header, std::vector<char> data,
                    std::shared_ptr<Round>* complete) {
    if (phase != Phase::kReady) return;
    for (int r = 0; r < nranks; ++r) {
      if (departed[r] && last_seq[r] < seq) {
        FailLocked(ncclRemoteError, Name(r) + " destroyed its communicator before collective #" +
                                        std::to_string(seq));
        return;
      }
    }
    std::shared_ptr<Round>& slot = rounds[seq];
    if (slot == nullptr) {
      slot = std::make_shared<Round>();
      slot->seq = seq;
      slot->header = header;
      slot->first_rank = rank;
      slot->inputs.resize(static_cast<size_t>(nranks));
      slot->have.assign(static_cast<size_t>(nranks), false);
    }
    Round& round = *slot;
    if (!(round.header == header)) {
      FailLocked(ncclInvalidUsage, "collective #" + std::to_string(seq) +
                                       " differs between ranks: " + Name(round.first_rank) +
                                       " called " + Describe(round.header) + ", " + Name(rank) +
                                       " called " + Describe(header));
      return;
    }
    if (round.have[rank] || data.size() != ContributionBytes(header, rank, nranks)) {
      FailLocked(ncclInternalError, Name(rank) + " sent a malformed contribution to collective #" +
                                        std::to_string(seq));
      return;
    }
    round.inputs[rank] = std::move(data);
    round.have[rank] = true;
    if (++round.arrived == nranks) *complete = slot;
  }

  // Computes the result of a round whose contributions are all there (without Mu()), then
  // hands it out: first to the other processes, then to the ranks of this one, so that the
  // results are on their way before this process can move on (and maybe exit).
  void Complete(const std::shared_ptr<Round>& round) {
    auto result = std::make_shared<const std::vector<char>>(Compute(*round, nranks));
    round->inputs.clear();
    Outbox out;
    {
      std::lock_guard<std::mutex> lock(Mu());
      if (phase != Phase::kReady) return;
      for (int r = 0; r < nranks; ++r) {
        if (!remote[r] || connections[r] == nullptr) continue;
        Outgoing o;
        o.connection = connections[r];
        o.header.type = kResult;
        o.header.a = round->seq;
        o.data = result;
        ResultPart(round->header, r, nranks, &o.offset, &o.bytes);
        out.push_back(std::move(o));
      }
    }
    Flush(&out);
    std::lock_guard<std::mutex> lock(Mu());
    auto it = rounds.find(round->seq);
    if (it == rounds.end() || it->second != round) return;  // failed meanwhile
    round->result = result;
    round->done = true;
    for (int r = 0; r < nranks; ++r) {
      if (!remote[r]) ++round->pickups;
    }
    if (round->pickups == 0) rounds.erase(it);
    Cv().notify_all();
  }

  void LeaveLocked(int rank, int64_t last) {
    if (phase == Phase::kFailed) return;
    departed[rank] = true;
    last_seq[rank] = last;
    if (phase == Phase::kJoining) {
      FailLocked(ncclRemoteError,
                 Name(rank) + " destroyed its communicator before every rank joined");
      return;
    }
    for (const auto& [seq, round] : rounds) {
      if (seq > last && !round->have[rank]) {
        FailLocked(ncclRemoteError, Name(rank) + " destroyed its communicator before collective #" +
                                        std::to_string(seq));
        return;
      }
    }
    // When every rank of this process has left, the other processes may see this one end:
    // tell them it is no failure (up to the collectives those ranks took part in).
    if (told_hub_left) return;
    int64_t hub_last = INT64_MAX;
    for (int r = 0; r < nranks; ++r) {
      if (remote[r]) continue;
      if (!departed[r]) return;
      hub_last = std::min(hub_last, last_seq[r]);
    }
    told_hub_left = true;
    for (const auto& c : connections) {
      if (c != nullptr) SendNow(c, kHubLeft, hub_last, "", /*shutdown_after=*/false);
    }
  }
};

// ---- the link to a hub in another process ------------------------------------------------------

class Link {
 public:
  explicit Link(std::shared_ptr<Connection> c) : connection(std::move(c)) {}
  const std::shared_ptr<Connection> connection;

  // Guarded by Mu().
  Phase phase = Phase::kJoining;
  bool was_ready = false;
  ncclResult_t error = ncclSuccess;
  std::string reason;
  int64_t hub_pid = 0;
  bool closing = false;  // this rank left or aborted: the end of the stream is expected
  bool ended = false;    // the stream ended
  bool hub_left = false;
  int64_t hub_last_seq = 0;
  std::map<int64_t, std::vector<char>> results;

  std::string HubName() const {
    return hub_pid != 0 ? "rank 0 (pid " + std::to_string(hub_pid) + ")" : std::string("rank 0");
  }

  void FailLocked(ncclResult_t code, const std::string& why) {
    if (phase == Phase::kFailed) return;
    phase = Phase::kFailed;
    error = code;
    reason = why;
    Cv().notify_all();
  }
};

namespace {

// ---- the local rendezvous: hubs of this process by token ---------------------------------------

std::map<std::string, std::weak_ptr<Hub>>& Hubs() {
  static auto* const hubs = new std::map<std::string, std::weak_ptr<Hub>>();  // guarded by Mu()
  return *hubs;
}

std::shared_ptr<Hub> FindHubLocked(const std::string& token) {
  auto it = Hubs().find(token);
  return it == Hubs().end() ? nullptr : it->second.lock();
}

RankInfo InfoOf(const Member& member) {
  RankInfo info;
  info.device = member.device;
  info.pid = getpid();
  info.uuid = member.uuid;
  info.multi_rank_gpu = member.multi_rank_gpu;
  return info;
}

void JoinLocalLocked(Member& member, const std::shared_ptr<Hub>& hub) {
  std::string why;
  const ncclResult_t result =
      hub->JoinLocked(member.rank, member.nranks, InfoOf(member), nullptr, &why);
  if (result != ncclSuccess) {
    member.init_error = result;
    member.init_reason = why;
  } else {
    member.hub = hub;
  }
  Cv().notify_all();
}

// The hub's side of a remote rank's connection, on a thread of its own.
void ServeRank(const std::shared_ptr<Hub>& hub, const std::shared_ptr<Connection>& connection) {
  MessageHeader h;
  if (!connection->ReceiveHeader(&h) || h.type != kHello || h.payload > 1024) return;
  RankInfo info;
  info.uuid.resize(h.payload);
  if (!connection->ReceivePayload(&info.uuid[0], h.payload)) return;
  const int rank = static_cast<int>(h.a);
  info.device = static_cast<int>(h.c);
  info.pid = h.d;
  info.multi_rank_gpu = h.e != 0;
  MessageHeader welcome;
  welcome.type = kWelcome;
  welcome.d = getpid();
  connection->Send(welcome, nullptr, 0);
  std::string why;
  ncclResult_t joined;
  {
    std::lock_guard<std::mutex> lock(Mu());
    joined = hub->JoinLocked(rank, static_cast<int>(h.b), info, connection, &why);
  }
  if (joined != ncclSuccess) {
    MessageHeader failed;
    failed.type = kFailed;
    failed.a = joined;
    connection->Send(failed, why.data(), why.size());
    connection->Shutdown();
    return;
  }
  bool expected_end = false;
  while (connection->ReceiveHeader(&h)) {
    if (h.type == kContribute) {
      if (h.payload > (uint64_t{1} << 42)) break;
      CollHeader header;
      header.collective = static_cast<int32_t>(h.b);
      header.type = static_cast<int32_t>(h.c);
      header.op = static_cast<int32_t>(h.d);
      header.root = static_cast<int32_t>(h.e);
      header.count = static_cast<uint64_t>(h.f);
      std::vector<char> data(h.payload);
      if (!connection->ReceivePayload(data.data(), data.size())) break;
      std::shared_ptr<Round> complete;
      {
        std::lock_guard<std::mutex> lock(Mu());
        hub->SubmitLocked(rank, h.a, header, std::move(data), &complete);
      }
      if (complete != nullptr) hub->Complete(complete);
    } else if (h.type == kBye) {
      std::lock_guard<std::mutex> lock(Mu());
      hub->LeaveLocked(rank, h.a);
      expected_end = true;
    } else if (h.type == kAbort) {
      std::lock_guard<std::mutex> lock(Mu());
      hub->FailLocked(ncclRemoteError, hub->Name(rank) + " aborted its communicator");
      expected_end = true;
    } else {
      break;
    }
  }
  {
    std::lock_guard<std::mutex> lock(Mu());
    if (!expected_end) {
      hub->FailLocked(ncclRemoteError, hub->Name(rank) + " closed its connection");
    }
    if (hub->connections[rank] == connection) hub->connections[rank] = nullptr;
  }
}

// Accepts the other processes' ranks until every rank joined or the communicator failed.
void AcceptRanks(const std::shared_ptr<Hub>& hub, int listen_fd) {
  while (true) {
    {
      std::lock_guard<std::mutex> lock(Mu());
      if (hub->phase != Phase::kJoining) break;
    }
    const int fd = AcceptWithin(listen_fd, 20);
    if (fd < 0) continue;
    auto connection = std::make_shared<Connection>(fd);
    std::thread([hub, connection] { ServeRank(hub, connection); }).detach();
  }
  ::close(listen_fd);  // frees the abstract name
}

// The rank's side of its link, until the connection ends.
void ReadLink(const std::shared_ptr<Link>& link) {
  Connection& connection = *link->connection;
  MessageHeader h;
  while (connection.ReceiveHeader(&h)) {
    if (h.type == kWelcome) {
      std::lock_guard<std::mutex> lock(Mu());
      link->hub_pid = h.d;
    } else if (h.type == kReady) {
      std::lock_guard<std::mutex> lock(Mu());
      if (link->phase == Phase::kJoining) {
        link->phase = Phase::kReady;
        link->was_ready = true;
      }
      Cv().notify_all();
    } else if (h.type == kFailed) {
      if (h.payload > 65536) break;
      std::string why(h.payload, '\0');
      if (!connection.ReceivePayload(&why[0], why.size())) break;
      std::lock_guard<std::mutex> lock(Mu());
      link->FailLocked(static_cast<ncclResult_t>(h.a), why);
    } else if (h.type == kResult) {
      if (h.payload > (uint64_t{1} << 42)) break;
      std::vector<char> data(h.payload);
      if (!connection.ReceivePayload(data.data(), data.size())) break;
      std::lock_guard<std::mutex> lock(Mu());
      link->results[h.a] = std::move(data);
      Cv().notify_all();
    } else if (h.type == kHubLeft) {
      std::lock_guard<std::mutex> lock(Mu());
      link->hub_left = true;
      link->hub_last_seq = h.a;
    } else {
      break;
    }
  }
  std::lock_guard<std::mutex> lock(Mu());
  link->ended = true;
  if (!link->closing && (link->phase == Phase::kJoining || !link->hub_left)) {
    link->FailLocked(ncclRemoteError, link->HubName() + " closed its connection");
  }
  Cv().notify_all();
}

// A rank other than 0 looks for its hub: in this process (by token) or at the socket name,
// until it finds it or the communicator is destroyed. Once connected, this thread reads the
// link until it ends.
void JoinHub(std::shared_ptr<Member>& member) {
  const Rendezvous rendezvous = member->rendezvous;
  std::unique_lock<std::mutex> lock(Mu());
  while (!member->cancelled) {
    if (std::shared_ptr<Hub> hub = FindHubLocked(rendezvous.token)) {
      JoinLocalLocked(*member, hub);
      lock.unlock();
      member.reset();
      return;
    }
    if (!rendezvous.socket_name.empty()) {
      lock.unlock();
      const int fd = ConnectTo(rendezvous.socket_name);
      lock.lock();
      if (fd >= 0) {
        // A hub of this process may have appeared meanwhile: then it is joined directly.
        if (member->cancelled || FindHubLocked(rendezvous.token) != nullptr) {
          ::close(fd);
          continue;
        }
        auto link = std::make_shared<Link>(std::make_shared<Connection>(fd));
        member->link = link;
        lock.unlock();
        MessageHeader hello;
        hello.type = kHello;
        hello.a = member->rank;
        hello.b = member->nranks;
        hello.c = member->device;
        hello.d = getpid();
        hello.e = member->multi_rank_gpu ? 1 : 0;
        link->connection->Send(hello, member->uuid.data(), member->uuid.size());
        member.reset();  // the communicator's lifetime is its own from here
        ReadLink(link);
        return;
      }
    }
    Cv().wait_for(lock, std::chrono::milliseconds(10));
  }
  lock.unlock();
  member.reset();
}

}  // namespace

// ---- members ------------------------------------------------------------------------------------

Member::Member(int r, int n, int d, Rendezvous rv, bool b)
    : rank(r),
      nranks(n),
      device(d),
      uuid(internal::DeviceUuid(d)),
      rendezvous(std::move(rv)),
      multi_rank_gpu(internal::EnvInt("NCCL_MULTI_RANK_GPU_ENABLE", 0) != 0),
      stall(CurrentFault(/*stall=*/true)),
      die(CurrentFault(/*stall=*/false)),
      blocking(b) {}

Member::~Member() {
  std::shared_ptr<Link> closing;
  bool bye = false;
  int64_t last = 0;
  {
    std::lock_guard<std::mutex> lock(Mu());
    last = next_seq;
    bye = !broken;
    if (hub != nullptr && !aborted) {
      if (broken) {
        hub->FailLocked(ncclRemoteError, hub->Name(rank) +
                                             " destroyed its communicator with collective #" +
                                             std::to_string(next_seq) + " undelivered");
      } else {
        hub->LeaveLocked(rank, last);
      }
    }
    if (link != nullptr && !link->closing) {
      link->closing = true;
      closing = link;
    }
    Cv().notify_all();
  }
  if (closing != nullptr) {
    MessageHeader h;
    h.type = bye ? kBye : kAbort;
    h.a = last;
    closing->connection->SendIfIdle(h, nullptr, 0);
    closing->connection->Shutdown();
  }
}

Phase StateLocked(const Member& member, ncclResult_t* error, std::string* reason) {
  *error = ncclSuccess;
  reason->clear();
  if (member.usage_error != ncclSuccess) {
    *error = member.usage_error;
    *reason = member.usage_reason;
    return Phase::kFailed;
  }
  if (member.init_error != ncclSuccess) {
    *error = member.init_error;
    *reason = member.init_reason;
    return Phase::kFailed;
  }
  Phase phase = Phase::kJoining;
  if (member.hub != nullptr) {
    phase = member.hub->phase;
    *error = member.hub->error;
    *reason = member.hub->reason;
  } else if (member.link != nullptr) {
    phase = member.link->phase;
    *error = member.link->error;
    *reason = member.link->reason;
  }
  if (phase != Phase::kFailed) *error = ncclSuccess;
  return phase;
}

void StartJoin(const std::shared_ptr<Member>& member) {
  if (FaultAtInit(member->die, member->rank)) Die(member->rank, "init");
  if (FaultAtInit(member->stall, member->rank)) {
    std::lock_guard<std::mutex> lock(Mu());
    member->stalled = true;  // never joins
    return;
  }
  if (member->rank == 0) {
    auto hub = std::make_shared<Hub>(member->nranks, member->rendezvous);
    // Registered before it listens: a rank of this process that reaches the socket finds it
    // here too, and joins directly.
    {
      std::lock_guard<std::mutex> lock(Mu());
      auto& hubs = Hubs();
      for (auto it = hubs.begin(); it != hubs.end();) {
        it = it->second.expired() ? hubs.erase(it) : std::next(it);
      }
      hubs[member->rendezvous.token] = hub;
      JoinLocalLocked(*member, hub);
    }
    const std::string& socket_name = member->rendezvous.socket_name;
    if (socket_name.empty()) return;
    // An abstract name is never stale: taken means a live hub already has this id.
    std::string error;
    const int listen_fd = ListenAt(socket_name, &error);
    if (listen_fd < 0) {
      {
        std::lock_guard<std::mutex> lock(Mu());
        hub->FailLocked(ncclSystemError,
                        "rank 0 cannot host the communicator's rendezvous: " + error);
      }
      return;
    }
    std::thread([hub, listen_fd] { AcceptRanks(hub, listen_fd); }).detach();
    return;
  }
  bool joined = false;
  {
    std::lock_guard<std::mutex> lock(Mu());
    if (std::shared_ptr<Hub> hub = FindHubLocked(member->rendezvous.token)) {
      JoinLocalLocked(*member, hub);
      joined = true;
    }
  }
  if (joined) return;
  std::thread([joining = member]() mutable { JoinHub(joining); }).detach();
}

Phase WaitJoined(const Member& member, ncclResult_t* error, std::string* reason) {
  std::unique_lock<std::mutex> lock(Mu());
  Phase phase = Phase::kJoining;
  Cv().wait(lock, [&] {
    phase = StateLocked(member, error, reason);
    if (phase == Phase::kJoining && member.cancelled) {  // destroyed or aborted meanwhile
      phase = Phase::kFailed;
      *error = ncclInvalidUsage;
      *reason = "the communicator was destroyed or aborted before every rank joined";
    }
    return phase != Phase::kJoining;
  });
  // Joined, even if a peer failed right after: initialisation succeeded; the failure is the
  // communicator's asynchronous error.
  const bool joined =
      member.init_error == ncclSuccess && ((member.hub != nullptr && member.hub->was_ready) ||
                                           (member.link != nullptr && member.link->was_ready));
  if (joined) {
    *error = ncclSuccess;
    reason->clear();
    return Phase::kReady;
  }
  return phase;
}

void Abort(Member& member) {
  std::shared_ptr<Link> closing;
  {
    std::lock_guard<std::mutex> lock(Mu());
    member.aborted = true;
    member.cancelled = true;
    if (member.hub != nullptr) {
      member.hub->FailLocked(ncclRemoteError,
                             member.hub->Name(member.rank) + " aborted its communicator");
    }
    if (member.link != nullptr && !member.link->closing) {
      member.link->closing = true;
      closing = member.link;
    }
    Cv().notify_all();
  }
  if (closing != nullptr) {
    MessageHeader h;
    h.type = kAbort;
    closing->connection->SendIfIdle(h, nullptr, 0);
    closing->connection->Shutdown();
  }
}

void Release(Member& member) {
  std::lock_guard<std::mutex> lock(Mu());
  member.cancelled = true;
  Cv().notify_all();
}

// ---- collectives
// ----------------------------------------------------------------------------------

namespace {

// Hands the rank's contribution to the hub; false when it was not delivered.
bool Deliver(const Op& op) {
  Member& m = *op.member;
  std::shared_ptr<Hub> hub;
  std::shared_ptr<Link> link;
  {
    std::unique_lock<std::mutex> lock(Mu());
    if (m.aborted) return false;
    if (FaultAtCollective(m.die, m.rank, op.seq)) {
      lock.unlock();
      Die(m.rank, "collective #" + std::to_string(op.seq));
    }
    if (m.stalled || FaultAtCollective(m.stall, m.rank, op.seq)) {
      m.stalled = true;  // this and every later collective: never delivered
      Cv().wait(lock, [&] { return m.cancelled; });
      if (!m.aborted) m.broken = true;
      return false;
    }
    ncclResult_t error;
    std::string reason;
    if (StateLocked(m, &error, &reason) != Phase::kReady) return false;
    hub = m.hub;
    link = m.link;
    if (link != nullptr && link->hub_left && op.seq > link->hub_last_seq) {
      link->FailLocked(ncclRemoteError, link->HubName() +
                                            " destroyed its communicator before "
                                            "collective #" +
                                            std::to_string(op.seq));
      return false;
    }
  }
  const size_t bytes = ContributionBytes(op.header, m.rank, m.nranks);
  const char* send = static_cast<const char*>(op.send);
  if (hub != nullptr) {
    std::vector<char> data;
    if (bytes > 0) data.assign(send, send + bytes);
    std::shared_ptr<Round> complete;
    {
      std::lock_guard<std::mutex> lock(Mu());
      hub->SubmitLocked(m.rank, op.seq, op.header, std::move(data), &complete);
    }
    if (complete != nullptr) hub->Complete(complete);
    return true;
  }
  MessageHeader h;
  h.type = kContribute;
  h.a = op.seq;
  h.b = op.header.collective;
  h.c = op.header.type;
  h.d = op.header.op;
  h.e = op.header.root;
  h.f = static_cast<int64_t>(op.header.count);
  link->connection->Send(h, send, bytes);  // a broken connection ends the link's reader
  return true;
}

// Whether a rank's collective that cannot complete stops waiting: as a NCCL kernel spins until
// its communicator is aborted, it waits until this rank aborts or destroys its communicator.
bool Released(const Member& m) { return m.aborted || m.cancelled; }

// Waits for the rank's part of the result and writes it to the receive buffer. When the
// communicator fails first, it waits until the rank is released (data undefined).
void Collect(const Op& op) {
  Member& m = *op.member;
  size_t offset = 0, bytes = 0;
  ResultPart(op.header, m.rank, m.nranks, &offset, &bytes);
  std::unique_lock<std::mutex> lock(Mu());
  if (m.hub != nullptr) {
    Hub& hub = *m.hub;
    std::shared_ptr<Round> round;
    Cv().wait(lock, [&] {
      if (m.aborted) return true;
      auto it = hub.rounds.find(op.seq);
      if (it != hub.rounds.end() && it->second->done) {
        round = it->second;
        return true;
      }
      return hub.phase == Phase::kFailed && Released(m);
    });
    if (round == nullptr) return;
    lock.unlock();
    if (bytes > 0) std::memcpy(op.recv, round->result->data() + offset, bytes);
    lock.lock();
    if (--round->pickups == 0) {
      auto it = hub.rounds.find(op.seq);
      if (it != hub.rounds.end() && it->second == round) hub.rounds.erase(it);
    }
    return;
  }
  if (m.link == nullptr) return;
  Link& link = *m.link;
  Cv().wait(lock, [&] {
    if (m.aborted || link.results.count(op.seq) != 0) return true;
    if (link.ended && link.phase != Phase::kFailed) {
      link.FailLocked(ncclRemoteError, link.HubName() +
                                           " closed its connection before "
                                           "collective #" +
                                           std::to_string(op.seq) + " completed");
    }
    return link.phase == Phase::kFailed && Released(m);
  });
  auto it = link.results.find(op.seq);
  if (it == link.results.end()) return;
  std::vector<char> data = std::move(it->second);
  link.results.erase(it);
  lock.unlock();
  if (data.size() == bytes && bytes > 0) std::memcpy(op.recv, data.data(), bytes);
}

// A collective that was not delivered because the communicator had failed waits like one
// that was (a spinning kernel) until the rank is released.
void WaitReleased(const Op& op) {
  Member& m = *op.member;
  std::unique_lock<std::mutex> lock(Mu());
  Cv().wait(lock, [&] { return Released(m); });
}

cudaError_t Run(const std::vector<Op>& ops) {
  std::vector<bool> delivered(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) delivered[i] = Deliver(ops[i]);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (delivered[i]) {
      Collect(ops[i]);
    } else {
      WaitReleased(ops[i]);
    }
  }
  // A collective that failed leaves its data undefined but the stream usable, as NCCL's
  // kernels do once their communicator is aborted.
  return cudaSuccess;
}

}  // namespace

void Enqueue(std::vector<std::pair<Op, std::shared_ptr<internal::Stream>>> ops) {
  {
    std::lock_guard<std::mutex> lock(Mu());
    for (auto& [op, stream] : ops) op.seq = ++op.member->next_seq;
  }
  std::vector<bool> taken(ops.size(), false);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (taken[i]) continue;
    std::vector<Op> batch;
    std::string what = "NCCL";
    for (size_t j = i; j < ops.size(); ++j) {
      if (taken[j] || ops[j].second != ops[i].second) continue;
      taken[j] = true;
      what += std::string(" ") + CollectiveName(ops[j].first.header.collective) + " #" +
              std::to_string(ops[j].first.seq) + " of rank " +
              std::to_string(ops[j].first.member->rank);
      batch.push_back(std::move(ops[j].first));
    }
    ops[i].second->Enqueue(std::move(what), [batch = std::move(batch)] { return Run(batch); });
  }
}

}  // namespace cudaemu::nccl
