// Copies take the fast paths: uploads go through pinned staging (from pageable memory the
// runtime copies synchronously), and copies between cards go GPU to GPU with peer access
// enabled instead of through host memory. The values arrive whole on a card too (2 cards);
// the paths are checked through the emulation's counts of copies that went through the host,
// so that case runs only under it.
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "device/context.h"
#include "device/cpu_platform.h"
#include "device/gpu_platform.h"
#include "ops/tensor.h"
#include "tests/testing/emulation.h"
#include "tests/testing/gpu.h"

#ifdef CUDAEMU
#include <cudaemu/testing.h>
#endif

namespace tower {
namespace {

class CopyPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::unique_ptr<Platform>> platforms;
    platforms.push_back(CreateCpuPlatform());
    platforms.push_back(CreateGpuPlatform());
    context_ = std::make_unique<Context>(std::move(platforms));
    const size_t cards = context_->ListPhysicalDevices("GPU").size();
    if (cards == 0) TOWER_SKIP_WITHOUT_GPU("no GPU on this machine");
    if (cards < 2) GTEST_SKIP() << "needs 2 cards; this machine has " << cards;
    ASSERT_TRUE(context_->EnsureInitialized().ok());
    gpu0_ = *context_->FindDevice("/GPU:0");
    gpu1_ = *context_->FindDevice("/GPU:1");
  }

  // Uploads to card 0 (larger than one half of the staging buffer: several chunks in turn)
  // and copies to card 1.
  void UploadAndCopy() {
    values_.resize(3 << 20);
    for (size_t i = 0; i < values_.size(); ++i) values_[i] = static_cast<float>(i % 1000);
    StatusOr<Tensor> a =
        Tensor::FromHost(gpu0_, Shape{static_cast<int64_t>(values_.size())}, values_);
    ASSERT_TRUE(a.ok()) << a.status();
    StatusOr<Tensor> b = a->CopyTo(gpu1_);
    ASSERT_TRUE(b.ok()) << b.status();
    copy_ = std::move(*b);
  }

  // The copy on card 1 holds the values uploaded.
  void ExpectTheValuesBack() {
    ASSERT_TRUE(copy_.has_value());
    StatusOr<std::vector<float>> back = copy_->ToHost();
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, values_);
  }

  std::unique_ptr<Context> context_;
  Device* gpu0_ = nullptr;
  Device* gpu1_ = nullptr;
  std::vector<float> values_;
  std::optional<Tensor> copy_;
};

TEST_F(CopyPathsTest, UploadsAndPeerCopiesKeepTheValues) {
  ASSERT_NO_FATAL_FAILURE(UploadAndCopy());
  ExpectTheValuesBack();
}

TEST_F(CopyPathsTest, UploadsArePinnedAndPeerCopiesDirect) {
#ifdef CUDAEMU
  const int64_t pageable = cudaemu::testing::PageableAsyncCopies();
  const int64_t staged = cudaemu::testing::StagedPeerCopies();
  ASSERT_NO_FATAL_FAILURE(UploadAndCopy());
  EXPECT_EQ(cudaemu::testing::PageableAsyncCopies(), pageable) << "an upload was not staged";
  ExpectTheValuesBack();
  EXPECT_EQ(cudaemu::testing::StagedPeerCopies(), staged) << "a peer copy went through the host";
#else
  TOWER_SKIP_NEEDS_EMULATION("counts of copies through the host "
                             "(cudaemu::testing::PageableAsyncCopies, StagedPeerCopies)");
#endif
}

}  // namespace
}  // namespace tower
