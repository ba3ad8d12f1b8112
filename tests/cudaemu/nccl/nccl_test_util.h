// Helpers of the NCCL emulation's tests: a watchdog that bounds every test in time, device
// buffers, and polling with a deadline.
#ifndef TOWER_TESTS_CUDAEMU_NCCL_NCCL_TEST_UTIL_H_
#define TOWER_TESTS_CUDAEMU_NCCL_NCCL_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tower::nccl_test {

// Ends the process (exit code 3) if the scope is not left within `limit`: a hang fails the
// test quickly and says where, instead of running into Bazel's timeout.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::milliseconds limit, std::string what = "the test")
      : what_(std::move(what)), thread_([this, limit] { Watch(limit); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Watch(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
      std::fprintf(stderr, "WATCHDOG: %s did not finish within %lld ms: it hangs\n", what_.c_str(),
                   static_cast<long long>(limit.count()));
      std::fflush(stderr);
      std::_Exit(3);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  const std::string what_;
  std::thread thread_;
};

// Threads meet here (std::barrier is C++20).
class Barrier {
 public:
  explicit Barrier(int parties) : parties_(parties) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int generation = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int parties_;
  int arrived_ = 0;
  int generation_ = 0;
};

// Polls `condition` every millisecond until it holds (true) or `limit` passed (false).
inline bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// cudaMalloc'd memory of `device` holding `count` elements.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer(int device, size_t count) : device_(device), count_(count) {
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    if (cudaMalloc(reinterpret_cast<void**>(&data_), (count == 0 ? 1 : count) * sizeof(T)) !=
        cudaSuccess) {
      data_ = nullptr;
    }
    cudaSetDevice(previous);
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  size_t count() const { return count_; }
  void Upload(const std::vector<T>& values) {
    cudaMemcpy(data_, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> Download() const {
    std::vector<T> values(count_);
    cudaMemcpy(values.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost);
    return values;
  }

 private:
  int device_;
  size_t count_;
  T* data_ = nullptr;
};

// A stream of `device` (made with the device current), destroyed at the end of the scope.
// Non-blocking by default: the legacy default stream (cudaMemcpy) does not wait for it, so a
// collective blocked on it waiting for another thread's rank cannot hold up that thread's
// copies (with blocking streams that is a deadlock, on a GPU too).
class DeviceStream {
 public:
  explicit DeviceStream(int device, unsigned int flags = cudaStreamNonBlocking) {
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    cudaStreamCreateWithFlags(&stream_, flags);
    cudaSetDevice(previous);
  }
  ~DeviceStream() { cudaStreamDestroy(stream_); }
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

inline std::string Hex(const ncclUniqueId& id) {
  static const char kDigits[] = "0123456789abcdef";
  std::string text;
  for (char c : id.internal) {
    const unsigned char b = static_cast<unsigned char>(c);
    text += kDigits[b >> 4];
    text += kDigits[b & 15];
  }
  return text;
}

inline bool Unhex(const std::string& text, ncclUniqueId* id) {
  if (text.size() != 2 * sizeof(id->internal)) return false;
  auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    const int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    id->internal[i] = static_cast<char>(hi * 16 + lo);
  }
  return true;
}

}  // namespace tower::nccl_test

#endif  // TOWER_TESTS_CUDAEMU_NCCL_NCCL_TEST_UTIL_H_
