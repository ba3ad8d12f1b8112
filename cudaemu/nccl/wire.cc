#include "cudaemu/nccl/wire.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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

bool FillAddress(const std::string& path, sockaddr_un* address) {
  std::memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address->sun_path)) return false;
  std::memcpy(address->sun_path, path.data(), path.size());
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

int ListenAt(const std::string& path, std::string* error) {
  sockaddr_un address;
  if (!FillAddress(path, &address)) {
    *error = "socket path \"" + path + "\" is too long";
    return -1;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd, 128) != 0) {
    *error = "bind/listen at " + path + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

int ConnectTo(const std::string& path) {
  sockaddr_un address;
  if (!FillAddress(path, &address)) return -1;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  while (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
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
