#include "cudaemu/nccl/wire.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

namespace cudaemu::nccl {
namespace {

bool SendAll(int fd, const void* data, size_t bytes, int flags) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | flags);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool ReceiveAll(int fd, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// `name` in the abstract namespace: sun_path starts with a NUL and the address's length,
// not a terminating NUL, ends the name.
bool FillAddress(const std::string& name, sockaddr_un* address, socklen_t* length) {
  std::memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(address->sun_path)) return false;
  std::memcpy(address->sun_path + 1, name.data(), name.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return true;
}

}  // namespace

Connection::~Connection() { ::close(fd_); }

bool Connection::Send(const MessageHeader& header, const void* payload, size_t bytes) {
  std::lock_guard<std::mutex> lock(send_mu_);
  MessageHeader h = header;
  h.magic = kMagic;
  h.payload = bytes;
  if (!SendAll(fd_, &h, sizeof(h), 0)) return false;
  return bytes == 0 || SendAll(fd_, payload, bytes, 0);
}

bool Connection::SendIfIdle(const MessageHeader& header, const void* payload, size_t bytes) {
  std::unique_lock<std::mutex> lock(send_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  MessageHeader h = header;
  h.magic = kMagic;
  h.payload = bytes;
  // A message cut short must be followed by Shutdown() (every caller does): the reader then
  // sees a truncated message, which it treats as the end of the stream.
  if (!SendAll(fd_, &h, sizeof(h), MSG_DONTWAIT)) return false;
  return bytes == 0 || SendAll(fd_, payload, bytes, MSG_DONTWAIT);
}

bool Connection::ReceiveHeader(MessageHeader* header) {
  if (!ReceiveAll(fd_, header, sizeof(*header))) return false;
  return header->magic == kMagic;
}

bool Connection::ReceivePayload(void* data, size_t bytes) {
  return bytes == 0 || ReceiveAll(fd_, data, bytes);
}

void Connection::Shutdown() { ::shutdown(fd_, SHUT_RDWR); }

int ListenAt(const std::string& name, std::string* error) {
  sockaddr_un address;
  socklen_t length = 0;
  if (!FillAddress(name, &address, &length)) {
    *error = "socket name \"" + name + "\" is empty or too long";
    return -1;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
      ::listen(fd, 128) != 0) {
    *error = "bind/listen at abstract socket @" + name + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

int ConnectTo(const std::string& name) {
  sockaddr_un address;
  socklen_t length = 0;
  if (!FillAddress(name, &address, &length)) return -1;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  while (::connect(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    if (errno == EINTR) continue;
    ::close(fd);
    return -1;
  }
  return fd;
}

int AcceptWithin(int listen_fd, int timeout_ms) {
  pollfd p{listen_fd, POLLIN, 0};
  const int ready = ::poll(&p, 1, timeout_ms);
  if (ready <= 0 || (p.revents & POLLIN) == 0) return -1;
  return ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
}

}  // namespace cudaemu::nccl
