// Stress: 1000 all-reduces of random sizes (0 to 256 Ki floats, 1 to 4 tensors per call)
// from 4 replica threads that never stop between calls, so the barrier's generations and the
// reduction's shared state are reused back to back; every element of every result is checked
// against its closed form.
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "ops/testing/fake_gpu_kernels.h"
#include "strategy/collectives/in_process_all_reduce.h"
#include "strategy/collectives/reduction_to_one_device.h"

namespace tower {
namespace {

constexpr int kReplicas = 4;
constexpr int kCalls = 1000;

// The sizes of call `call`: the same on every replica (seeded by the call's index).
std::vector<int64_t> SizesOf(int call) {
  std::mt19937 random(static_cast<uint32_t>(call) * 2654435761u + 1);
  const int tensors = std::uniform_int_distribution<int>(1, 4)(random);
  std::vector<int64_t> sizes;
  for (int t = 0; t < tensors; ++t) {
    // Log-uniform: as many tiny (latency) as large (bandwidth) reductions.
    const int bits = std::uniform_int_distribution<int>(0, 18)(random);
    sizes.push_back(std::uniform_int_distribution<int64_t>(0, (int64_t{1} << bits))(random));
  }
  return sizes;
}

// Replica r's element i of tensor t in call c: small integers, so float sums are exact.
float Value(int c, int r, int t, int64_t i) {
  return static_cast<float>((c + 3 * t + static_cast<int>(i % 11)) % 17 + r * 5);
}

float Sum(int c, int t, int64_t i) {
  float sum = 0;
  for (int r = 0; r < kReplicas; ++r) sum += Value(c, r, t, i);
  return sum;
}

void Stress(CrossDeviceOps& ops, const std::vector<Device*>& devices) {
  std::vector<Status> results(kReplicas);
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) {
    threads.emplace_back([&, r] {
      for (int call = 0; call < kCalls; ++call) {
        const std::vector<int64_t> sizes = SizesOf(call);
        std::vector<Tensor> tensors;
        for (size_t t = 0; t < sizes.size(); ++t) {
          std::vector<float> values(static_cast<size_t>(sizes[t]));
          for (int64_t i = 0; i < sizes[t]; ++i) values[i] = Value(call, r, static_cast<int>(t), i);
          StatusOr<Tensor> tensor = Tensor::FromHost(devices[r], Shape{sizes[t]}, values);
          if (!tensor.ok()) {
            results[r] = tensor.status();
            ops.Abort(results[r]);
            return;
          }
          tensors.push_back(*tensor);
        }
        std::vector<Tensor*> list;
        for (Tensor& tensor : tensors) list.push_back(&tensor);
        Status status = ops.AllReduce(r, list);
        for (size_t t = 0; t < sizes.size() && status.ok(); ++t) {
          StatusOr<std::vector<float>> got = tensors[t].ToHost();
          if (!got.ok()) {
            status = got.status();
            break;
          }
          for (int64_t i = 0; i < sizes[t]; ++i) {
            if ((*got)[i] != Sum(call, static_cast<int>(t), i)) {
              status = InternalError("call " + std::to_string(call) + " replica " +
                                     std::to_string(r) + " tensor " + std::to_string(t) + "[" +
                                     std::to_string(i) + "] = " + std::to_string((*got)[i]) +
                                     ", expected " +
                                     std::to_string(Sum(call, static_cast<int>(t), i)));
              break;
            }
          }
        }
        if (!status.ok()) {
          results[r] = status;
          ops.Abort(status);  // release the others rather than leave them waiting
          return;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int r = 0; r < kReplicas; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

std::vector<std::string> Names(int n) {
  std::vector<std::string> names;
  for (int r = 0; r < n; ++r) names.push_back("replica " + std::to_string(r));
  return names;
}

std::unique_ptr<Context> Cpus() {
  auto context = testing::MakeContextWithFakeGpus({});
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0],
      std::vector<LogicalDeviceConfiguration>(kReplicas)));
  TOWER_CHECK_OK(context->EnsureInitialized());
  return context;
}

TEST(StressTest, InProcessAllReduceSpinning) {
  auto context = Cpus();
  InProcessAllReduce ops(Names(kReplicas), std::chrono::seconds(60), /*spin=*/true);
  Stress(ops, *context->Devices("CPU"));
}

TEST(StressTest, InProcessAllReduceBlocking) {
  // More replica threads than cores: the barrier must block, not spin, and stay correct.
  auto context = Cpus();
  InProcessAllReduce ops(Names(kReplicas), std::chrono::seconds(60), /*spin=*/false);
  Stress(ops, *context->Devices("CPU"));
}

TEST(StressTest, ReductionToOneDeviceFromFakeGpus) {
  testing::RegisterFakeGpuKernels();
  auto context = testing::MakeContextWithFakeGpus(
      {testing::FakeGpuSpec(), testing::FakeGpuSpec(), testing::FakeGpuSpec(),
       testing::FakeGpuSpec()});
  TOWER_CHECK_OK(context->EnsureInitialized());
  std::vector<Device*> gpus = *context->Devices("GPU");
  ASSERT_EQ(gpus.size(), static_cast<size_t>(kReplicas));
  ReductionToOneDevice ops(*context->FindDevice("/CPU:0"), Names(kReplicas),
                           std::chrono::seconds(60), false);
  Stress(ops, gpus);
}

}  // namespace
}  // namespace tower
