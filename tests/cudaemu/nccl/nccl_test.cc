// The NCCL emulation in one process: ncclCommInitAll over 1-4 devices, ranks as threads,
// collectives with closed-form results, groups, and the failure paths (duplicate GPUs, abort
// of a stalled rank, a peer that never joins, use after destroy). The target sets
// CUDAEMU_GPUS=4. Every test is bounded by a watchdog.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/stat.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "cudaemu/nccl_testing.h"
#include "tests/cudaemu/nccl/nccl_test_util.h"

namespace tower::nccl_test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Whether a socket of this network namespace is bound to abstract name `name`: the kernel's
// table lists it as "@name" in its last column.
bool AbstractSocketListens(const std::string& name) {
  std::ifstream table("/proc/net/unix");
  const std::string suffix = " @" + name;
  for (std::string line; std::getline(table, line);) {
    if (line.size() >= suffix.size() &&
        line.compare(line.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

class NcclTest : public ::testing::Test {
 protected:
  NcclTest() : watchdog_(60s, ::testing::UnitTest::GetInstance()->current_test_info()->name()) {}
  void TearDown() override { cudaemu::testing::ClearNcclFaults(); }

  Watchdog watchdog_;
};

// Communicators over devices 0..n-1 (or `devices`), destroyed at the end of the scope.
class Comms {
 public:
  explicit Comms(int n) : comms_(n, nullptr) {
    result_ = ncclCommInitAll(comms_.data(), n, nullptr);
  }
  explicit Comms(const std::vector<int>& devices) : comms_(devices.size(), nullptr) {
    result_ = ncclCommInitAll(comms_.data(), static_cast<int>(devices.size()), devices.data());
  }
  ~Comms() {
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) ncclCommDestroy(comm);
    }
  }
  ncclResult_t result() const { return result_; }
  ncclComm_t operator[](int i) const { return comms_[i]; }
  // Forgets comm i (destroyed or aborted by the test).
  void Forget(int i) { comms_[i] = nullptr; }
  int size() const { return static_cast<int>(comms_.size()); }

 private:
  std::vector<ncclComm_t> comms_;
  ncclResult_t result_;
};

TEST_F(NcclTest, VersionAndErrorStrings) {
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  EXPECT_EQ(version, 22809);
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
  EXPECT_THAT(ncclGetErrorString(ncclInvalidArgument), HasSubstr("invalid argument"));
  EXPECT_THAT(ncclGetErrorString(ncclRemoteError), HasSubstr("remote process exited"));
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("version is NULL"));
}

TEST_F(NcclTest, InitAllOverOneToFourDevicesSumsInClosedForm) {
  int gpus = 0;
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
  ASSERT_EQ(gpus, 4) << "the target sets CUDAEMU_GPUS=4";
  for (int n = 1; n <= 4; ++n) {
    const int64_t live_before = cudaemu::testing::NcclLiveCommunicators();
    {
      Comms comms(n);
      ASSERT_EQ(comms.result(), ncclSuccess) << ncclGetLastError(nullptr);
      EXPECT_EQ(cudaemu::testing::NcclLiveCommunicators(), live_before + n);
      for (int r = 0; r < n; ++r) {
        int count = 0, device = -1, rank = -1;
        ASSERT_EQ(ncclCommCount(comms[r], &count), ncclSuccess);
        ASSERT_EQ(ncclCommCuDevice(comms[r], &device), ncclSuccess);
        ASSERT_EQ(ncclCommUserRank(comms[r], &rank), ncclSuccess);
        EXPECT_EQ(count, n);
        EXPECT_EQ(device, r);
        EXPECT_EQ(rank, r);
        ncclResult_t async = ncclInternalError;
        ASSERT_EQ(ncclCommGetAsyncError(comms[r], &async), ncclSuccess);
        EXPECT_EQ(async, ncclSuccess);
      }
      for (size_t size : {size_t{0}, size_t{1}, size_t{1023}, size_t{300001}}) {
        for (bool in_place : {false, true}) {
          std::vector<std::unique_ptr<DeviceBuffer<float>>> send, recv;
          std::vector<std::unique_ptr<DeviceStream>> streams;
          for (int r = 0; r < n; ++r) {
            send.push_back(std::make_unique<DeviceBuffer<float>>(r, size));
            recv.push_back(std::make_unique<DeviceBuffer<float>>(r, size));
            streams.push_back(std::make_unique<DeviceStream>(r));
            std::vector<float> values(size);
            for (size_t i = 0; i < size; ++i) values[i] = static_cast<float>((r + 1) * (i % 7 + 1));
            send[r]->Upload(values);
            recv[r]->Upload(std::vector<float>(size, -1.0f));
          }
          ASSERT_EQ(ncclGroupStart(), ncclSuccess);
          for (int r = 0; r < n; ++r) {
            float* out = in_place ? send[r]->get() : recv[r]->get();
            ASSERT_EQ(ncclAllReduce(send[r]->get(), out, size, ncclFloat, ncclSum, comms[r],
                                    streams[r]->get()),
                      ncclSuccess)
                << ncclGetLastError(nullptr);
          }
          ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
          for (int r = 0; r < n; ++r) {
            ASSERT_EQ(cudaStreamSynchronize(streams[r]->get()), cudaSuccess);
            const std::vector<float> got = (in_place ? send[r] : recv[r])->Download();
            size_t wrong = 0;
            for (size_t i = 0; i < size; ++i) {
              const float want = static_cast<float>((i % 7 + 1) * n * (n + 1) / 2);
              if (got[i] != want && wrong++ < 3) {
                ADD_FAILURE() << "n=" << n << " size=" << size << " in_place=" << in_place
                              << " rank " << r << " [" << i << "] = " << got[i] << ", want "
                              << want;
              }
            }
            EXPECT_EQ(wrong, 0u);
          }
        }
      }
    }
    EXPECT_EQ(cudaemu::testing::NcclLiveCommunicators(), live_before);
  }
}

// Every op on several types, 3 ranks (on devices 3, 1, 0), against the closed form.
TEST_F(NcclTest, AllReduceOpsAndTypes) {
  const std::vector<int> devices = {3, 1, 0};
  Comms comms(devices);
  ASSERT_EQ(comms.result(), ncclSuccess) << ncclGetLastError(nullptr);
  const int n = 3;
  const size_t size = 1023;
  struct Case {
    ncclRedOp_t op;
    const char* name;
  };
  for (const Case& c : {Case{ncclSum, "sum"}, Case{ncclProd, "prod"}, Case{ncclMax, "max"},
                        Case{ncclMin, "min"}, Case{ncclAvg, "avg"}}) {
    SCOPED_TRACE(c.name);
    // x_r[i] = (r + 1) * (i % 5 + 1): sum 6k, prod 6k^3, max 3k, min k, avg 2k.
    auto expected = [&](size_t i) {
      const int64_t k = static_cast<int64_t>(i % 5 + 1);
      switch (c.op) {
        case ncclSum:
          return 6 * k;
        case ncclProd:
          return 6 * k * k * k;
        case ncclMax:
          return 3 * k;
        case ncclMin:
          return k;
        default:
          return 2 * k;
      }
    };
    auto run = [&](auto zero, ncclDataType_t type) {
      using T = decltype(zero);
      std::vector<std::unique_ptr<DeviceBuffer<T>>> buffers;
      for (int r = 0; r < n; ++r) {
        buffers.push_back(std::make_unique<DeviceBuffer<T>>(devices[r], size));
        std::vector<T> values(size);
        for (size_t i = 0; i < size; ++i) values[i] = static_cast<T>((r + 1) * (i % 5 + 1));
        buffers[r]->Upload(values);
      }
      ncclGroupStart();
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(ncclAllReduce(buffers[r]->get(), buffers[r]->get(), size, type, c.op, comms[r],
                                nullptr),
                  ncclSuccess)
            << ncclGetLastError(nullptr);
      }
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
      for (int r = 0; r < n; ++r) {
        cudaSetDevice(devices[r]);
        ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
        const std::vector<T> got = buffers[r]->Download();
        for (size_t i = 0; i < size; ++i) {
          const T want = static_cast<T>(expected(i));
          if (std::is_floating_point<T>::value && c.op == ncclAvg) {
            ASSERT_NEAR(static_cast<double>(got[i]), static_cast<double>(want), 1e-5)
                << "rank " << r << " [" << i << "]";
          } else {
            ASSERT_EQ(got[i], want) << "rank " << r << " [" << i << "]";
          }
        }
      }
      cudaSetDevice(0);
    };
    run(float{}, ncclFloat32);
    run(double{}, ncclDouble);
    run(int32_t{}, ncclInt32);
    run(int64_t{}, ncclInt64);
  }
}

TEST_F(NcclTest, Int64SumsKeepSixtyFourBits) {
  Comms comms(2);
  ASSERT_EQ(comms.result(), ncclSuccess);
  DeviceBuffer<int64_t> a(0, 3), b(1, 3);
  a.Upload({int64_t{1} << 40, -5, INT64_MAX - 1});
  b.Upload({(int64_t{1} << 40) + 7, 5, 1});
  ncclGroupStart();
  ncclAllReduce(a.get(), a.get(), 3, ncclInt64, ncclSum, comms[0], nullptr);
  ncclAllReduce(b.get(), b.get(), 3, ncclInt64, ncclSum, comms[1], nullptr);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  cudaDeviceSynchronize();
  cudaSetDevice(1);
  cudaDeviceSynchronize();
  cudaSetDevice(0);
  EXPECT_THAT(a.Download(), ::testing::ElementsAre((int64_t{1} << 41) + 7, 0, INT64_MAX));
  EXPECT_EQ(a.Download(), b.Download());
}

// Float sums are associated in rank order: ((1e8 + 1) + -1e8) + 1 is 1 in float (1e8 + 1
// rounds back to 1e8); any other order gives 0 or 2.
TEST_F(NcclTest, SumsAreAssociatedInRankOrder) {
  Comms comms(4);
  ASSERT_EQ(comms.result(), ncclSuccess);
  const float inputs[4] = {1e8f, 1.0f, -1e8f, 1.0f};
  for (int run = 0; run < 20; ++run) {
    std::vector<std::unique_ptr<DeviceBuffer<float>>> buffers;
    for (int r = 0; r < 4; ++r) {
      buffers.push_back(std::make_unique<DeviceBuffer<float>>(r, 5));
      buffers[r]->Upload(std::vector<float>(5, inputs[r]));
    }
    // Ranks enqueue in a different order each run.
    ncclGroupStart();
    for (int k = 0; k < 4; ++k) {
      const int r = (k + run) % 4;
      ncclAllReduce(buffers[r]->get(), buffers[r]->get(), 5, ncclFloat, ncclSum, comms[r], nullptr);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < 4; ++r) {
      cudaSetDevice(r);
      cudaDeviceSynchronize();
      EXPECT_THAT(buffers[r]->Download(), ::testing::Each(1.0f)) << "run " << run << " rank " << r;
    }
    cudaSetDevice(0);
  }
}

TEST_F(NcclTest, BroadcastFromEveryRoot) {
  Comms comms(4);
  ASSERT_EQ(comms.result(), ncclSuccess);
  for (size_t size : {size_t{1}, size_t{300001}}) {
    for (int root = 0; root < 4; ++root) {
      std::vector<std::unique_ptr<DeviceBuffer<int32_t>>> send, recv;
      for (int r = 0; r < 4; ++r) {
        send.push_back(std::make_unique<DeviceBuffer<int32_t>>(r, size));
        recv.push_back(std::make_unique<DeviceBuffer<int32_t>>(r, size));
        std::vector<int32_t> values(size);
        for (size_t i = 0; i < size; ++i) values[i] = static_cast<int32_t>(1000 * r + i);
        send[r]->Upload(values);
      }
      // Out of place with ncclBroadcast, then in place with ncclBcast on the send buffers.
      ncclGroupStart();
      for (int r = 0; r < 4; ++r) {
        ASSERT_EQ(
            ncclBroadcast(send[r]->get(), recv[r]->get(), size, ncclInt32, root, comms[r], nullptr),
            ncclSuccess);
        ASSERT_EQ(ncclBcast(send[r]->get(), size, ncclInt32, root, comms[r], nullptr), ncclSuccess);
      }
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
      for (int r = 0; r < 4; ++r) {
        cudaSetDevice(r);
        cudaDeviceSynchronize();
        const std::vector<int32_t> out = recv[r]->Download();
        const std::vector<int32_t> in_place = send[r]->Download();
        for (size_t i = 0; i < size; ++i) {
          ASSERT_EQ(out[i], static_cast<int32_t>(1000 * root + i)) << "rank " << r;
          ASSERT_EQ(in_place[i], static_cast<int32_t>(1000 * root + i)) << "rank " << r;
        }
      }
      cudaSetDevice(0);
    }
  }
}

TEST_F(NcclTest, AllGatherOutOfPlaceAndInPlace) {
  Comms comms(4);
  ASSERT_EQ(comms.result(), ncclSuccess);
  const size_t per_rank = 1023;
  std::vector<std::unique_ptr<DeviceBuffer<double>>> send, recv, inplace;
  for (int r = 0; r < 4; ++r) {
    send.push_back(std::make_unique<DeviceBuffer<double>>(r, per_rank));
    recv.push_back(std::make_unique<DeviceBuffer<double>>(r, 4 * per_rank));
    inplace.push_back(std::make_unique<DeviceBuffer<double>>(r, 4 * per_rank));
    std::vector<double> mine(per_rank), whole(4 * per_rank, -1.0);
    for (size_t i = 0; i < per_rank; ++i) mine[i] = r * 10000.0 + i * 0.5;
    std::copy(mine.begin(), mine.end(), whole.begin() + r * per_rank);
    send[r]->Upload(mine);
    inplace[r]->Upload(whole);
  }
  ncclGroupStart();
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(
        ncclAllGather(send[r]->get(), recv[r]->get(), per_rank, ncclDouble, comms[r], nullptr),
        ncclSuccess);
    ASSERT_EQ(ncclAllGather(inplace[r]->get() + r * per_rank, inplace[r]->get(), per_rank,
                            ncclDouble, comms[r], nullptr),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 4; ++r) {
    cudaSetDevice(r);
    cudaDeviceSynchronize();
    const std::vector<double> a = recv[r]->Download(), b = inplace[r]->Download();
    for (int s = 0; s < 4; ++s) {
      for (size_t i = 0; i < per_rank; ++i) {
        ASSERT_EQ(a[s * per_rank + i], s * 10000.0 + i * 0.5) << "rank " << r;
        ASSERT_EQ(b[s * per_rank + i], s * 10000.0 + i * 0.5) << "rank " << r;
      }
    }
  }
  cudaSetDevice(0);
}

TEST_F(NcclTest, ReduceAndReduceScatter) {
  Comms comms(3);
  ASSERT_EQ(comms.result(), ncclSuccess);
  const size_t per_rank = 100;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> send, reduced, scattered;
  for (int r = 0; r < 3; ++r) {
    send.push_back(std::make_unique<DeviceBuffer<float>>(r, 3 * per_rank));
    reduced.push_back(std::make_unique<DeviceBuffer<float>>(r, 3 * per_rank));
    scattered.push_back(std::make_unique<DeviceBuffer<float>>(r, per_rank));
    std::vector<float> values(3 * per_rank);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((r + 1) * i);
    send[r]->Upload(values);
    reduced[r]->Upload(std::vector<float>(3 * per_rank, -7.0f));
  }
  ncclGroupStart();
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(ncclReduce(send[r]->get(), reduced[r]->get(), 3 * per_rank, ncclFloat, ncclSum,
                         /*root=*/1, comms[r], nullptr),
              ncclSuccess);
    ASSERT_EQ(ncclReduceScatter(send[r]->get(), scattered[r]->get(), per_rank, ncclFloat, ncclMax,
                                comms[r], nullptr),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 3; ++r) {
    cudaSetDevice(r);
    cudaDeviceSynchronize();
    const std::vector<float> red = reduced[r]->Download(), sc = scattered[r]->Download();
    for (size_t i = 0; i < 3 * per_rank; ++i) {
      ASSERT_EQ(red[i], r == 1 ? 6.0f * i : -7.0f) << "rank " << r << " [" << i << "]";
    }
    for (size_t i = 0; i < per_rank; ++i) {
      ASSERT_EQ(sc[i], 3.0f * (r * per_rank + i)) << "rank " << r << " [" << i << "]";
    }
  }
  cudaSetDevice(0);
}

TEST_F(NcclTest, HalfAndBfloat16Sums) {
  Comms comms(2);
  ASSERT_EQ(comms.result(), ncclSuccess);
  // 1.5 + 2.25 = 3.75, exact in both formats: half 0x3e00 + 0x4080 = 0x4380; bfloat16
  // 0x3fc0 + 0x4010 = 0x4070.
  DeviceBuffer<uint16_t> h0(0, 1), h1(1, 1), b0(0, 1), b1(1, 1);
  h0.Upload({0x3e00});
  h1.Upload({0x4080});
  b0.Upload({0x3fc0});
  b1.Upload({0x4010});
  ncclGroupStart();
  ncclAllReduce(h0.get(), h0.get(), 1, ncclHalf, ncclSum, comms[0], nullptr);
  ncclAllReduce(h1.get(), h1.get(), 1, ncclHalf, ncclSum, comms[1], nullptr);
  ncclAllReduce(b0.get(), b0.get(), 1, ncclBfloat16, ncclSum, comms[0], nullptr);
  ncclAllReduce(b1.get(), b1.get(), 1, ncclBfloat16, ncclSum, comms[1], nullptr);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  cudaDeviceSynchronize();
  cudaSetDevice(1);
  cudaDeviceSynchronize();
  cudaSetDevice(0);
  EXPECT_EQ(h0.Download()[0], 0x4380);
  EXPECT_EQ(h1.Download()[0], 0x4380);
  EXPECT_EQ(b0.Download()[0], 0x4070);
  EXPECT_EQ(b1.Download()[0], 0x4070);
}

// Inside a group nothing reaches a stream before ncclGroupEnd: were rank 0's all-reduce
// enqueued at once, its stream would block waiting for rank 1.
TEST_F(NcclTest, GroupDefersCollectivesToGroupEnd) {
  Comms comms(2);
  ASSERT_EQ(comms.result(), ncclSuccess);
  DeviceStream s0(0), s1(1);
  DeviceBuffer<float> a(0, 16), b(1, 16);
  a.Upload(std::vector<float>(16, 1.0f));
  b.Upload(std::vector<float>(16, 2.0f));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);  // nested: only the outermost end counts
  ASSERT_EQ(ncclAllReduce(a.get(), a.get(), 16, ncclFloat, ncclSum, comms[0], s0.get()),
            ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(cudaStreamQuery(s0.get()), cudaSuccess) << "enqueued before ncclGroupEnd";
  ASSERT_EQ(ncclAllReduce(b.get(), b.get(), 16, ncclFloat, ncclSum, comms[1], s1.get()),
            ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s0.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s1.get()), cudaSuccess);
  EXPECT_THAT(a.Download(), ::testing::Each(3.0f));
  EXPECT_THAT(b.Download(), ::testing::Each(3.0f));

  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("no ncclGroupStart"));
}

// A failed call inside a group fails ncclGroupEnd too, and the group's collectives are dropped.
TEST_F(NcclTest, AnErrorInsideAGroupFailsGroupEnd) {
  Comms comms(2);
  ASSERT_EQ(comms.result(), ncclSuccess);
  DeviceBuffer<float> a(0, 4);
  std::vector<float> host(4);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(a.get(), a.get(), 4, ncclFloat, ncclSum, comms[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(host.data(), host.data(), 4, ncclFloat, ncclSum, comms[1], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("not (wholly) device memory"));
  EXPECT_EQ(cudaStreamQuery(nullptr), cudaSuccess);  // rank 0's all-reduce never ran
}

// One thread initialises every rank with ncclCommInitRank inside a group (as NCCL requires):
// no deadlock, and the communicators work.
TEST_F(NcclTest, OneThreadInitialisesSeveralRanksInAGroup) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(3, nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(ncclCommInitRank(&comms[r], 3, id, r), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  cudaSetDevice(0);
  std::vector<std::unique_ptr<DeviceBuffer<int32_t>>> buffers;
  std::vector<std::unique_ptr<DeviceStream>> streams;
  ncclGroupStart();
  for (int r = 0; r < 3; ++r) {
    int device = -1;
    ncclCommCuDevice(comms[r], &device);
    EXPECT_EQ(device, r);
    buffers.push_back(std::make_unique<DeviceBuffer<int32_t>>(r, 10));
    streams.push_back(std::make_unique<DeviceStream>(r));
    buffers[r]->Upload(std::vector<int32_t>(10, r + 1));
    ASSERT_EQ(ncclAllReduce(buffers[r]->get(), buffers[r]->get(), 10, ncclInt32, ncclSum, comms[r],
                            streams[r]->get()),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(cudaStreamSynchronize(streams[r]->get()), cudaSuccess);
    EXPECT_THAT(buffers[r]->Download(), ::testing::Each(6));
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

// Ranks as threads, each with ncclCommInitRank (blocking) on its own device; rank 0 comes
// last, so the others wait for its hub.
TEST_F(NcclTest, RanksAsThreads) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  const int n = 4;
  const size_t size = 300001;
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * (n - r)));
      cudaSetDevice(r);
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) {
        errors[r] = std::string("init: ") + ncclGetLastError(nullptr);
        return;
      }
      DeviceBuffer<float> buffer(r, size);
      std::vector<float> values(size);
      for (size_t i = 0; i < size; ++i) values[i] = static_cast<float>(r * 2 + (i % 3));
      buffer.Upload(values);
      cudaStream_t stream;
      cudaStreamCreate(&stream);
      for (int round = 0; round < 3; ++round) {
        if (ncclAllReduce(buffer.get(), buffer.get(), size, ncclFloat, ncclMax, comm, stream) !=
            ncclSuccess) {
          errors[r] = std::string("all-reduce: ") + ncclGetLastError(nullptr);
        }
        if (ncclAllReduce(buffer.get(), buffer.get(), size, ncclFloat, ncclSum, comm, stream) !=
            ncclSuccess) {
          errors[r] = std::string("all-reduce: ") + ncclGetLastError(nullptr);
        }
      }
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
      // max then sum, three times: m_0 = 6 + i%3 (rank 3's), then 4m, max 4m, 16m, 64m.
      const std::vector<float> got = buffer.Download();
      for (size_t i = 0; i < size; ++i) {
        const float want = 64.0f * (6 + i % 3);
        if (got[i] != want) {
          errors[r] = "[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", want " +
                      std::to_string(want);
          break;
        }
      }
      if (ncclCommDestroy(comm) != ncclSuccess) errors[r] = "destroy failed";
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  cudaSetDevice(0);
}

TEST_F(NcclTest, DuplicateGpuIsRefused) {
  {
    std::vector<ncclComm_t> comms(2, reinterpret_cast<ncclComm_t>(1));
    const std::vector<int> devices = {1, 1};
    EXPECT_EQ(ncclCommInitAll(comms.data(), 2, devices.data()), ncclInvalidUsage);
    EXPECT_THAT(ncclGetLastError(nullptr),
                HasSubstr("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1"));
    EXPECT_EQ(comms[0], nullptr);
    EXPECT_EQ(comms[1], nullptr);
  }
  // Two threads on device 0: both are refused.
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  const int64_t live = cudaemu::testing::NcclLiveCommunicators();
  ncclResult_t results[2];
  std::string messages[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      ncclComm_t comm = nullptr;
      results[r] = ncclCommInitRank(&comm, 2, id, r);
      messages[r] = ncclGetLastError(nullptr);
      if (comm != nullptr) ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r], ncclInvalidUsage) << "rank " << r;
    EXPECT_THAT(messages[r], HasSubstr("Duplicate GPU detected : rank 1 and rank 0 both on CUDA "
                                       "device 0"));
  }
  EXPECT_EQ(cudaemu::testing::NcclLiveCommunicators(), live);
}

// Rank 1 stalls in its first collective; aborting it unblocks its stream at once, and rank 0
// sees ncclRemoteError naming rank 1. Rank 0's collective then waits (as a NCCL kernel spins)
// until rank 0 aborts too.
TEST_F(NcclTest, AbortUnblocksAStalledCollective) {
  cudaemu::testing::SetNcclStall(1, "collective:1");
  Comms comms(2);
  ASSERT_EQ(comms.result(), ncclSuccess);
  DeviceStream s0(0), s1(1);
  DeviceBuffer<float> a(0, 1000), b(1, 1000);
  ncclGroupStart();
  ncclAllReduce(a.get(), a.get(), 1000, ncclFloat, ncclSum, comms[0], s0.get());
  ncclAllReduce(b.get(), b.get(), 1000, ncclFloat, ncclSum, comms[1], s1.get());
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(cudaStreamQuery(s0.get()), cudaErrorNotReady);
  EXPECT_EQ(cudaStreamQuery(s1.get()), cudaErrorNotReady);
  ncclResult_t async = ncclInternalError;
  ASSERT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);  // a stall is silent: nothing failed yet

  const int64_t aborted = cudaemu::testing::NcclCommunicatorsAborted();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(ncclCommAbort(comms[1]), ncclSuccess);
  comms.Forget(1);
  EXPECT_EQ(cudaemu::testing::NcclCommunicatorsAborted(), aborted + 1);
  EXPECT_TRUE(Eventually([&] { return cudaStreamQuery(s1.get()) == cudaSuccess; }, 2000ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  ASSERT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclRemoteError);
  EXPECT_THAT(ncclGetLastError(comms[0]),
              HasSubstr("rank 1 (pid " + std::to_string(getpid()) + ") aborted its communicator"));
  // A later collective on the failed communicator reports the failure.
  EXPECT_EQ(ncclAllReduce(a.get(), a.get(), 1000, ncclFloat, ncclSum, comms[0], s0.get()),
            ncclRemoteError);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(cudaStreamQuery(s0.get()), cudaErrorNotReady);
  EXPECT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
  comms.Forget(0);
  EXPECT_TRUE(Eventually([&] { return cudaStreamQuery(s0.get()) == cudaSuccess; }, 2000ms));
}

// A rank that stalls at init never joins; a non-blocking peer sees ncclInProgress, then both
// abort.
TEST_F(NcclTest, NonBlockingInitWithAPeerThatNeverJoins) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const int64_t live = cudaemu::testing::NcclLiveCommunicators();
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 2, id, 0, &config), ncclInProgress);
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(cudaemu::testing::NcclLiveCommunicators(), live + 1);
  // The rendezvous socket has the abstract name in the id until the communicator ends, and
  // never a file.
  const std::string name(id.internal + 40);
  EXPECT_TRUE(Eventually([&] { return AbstractSocketListens(name); }, 1000ms)) << name;
  struct stat st;
  EXPECT_NE(stat(name.c_str(), &st), 0);
  EXPECT_NE(stat(("/tmp/" + name).c_str(), &st), 0);
  for (int i = 0; i < 30; ++i) {
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    ASSERT_EQ(async, ncclInProgress);
    std::this_thread::sleep_for(10ms);
  }
  DeviceBuffer<float> a(0, 4);
  EXPECT_EQ(ncclAllReduce(a.get(), a.get(), 4, ncclFloat, ncclSum, comm, nullptr),
            ncclInvalidUsage);
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_EQ(cudaemu::testing::NcclLiveCommunicators(), live);
  EXPECT_TRUE(Eventually([&] { return !AbstractSocketListens(name); }, 2000ms))
      << "@" << name << " left behind";

  // The same with a peer that stalls at init (rank 1, non-blocking too: it never joins).
  cudaemu::testing::SetNcclStall(1, "init");
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[2] = {nullptr, nullptr};
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    ASSERT_EQ(ncclCommInitRankConfig(&comms[r], 2, id, r, &config), ncclInProgress);
  }
  cudaSetDevice(0);
  std::this_thread::sleep_for(200ms);
  for (int r = 0; r < 2; ++r) {
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comms[r], &async), ncclSuccess);
    EXPECT_EQ(async, ncclInProgress) << "rank " << r;
  }
  EXPECT_EQ(ncclCommAbort(comms[1]), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
}

// Non-blocking initialisation of both ranks from one thread: both end ready.
TEST_F(NcclTest, NonBlockingInitCompletes) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comms[2] = {nullptr, nullptr};
  for (int r = 1; r >= 0; --r) {
    cudaSetDevice(r);
    const ncclResult_t result = ncclCommInitRankConfig(&comms[r], 2, id, r, &config);
    EXPECT_TRUE(result == ncclInProgress || result == ncclSuccess) << result;
  }
  cudaSetDevice(0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(Eventually(
        [&] {
          ncclResult_t async = ncclInternalError;
          return ncclCommGetAsyncError(comms[r], &async) == ncclSuccess && async == ncclSuccess;
        },
        5000ms));
  }
  for (int r = 0; r < 2; ++r) EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
}

TEST_F(NcclTest, UsingADestroyedCommunicatorIsAnError) {
  Comms comms(2);
  ASSERT_EQ(comms.result(), ncclSuccess);
  ncclComm_t comm = comms[0];
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  comms.Forget(0);
  EXPECT_EQ(ncclCommDestroy(comm), ncclInvalidArgument);
  EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("already destroyed or aborted"));
  EXPECT_EQ(ncclCommAbort(comm), ncclInvalidArgument);
  ncclResult_t async;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclInvalidArgument);
  int count = 0;
  EXPECT_EQ(ncclCommCount(comm, &count), ncclInvalidArgument);
  DeviceBuffer<float> a(0, 4);
  EXPECT_EQ(ncclAllReduce(a.get(), a.get(), 4, ncclFloat, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("already destroyed or aborted"));
  EXPECT_EQ(ncclCommDestroy(reinterpret_cast<ncclComm_t>(0x1234)), ncclInvalidArgument);
  EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("is not a communicator"));
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclInvalidArgument);

  // Rank 1's peer left: its next collective fails the communicator instead of waiting
  // unnoticed, and destroying rank 1 releases its stream.
  DeviceBuffer<float> b(1, 4);
  DeviceStream s1(1);
  ASSERT_EQ(ncclAllReduce(b.get(), b.get(), 4, ncclFloat, ncclSum, comms[1], s1.get()),
            ncclSuccess);
  EXPECT_TRUE(Eventually(
      [&] {
        return ncclCommGetAsyncError(comms[1], &async) == ncclSuccess && async != ncclSuccess;
      },
      2000ms));
  EXPECT_EQ(async, ncclRemoteError);
  EXPECT_THAT(ncclGetLastError(nullptr),
              HasSubstr("rank 0 (pid " + std::to_string(getpid()) +
                        ") destroyed its communicator before collective #1"));
  ASSERT_EQ(ncclCommDestroy(comms[1]), ncclSuccess);
  comms.Forget(1);
  ASSERT_EQ(cudaStreamSynchronize(s1.get()), cudaSuccess);
}

TEST_F(NcclTest, BadArgumentsAreRefused) {
  Comms comms(2);
  ASSERT_EQ(comms.result(), ncclSuccess);
  DeviceBuffer<float> mine(0, 8), other(1, 8);
  std::vector<float> host(8);
  auto all_reduce = [&](const void* send, void* recv, size_t count) {
    return ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comms[0], nullptr);
  };
  EXPECT_EQ(all_reduce(host.data(), mine.get(), 8), ncclInvalidArgument);
  EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("sendbuff"));
  EXPECT_EQ(all_reduce(mine.get(), other.get(), 8), ncclInvalidArgument);
  EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("is memory of CUDA device 1"));
  EXPECT_EQ(all_reduce(mine.get(), mine.get(), 9), ncclInvalidArgument);  // overrun
  EXPECT_EQ(ncclAllReduce(mine.get(), mine.get(), 8, ncclFloat8e4m3, ncclSum, comms[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(mine.get(), mine.get(), 8, ncclFloat, static_cast<ncclRedOp_t>(9),
                          comms[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclBroadcast(mine.get(), mine.get(), 8, ncclFloat, 2, comms[0], nullptr),
            ncclInvalidArgument);
  DeviceStream s1(1);
  EXPECT_EQ(ncclAllReduce(mine.get(), mine.get(), 8, ncclFloat, ncclSum, comms[0], s1.get()),
            ncclInvalidArgument);
  EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("belongs to CUDA device 1"));
  // Count 0 needs no buffers.
  EXPECT_EQ(all_reduce(nullptr, nullptr, 0), ncclSuccess);
  ncclUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 2, zero, 0), ncclInvalidArgument);
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument);
  const std::vector<int> devices = {0, 7};
  std::vector<ncclComm_t> out(2);
  EXPECT_EQ(ncclCommInitAll(out.data(), 2, devices.data()), ncclInvalidArgument);
}

// Ranks calling different collectives as #1: both see ncclInvalidUsage describing both calls;
// destroying the communicators releases their streams.
TEST_F(NcclTest, MismatchedCollectivesFailTheCommunicator) {
  Comms comms(2);
  ASSERT_EQ(comms.result(), ncclSuccess);
  DeviceBuffer<float> a(0, 11), b(1, 11);
  DeviceStream s0(0), s1(1);
  ncclGroupStart();
  ncclAllReduce(a.get(), a.get(), 10, ncclFloat, ncclSum, comms[0], s0.get());
  ncclAllReduce(b.get(), b.get(), 11, ncclFloat, ncclSum, comms[1], s1.get());
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ncclResult_t async = ncclSuccess;
    EXPECT_TRUE(Eventually(
        [&] {
          return ncclCommGetAsyncError(comms[r], &async) == ncclSuccess && async != ncclSuccess;
        },
        2000ms));
    EXPECT_EQ(async, ncclInvalidUsage);
    EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("collective #1 differs between ranks"));
    EXPECT_THAT(ncclGetLastError(nullptr),
                HasSubstr("ncclAllReduce(count 10, ncclFloat32, ncclSum)"));
    EXPECT_THAT(ncclGetLastError(nullptr),
                HasSubstr("ncclAllReduce(count 11, ncclFloat32, ncclSum)"));
  }
  EXPECT_EQ(cudaStreamQuery(s0.get()), cudaErrorNotReady);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
    comms.Forget(r);
  }
  EXPECT_EQ(cudaStreamSynchronize(s0.get()), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s1.get()), cudaSuccess);
}

TEST_F(NcclTest, CountersFollowTheCommunicators) {
  const int64_t created = cudaemu::testing::NcclCommunicatorsCreated();
  const int64_t live = cudaemu::testing::NcclLiveCommunicators();
  const int64_t aborted = cudaemu::testing::NcclCommunicatorsAborted();
  std::vector<ncclComm_t> comms(3);
  ASSERT_EQ(ncclCommInitAll(comms.data(), 3, nullptr), ncclSuccess);
  EXPECT_EQ(cudaemu::testing::NcclCommunicatorsCreated(), created + 3);
  EXPECT_EQ(cudaemu::testing::NcclLiveCommunicators(), live + 3);
  EXPECT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comms[1]), ncclSuccess);
  EXPECT_EQ(cudaemu::testing::NcclLiveCommunicators(), live + 1);
  EXPECT_EQ(cudaemu::testing::NcclCommunicatorsAborted(), aborted + 1);
  ncclResult_t async;
  ASSERT_EQ(ncclCommGetAsyncError(comms[2], &async), ncclSuccess);
  EXPECT_EQ(async, ncclRemoteError);
  EXPECT_THAT(ncclGetLastError(nullptr), HasSubstr("rank 0 (pid"));
  EXPECT_EQ(ncclCommDestroy(comms[2]), ncclSuccess);
  EXPECT_EQ(cudaemu::testing::NcclLiveCommunicators(), live);
}

// Many communicators, made and used concurrently by threads: no cross-talk.
TEST_F(NcclTest, ConcurrentCommunicatorsDoNotMix) {
  const int kComms = 4;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kComms);
  for (int c = 0; c < kComms; ++c) {
    threads.emplace_back([&, c] {
      std::vector<ncclComm_t> comms(2);
      const std::vector<int> devices = {c % 4, (c + 1) % 4};
      if (ncclCommInitAll(comms.data(), 2, devices.data()) != ncclSuccess) {
        errors[c] = ncclGetLastError(nullptr);
        return;
      }
      // Streams of this thread's own: the devices' legacy default streams are shared with the
      // other threads, and collectives queued there behind another communicator's could wait
      // for each other in a cycle (as on GPUs).
      DeviceBuffer<int64_t> x(devices[0], 50), y(devices[1], 50);
      DeviceStream sx(devices[0]), sy(devices[1]);
      auto synchronize = [&] {
        cudaStreamSynchronize(sx.get());
        cudaStreamSynchronize(sy.get());
      };
      for (int round = 0; round < 20; ++round) {
        x.Upload(std::vector<int64_t>(50, c * 100 + round));
        y.Upload(std::vector<int64_t>(50, 1));
        ncclGroupStart();
        ncclAllReduce(x.get(), x.get(), 50, ncclInt64, ncclSum, comms[0], sx.get());
        ncclAllReduce(y.get(), y.get(), 50, ncclInt64, ncclSum, comms[1], sy.get());
        ncclGroupEnd();
        synchronize();
        const std::vector<int64_t> got = y.Download();
        if (got[49] != c * 100 + round + 1) {
          errors[c] = "round " + std::to_string(round) + ": " + std::to_string(got[49]);
          break;
        }
      }
      ncclCommDestroy(comms[0]);
      ncclCommDestroy(comms[1]);
    });
  }
  for (auto& t : threads) t.join();
  for (int c = 0; c < kComms; ++c) EXPECT_EQ(errors[c], "") << "communicator " << c;
}

}  // namespace
}  // namespace tower::nccl_test
