// Between the processes of one host: Unix-domain stream sockets carrying fixed-size headers
// and payloads. Every socket is close-on-exec and every send is MSG_NOSIGNAL (a peer that
// died gives an error, not SIGPIPE).
#ifndef CUDAEMU_NCCL_WIRE_H_
#define CUDAEMU_NCCL_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace cudaemu::nccl {

enum MessageType : uint32_t {
  // rank → the hub (rank 0's process)
  kHello = 1,   // a=rank b=nranks c=device d=pid e=multi-rank-GPU allowed; payload: UUID
  kContribute,  // a=seq b=collective c=type d=op e=root f=count; payload: the rank's data
  kBye,         // a=last seq: the rank destroyed its communicator after that collective
  kAbort,       // the rank aborted its communicator
  // the hub → a rank
  kWelcome,  // d=the hub's pid
  kReady,    // every rank joined
  kFailed,   // a=ncclResult_t; payload: the reason
  kResult,   // a=seq; payload: the rank's part of the result
  kHubLeft,  // a=last seq: every rank in the hub's process destroyed its communicator
};

struct MessageHeader {
  uint32_t magic = 0;
  uint32_t type = 0;
  int64_t a = 0, b = 0, c = 0, d = 0, e = 0, f = 0;
  uint64_t payload = 0;  // bytes that follow
};

// One connected socket. Any thread may send (one message at a time); one thread reads.
// Shutdown() wakes a blocked reader or sender; the descriptor is closed by the destructor,
// so it is never reused while another thread still uses it.
class Connection {
 public:
  explicit Connection(int fd) : fd_(fd) {}
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Blocks until the message is written; false when the connection is broken.
  bool Send(const MessageHeader& header, const void* payload, size_t bytes);
  // For small control messages: never blocks; false (nothing or part of it sent) when another
  // thread is sending or the socket buffer is full.
  bool SendIfIdle(const MessageHeader& header, const void* payload, size_t bytes);
  // The reader's side: false at the end of the stream or on an error.
  bool ReceiveHeader(MessageHeader* header);
  bool ReceivePayload(void* data, size_t bytes);
  void Shutdown();

 private:
  const int fd_;
  std::mutex send_mu_;
};

// Sockets are named in Linux's abstract namespace (no file: the name is gone once the last
// descriptor on it closes, also when its process is killed; as NCCL's own IPC sockets). A
// host is therefore one network namespace: processes in two namespaces do not meet.
//
// A socket listening at abstract name `name`, or -1 with `error` set (a live socket already
// has the name: EADDRINUSE).
int ListenAt(const std::string& name, std::string* error);
// A socket connected to abstract name `name`, or -1 when nobody listens there (yet).
int ConnectTo(const std::string& name);
// Waits up to `timeout_ms` for a connection; its descriptor, or -1.
int AcceptWithin(int listen_fd, int timeout_ms);

constexpr uint32_t kMagic = 0x4e43434cu;  // "NCCL"

}  // namespace cudaemu::nccl

#endif  // CUDAEMU_NCCL_WIRE_H_
