// Tensors: creation, views, copies between logical devices, printing, and memory accounting
// through the logical device's allocator.
#include "ops/tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/testing/fake_gpu_platform.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::MakeContextWithFakeGpus;

constexpr uint64_t kMiB = 1ull << 20;

// Four logical CPUs; CPU:3 limited to 1 MiB.
std::unique_ptr<Context> FourCpus() {
  auto context = MakeContextWithFakeGpus({});
  TOWER_CHECK_OK(context->SetLogicalDeviceConfiguration(
      context->ListPhysicalDevices("CPU")[0],
      {LogicalDeviceConfiguration{}, LogicalDeviceConfiguration{}, LogicalDeviceConfiguration{},
       LogicalDeviceConfiguration{1}}));
  TOWER_CHECK_OK(context->EnsureInitialized());
  return context;
}

TEST(TensorTest, FromHostToHostRoundTrip) {
  auto context = FourCpus();
  Device* cpu = *context->FindDevice("/CPU:0");
  StatusOr<Tensor> t = Tensor::FromHost(cpu, Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->shape(), (Shape{2, 3}));
  EXPECT_EQ(t->dtype(), DType::kFloat32);
  EXPECT_EQ(t->device(), cpu);
  EXPECT_EQ(t->bytes(), 24u);
  EXPECT_EQ(*t->ToHost(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  StatusOr<Tensor> ints = Tensor::FromHostInt32(cpu, Shape{3}, std::vector<int32_t>{7, -8, 9});
  EXPECT_EQ(*ints->ToHostInt32(), (std::vector<int32_t>{7, -8, 9}));
  // Wrong counts and dtypes are errors, not crashes.
  EXPECT_THAT(Tensor::FromHost(cpu, Shape{2, 2}, {1, 2, 3}).status().message(),
              HasSubstr("3 values for shape [2, 2] (4 elements)"));
  EXPECT_THAT(ints->ToHost().status().message(), HasSubstr("must be float32, got int32"));
  EXPECT_FALSE(Tensor().ToHost().ok());
}

TEST(TensorTest, SliceAndReshapeAreViews) {
  auto context = FourCpus();
  Device* cpu = *context->FindDevice("/CPU:0");
  Tensor t = *Tensor::FromHost(cpu, Shape{4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  StatusOr<Tensor> rows = t.Slice(1, 3);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->shape(), (Shape{2, 2}));
  EXPECT_EQ(*rows->ToHost(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_TRUE(rows->SharesBufferWith(t));
  StatusOr<Tensor> flat = t.Reshape(Shape{8});
  ASSERT_TRUE(flat.ok());
  EXPECT_TRUE(flat->SharesBufferWith(t));
  EXPECT_THAT(t.Slice(3, 5).status().message(), HasSubstr("rows [3, 5) out of range for shape [4, 2]"));
  EXPECT_THAT(t.Reshape(Shape{3, 3}).status().message(), HasSubstr("[4, 2] and [3, 3]"));
  EXPECT_EQ(t.Slice(4, 4)->num_elements(), 0);
}

TEST(TensorTest, WithOwnCountsSharesTheMemoryNotTheCounts) {
  auto context = FourCpus();
  Device* cpu0 = *context->FindDevice("/CPU:0");
  const uint64_t before = cpu0->allocator().GetStats().bytes_in_use;
  Tensor alias;
  {
    Tensor t = *Tensor::FromHost(cpu0, Shape{2, 2}, {1, 2, 3, 4});
    alias = t.WithOwnCounts();
    EXPECT_TRUE(alias.SharesBufferWith(t));
    EXPECT_FALSE(alias.SharesCountsWith(t));
    EXPECT_TRUE(Tensor(alias).SharesCountsWith(alias));  // a copy counts on the alias's
    EXPECT_TRUE(t.Slice(0, 1)->SharesCountsWith(t));
    // The same tensor: the memory's device, shape and dtype, and writes seen through both.
    EXPECT_EQ(alias.device(), cpu0);
    EXPECT_EQ(alias.shape(), (Shape{2, 2}));
    EXPECT_EQ(alias.dtype(), DType::kFloat32);
    t.data<float>()[3] = 40;
    EXPECT_EQ(*alias.ToHost(), (std::vector<float>{1, 2, 3, 40}));
    // A view's alias starts where the view does; an alias of an alias is one more alias.
    Tensor row = t.Slice(1, 2)->WithOwnCounts();
    EXPECT_EQ(*row.ToHost(), (std::vector<float>{3, 40}));
    Tensor again = alias.WithOwnCounts();
    EXPECT_TRUE(again.SharesBufferWith(t));
    EXPECT_FALSE(again.SharesCountsWith(alias));
  }
  // The memory outlives the first handle, and goes back to CPU:0 with the last.
  EXPECT_GT(cpu0->allocator().GetStats().bytes_in_use, before);
  EXPECT_EQ(*alias.ToHost(), (std::vector<float>{1, 2, 3, 40}));
  alias = Tensor();
  EXPECT_EQ(cpu0->allocator().GetStats().bytes_in_use, before);
  EXPECT_FALSE(Tensor().WithOwnCounts().valid());
  // Empty tensors hold no memory (a null address each): two of them share nothing.
  Tensor none_a = *Tensor::Zeros(cpu0, Shape{0});
  Tensor none_b = *Tensor::Zeros(cpu0, Shape{0});
  EXPECT_FALSE(none_a.SharesBufferWith(none_b));
  EXPECT_TRUE(none_a.WithOwnCounts().SharesBufferWith(none_a));
}

TEST(TensorTest, CopiesBetweenLogicalCpus) {
  auto context = FourCpus();
  Device* cpu0 = *context->FindDevice("/CPU:0");
  Device* cpu2 = *context->FindDevice("/CPU:2");
  Tensor a = *Tensor::FromHost(cpu0, Shape{3}, {1, 2, 3});
  StatusOr<Tensor> b = a.CopyTo(cpu2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->device(), cpu2);
  EXPECT_FALSE(b->SharesBufferWith(a));
  EXPECT_EQ(*b->ToHost(), (std::vector<float>{1, 2, 3}));
  // CopyFrom overwrites in place, across devices; shapes must agree.
  Tensor c = *Tensor::Zeros(cpu2, Shape{3});
  ASSERT_TRUE(c.CopyFrom(a).ok());
  EXPECT_EQ(*c.ToHost(), (std::vector<float>{1, 2, 3}));
  Tensor d = *Tensor::Zeros(cpu2, Shape{4});
  EXPECT_THAT(d.CopyFrom(a).message(), HasSubstr("shapes differ: [3] and [4]"));
}

TEST(TensorTest, BytesShowInTheDeviceStatsAndComeBackOnRelease) {
  auto context = FourCpus();
  Device* cpu1 = *context->FindDevice("/CPU:1");
  const uint64_t before = cpu1->allocator().GetStats().bytes_in_use;
  {
    StatusOr<Tensor> t = Tensor::Zeros(cpu1, Shape{256, 1024});  // 1 MiB
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(cpu1->allocator().GetStats().bytes_in_use, before + kMiB);
    Tensor view = *t->Slice(0, 1);  // a view keeps the buffer alive
    t = StatusOr<Tensor>(Tensor());
    EXPECT_EQ(cpu1->allocator().GetStats().bytes_in_use, before + kMiB);
  }
  EXPECT_EQ(cpu1->allocator().GetStats().bytes_in_use, before);
  EXPECT_GE(cpu1->allocator().GetStats().peak_bytes_in_use, before + kMiB);
}

TEST(TensorTest, OpOverADeviceLimitFailsAndLeavesTheDeviceUsable) {
  auto context = FourCpus();
  Device* small = *context->FindDevice("/CPU:3");  // 1 MiB limit
  const Tensor a = *Tensor::Zeros(small, Shape{128, 1024});  // 512 KiB
  const Tensor b = *Tensor::Zeros(small, Shape{1024, 64});    // 256 KiB
  ASSERT_TRUE(ops::MatMul(a, b).ok());                        // 32 KiB result fits
  // a + a needs another 512 KiB: more than the 256 KiB left under the limit.
  StatusOr<Tensor> c = ops::Add(a, a);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(IsResourceExhausted(c.status()));
  EXPECT_THAT(c.status().message(), HasSubstr("/job:localhost/replica:0/task:0/device:CPU:3"));
  EXPECT_THAT(c.status().message(), HasSubstr("memory limit 1.00 MiB"));
  // Usable afterwards: a small op still runs there.
  const Tensor x = *a.Slice(0, 1);
  StatusOr<Tensor> y = ops::Scale(*x.Reshape(Shape{1024}).value().Slice(0, 4), 2.0f);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->device(), small);
}

TEST(TensorTest, DebugStringMatchesTensorFlow) {
  auto context = FourCpus();
  Device* cpu = *context->FindDevice("/CPU:0");
  Tensor c = *Tensor::FromHost(cpu, Shape{2, 2}, {22, 28, 49, 64});
  EXPECT_EQ(c.DebugString(),
            "tower.Tensor(\n[[22. 28.]\n [49. 64.]], shape=(2, 2), dtype=float32)");
  EXPECT_EQ(Tensor::FromHost(cpu, Shape{3}, {0.5f, 1.25f, -2})->ValuesString(),
            "[ 0.5   1.25 -2.  ]");
  EXPECT_EQ(Tensor::FromHost(cpu, Shape{}, {3})->ValuesString(), "3.");
  EXPECT_EQ(Tensor::FromHost(cpu, Shape{0, 2}, {})->ValuesString(), "[]");
  EXPECT_EQ(Tensor::FromHostInt32(cpu, Shape{2}, std::vector<int32_t>{7, -10})->ValuesString(),
            "[  7 -10]");
  EXPECT_EQ(Tensor::FromHost(cpu, Shape{2, 1, 2}, {1, 2, 3, 4})->ValuesString(),
            "[[[1. 2.]]\n\n [[3. 4.]]]");
  EXPECT_EQ(Tensor::FromHost(cpu, Shape{1, 3}, {1, 1e-5f, 1e20f})->DebugString(),
            "tower.Tensor(\n[[1.e+00 1.e-05 1.e+20]], shape=(1, 3), dtype=float32)");
  EXPECT_EQ(Tensor::FromHost(cpu, Shape{2}, {1.5f, 1e-5f})->ValuesString(), "[1.5e+00 1.0e-05]");
  EXPECT_EQ(Tensor::FromHost(cpu, Shape{3}, {0.1f, 1.0f / 3, NAN})->ValuesString(),
            "[0.1        0.33333334        nan]");
}

TEST(ShapeDeathTest, DimOutOfRangeAbortsNamingIndexAndRank) {
  const Shape shape{2, 3};
  EXPECT_EQ(shape.dim(1), 3);
  EXPECT_DEATH((void)shape.dim(2), "Shape dim index 2 out of 2");
  EXPECT_DEATH((void)shape.dim(-1), "Shape dim index -1 out of 2");
}

}  // namespace
}  // namespace tower
