#include "data/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>

#include "util/file.h"

namespace tower::data {
namespace {

// A copy out of a mapping in flight on this thread: the mapping, and its file's damage flag.
struct CopyInFlight {
  const uint8_t* begin;
  const uint8_t* end;
  std::atomic<bool>* damaged;
};
thread_local const CopyInFlight* t_copy = nullptr;
struct sigaction g_previous_sigbus;
uintptr_t g_page_size = 4096;

// A SIGBUS at a page of the mapping a copy of this thread reads (the file shrank under it,
// or its storage failed): marks the file damaged and puts a page of zeros there, so that
// the copy completes and its read reports the damage. No jump out of the handler: it
// returns as from any other signal (sanitizers and the C++ runtime keep their state).
// Any other SIGBUS is the previous handler's: called here, or, for the default action (or
// SIG_IGN, which the kernel does not honour for a fault), restored and raised again.
void OnSigbus(int signal, siginfo_t* info, void* context) {
  const CopyInFlight* copy = t_copy;
  const auto* address = static_cast<const uint8_t*>(info->si_addr);
  if (copy != nullptr && info->si_code > 0 && address >= copy->begin && address < copy->end) {
    copy->damaged->store(true);
    void* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(address) & ~(g_page_size - 1));
    if (::mmap(page, g_page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
        MAP_FAILED) {
      return;
    }
  }
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 && g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(signal, info, context);
  } else if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN) {
    g_previous_sigbus.sa_handler(signal);
  } else {
    ::sigaction(SIGBUS, &g_previous_sigbus, nullptr);
    ::raise(signal);
  }
}

void InstallSigbusHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_page_size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
}

// memcpy out of the mapping [begin, end) that completes (with zeros for what the file no
// longer has) when the file shrank under it; `damaged` then becomes true.
void GuardedCopy(void* to, const uint8_t* from, size_t bytes, const uint8_t* begin,
                 const uint8_t* end, std::atomic<bool>* damaged) {
  const CopyInFlight copy{begin, end, damaged};
  t_copy = &copy;
  // The fences keep the compiler from moving the copy out from between the set and the reset
  // of t_copy (the handler runs on this thread, in between).
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(to, from, bytes);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_copy = nullptr;
}

// The most one read out of the mapping may bring in: the kernel maps a fault's whole folio,
// and the page cache's folios reach 2 MiB (a 100,000-byte read mapped ~1.1 MB, measured
// 2026-11-29 on Linux 6.18, ext4).
constexpr size_t kMostMappedByAFault = size_t{2} << 20;

// This process's resident pages of mapped files and shared memory, in bytes
// (/proc/self/statm's third field); 0 if it cannot be read.
size_t ProcessSharedResidentBytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[128];
  const ssize_t n = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  unsigned long long size = 0, resident = 0, shared = 0;
  if (std::sscanf(text, "%llu %llu %llu", &size, &resident, &shared) != 3) return 0;
  return static_cast<size_t>(shared) * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

size_t MappedFile::DefaultResidentWindow() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  const size_t eighth = pages > 0 && page > 0 ? static_cast<size_t>(pages) * page / 8 : 0;
  return std::max(eighth, size_t{64} << 20);
}

StatusOr<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path,
                                                             size_t resident_window) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return StatusFromErrno(errno, path + ": cannot open");
  ScopedFd owned(fd);
  struct stat info;
  if (::fstat(fd, &info) != 0) return StatusFromErrno(errno, path + ": cannot stat");
  if (!S_ISREG(info.st_mode)) {
    return InvalidArgumentError(path + ": not a regular file (give a file, not a directory)");
  }
  const size_t size = static_cast<size_t>(info.st_size);
  if (size == 0) {
    return std::shared_ptr<const MappedFile>(
        new MappedFile(path, owned.release(), nullptr, 0, resident_window));
  }
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) return StatusFromErrno(errno, path + ": cannot map");
  InstallSigbusHandler();
  return std::shared_ptr<const MappedFile>(new MappedFile(
      path, owned.release(), static_cast<const uint8_t*>(mapping), size, resident_window));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  ::close(fd_);
}

Status MappedFile::ReadAt(uint64_t offset, size_t bytes, void* out) const {
  if (bytes == 0) return OkStatus();
  if (offset > size_ || bytes > size_ - offset) {
    return DataLossError(path_ + ": the file ends before byte " + std::to_string(offset + bytes) +
                         " (" + std::to_string(size_) + " bytes when opened): write it again");
  }
  const bool in_order = last_end_.exchange(offset + bytes, std::memory_order_relaxed) == offset;
  if (bytes >= kReadAhead) return Pread(offset, bytes, out);
  if (in_order) return ReadAhead(offset, bytes, out);
  if (!damaged_.load()) GuardedCopy(out, data_ + offset, bytes, data_, data_ + size_, &damaged_);
  // Checked after the copy: another thread's copy may have found the damage meanwhile.
  if (damaged_.load()) {
    return DataLossError(path_ + ": cannot read bytes " + std::to_string(offset) + " to " +
                         std::to_string(offset + bytes) +
                         " (the file shrank while being read, or an I/O error): write it again");
  }
  CountResident(bytes + kMostMappedByAFault);
  return OkStatus();
}

Status MappedFile::Pread(uint64_t offset, size_t bytes, void* out) const {
  auto* to = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, to, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return StatusFromErrno(errno, path_ + ": reading at byte " + std::to_string(offset));
    if (n == 0) {
      return DataLossError(path_ + ": the file ends before byte " + std::to_string(offset) +
                           " (it shrank while being read: write it again)");
    }
    to += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return OkStatus();
}

Status MappedFile::ReadAhead(uint64_t offset, size_t bytes, void* out) const {
  std::lock_guard<std::mutex> lock(ahead_mutex_);
  if (offset < ahead_offset_ || offset + bytes > ahead_offset_ + ahead_bytes_) {
    // No bigger than the file, and not zero-filled (a 1 MiB memset per small file was most
    // of a fuzzer's time).
    if (ahead_ == nullptr) ahead_.reset(new uint8_t[std::min(kReadAhead, size_)]);
    ahead_bytes_ = 0;  // until the read succeeds
    const size_t span = static_cast<size_t>(std::min<uint64_t>(kReadAhead, size_ - offset));
    TOWER_RETURN_IF_ERROR(Pread(offset, span, ahead_.get()));
    ahead_offset_ = offset;
    ahead_bytes_ = span;
  }
  std::memcpy(out, ahead_.get() + (offset - ahead_offset_), bytes);
  // A pass that reached the end needs the buffer no more (many files are read one by one).
  if (offset + bytes == size_) {
    ahead_.reset();
    ahead_bytes_ = 0;
  }
  return OkStatus();
}

void MappedFile::CountResident(size_t bytes) const {
  // Every quarter window that reads may have mapped, one thread (the one whose count crosses
  // it) looks at what is mapped, and drops the pages past the window.
  const size_t check_every = std::max<size_t>(resident_window_ / 4, 1);
  const size_t before = mapped_since_check_.fetch_add(bytes, std::memory_order_relaxed);
  if (before < check_every && before + bytes >= check_every) {
    if (ProcessSharedResidentBytes() > resident_window_) DropPages(0, size_);
    mapped_since_check_.store(0, std::memory_order_relaxed);
  }
}

void MappedFile::DropPages(size_t offset, size_t bytes) const {
  if (data_ == nullptr || offset >= size_) return;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // madvise wants a page-aligned start; whole pages inside the range only.
  const size_t begin = (offset + page - 1) / page * page;
  const size_t end = std::min(size_, offset + bytes);
  if (end <= begin) return;
  ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

}  // namespace tower::data
