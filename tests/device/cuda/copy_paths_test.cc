// Copies take the fast paths: uploads go through pinned staging (from pageable memory the
// runtime copies synchronously), and copies between cards go GPU to GPU with peer access
// enabled instead of through host memory. Checked through the emulation's counts of copies
// that went through the host.
#include <gtest/gtest.h>

#include "cudaemu/testing.h"
#include "device/context.h"
#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "ops/tensor.h"

namespace tower {
namespace {

TEST(CopyPathsTest, UploadsArePinnedAndPeerCopiesDirect) {
  std::vector<std::unique_ptr<Platform>> platforms;
  platforms.push_back(CreateCpuPlatform());
  platforms.push_back(CreateGpuPlatform());
  Context context(std::move(platforms));
  ASSERT_TRUE(context.EnsureInitialized().ok());
  Device* gpu0 = *context.FindDevice("/GPU:0");
  Device* gpu1 = *context.FindDevice("/GPU:1");
  const int64_t pageable = cudaemu::testing::PageableAsyncCopies();
  const int64_t staged = cudaemu::testing::StagedPeerCopies();
  // Larger than one half of the staging buffer: several chunks in turn.
  std::vector<float> values(3 << 20);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000);
  StatusOr<Tensor> a = Tensor::FromHost(gpu0, Shape{static_cast<int64_t>(values.size())}, values);
  ASSERT_TRUE(a.ok()) << a.status();
  StatusOr<Tensor> b = a->CopyTo(gpu1);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(cudaemu::testing::PageableAsyncCopies(), pageable) << "an upload was not staged";
  StatusOr<std::vector<float>> back = b->ToHost();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, values);
  EXPECT_EQ(cudaemu::testing::StagedPeerCopies(), staged) << "a peer copy went through the host";
}

}  // namespace
}  // namespace tower
