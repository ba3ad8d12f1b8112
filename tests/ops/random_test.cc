#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "device/context.h"
#include "util/philox.h"
#include "ops/random_ops.h"
#include "ops/reference/reference_ops.h"

namespace tower {
namespace {

// Known-answer vectors of Random123 (kat_vectors: philox4x32 10).
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  struct Kat {
    philox::Block counter;
    uint32_t key0, key1;
    philox::Block expected;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& kat : kats) {
    const philox::Block out = philox::Philox4x32(kat.counter, kat.key0, kat.key1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], kat.expected.v[i]) << "word " << i;
    // The tests' own Philox (ops/reference), which the random ops are compared with.
    const std::array<uint32_t, 4> reference = reference::Philox4x32_10(
        {kat.counter.v[0], kat.counter.v[1], kat.counter.v[2], kat.counter.v[3]},
        {kat.key0, kat.key1});
    for (int i = 0; i < 4; ++i) EXPECT_EQ(reference[i], kat.expected.v[i]) << "reference word " << i;
  }
}

TEST(PhiloxTest, PortableMathIsAccurate) {
  for (double x : {1e-300, 1e-7, 0.1, 0.5, 0.7071, 1.0, 1.5, 2.0, 1e5}) {
    EXPECT_NEAR(philox::PortableLog(x), std::log(x), 4e-16 * std::fabs(std::log(x)) + 1e-16) << x;
  }
  for (int i = 0; i < 1000; ++i) {
    const double u = i / 1000.0;
    double s, c;
    philox::PortableSinCos2Pi(u, &s, &c);
    EXPECT_NEAR(s, std::sin(2 * M_PI * u), 2e-15) << u;
    EXPECT_NEAR(c, std::cos(2 * M_PI * u), 2e-15) << u;
  }
}

Device* Cpu() { return *Context::Global().FindDevice("/CPU:0"); }

TEST(RandomOpsTest, UniformIsInRangeDeterministicAndUniform) {
  const Shape shape{100, 1000};
  StatusOr<Tensor> a = ops::RandomUniform(shape, -2.0f, 3.0f, 42, Cpu());
  StatusOr<Tensor> b = ops::RandomUniform(shape, -2.0f, 3.0f, 42, Cpu());
  StatusOr<Tensor> c = ops::RandomUniform(shape, -2.0f, 3.0f, 43, Cpu());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const std::vector<float> va = *a->ToHost();
  EXPECT_EQ(va, *b->ToHost());   // same seed: bitwise the same
  EXPECT_NE(va, *c->ToHost());   // another seed: different numbers
  EXPECT_EQ(va, reference::RandomUniform(shape.num_elements(), attrs::Random{42, -2.0f, 3.0f}));
  double sum = 0;
  int buckets[10] = {};
  for (float v : va) {
    ASSERT_GE(v, -2.0f);
    ASSERT_LT(v, 3.0f);
    sum += v;
    buckets[static_cast<int>((v + 2.0f) / 0.5f)]++;
  }
  EXPECT_NEAR(sum / va.size(), 0.5, 0.01);
  for (int count : buckets) EXPECT_NEAR(count, 10000, 400);  // ~4 sigma
}

TEST(RandomOpsTest, NormalHasTheRequestedMoments) {
  StatusOr<Tensor> t = ops::RandomNormal(Shape{200000}, 1.5f, 2.0f, 7, Cpu());
  ASSERT_TRUE(t.ok());
  const std::vector<float> v = *t->ToHost();
  double sum = 0, sum2 = 0;
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sum2 += double{x} * x;
  }
  const double mean = sum / v.size();
  const double var = sum2 / v.size() - mean * mean;
  EXPECT_NEAR(mean, 1.5, 0.02);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.02);
  // The reference uses the C library's log and cos: equal within float rounding.
  const std::vector<float> want = reference::RandomNormal(200000, attrs::Random{7, 1.5f, 2.0f});
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_TRUE(std::fabs(v[i] - want[i]) <= 2e-6f * std::max(1.0f, std::fabs(want[i])))
        << "element " << i << ": " << v[i] << " vs " << want[i];
  }
}

TEST(RandomOpsTest, ElementDependsOnlyOnSeedAndIndex) {
  // A bigger tensor with the same seed starts with the smaller one's values: how every
  // device and thread layout gets the same numbers.
  std::vector<float> small = *ops::RandomNormal(Shape{10}, 0, 1, 9, Cpu())->ToHost();
  std::vector<float> large = *ops::RandomNormal(Shape{1000}, 0, 1, 9, Cpu())->ToHost();
  EXPECT_EQ(small, std::vector<float>(large.begin(), large.begin() + 10));
}

TEST(RandomOpsTest, GlorotUniformLimit) {
  StatusOr<Tensor> t = ops::GlorotUniform(Shape{256, 1024}, 1, Cpu());
  ASSERT_TRUE(t.ok());
  const float limit = std::sqrt(6.0f / (256 + 1024));
  float max = 0;
  for (float v : *t->ToHost()) max = std::max(max, std::fabs(v));
  EXPECT_LE(max, limit);
  EXPECT_GT(max, 0.99f * limit);
  EXPECT_TRUE(IsInvalidArgument(ops::GlorotUniform(Shape{3}, 1, Cpu()).status()));
}

TEST(RandomOpsTest, BadParametersAreRejected) {
  EXPECT_TRUE(IsInvalidArgument(ops::RandomUniform(Shape{2}, 1, 0, 1, Cpu()).status()));
  EXPECT_TRUE(IsInvalidArgument(ops::RandomUniform(Shape{2}, 0, INFINITY, 1, Cpu()).status()));
  EXPECT_TRUE(IsInvalidArgument(ops::RandomNormal(Shape{2}, 0, -1, 1, Cpu()).status()));
  EXPECT_TRUE(IsInvalidArgument(ops::RandomNormal(Shape{2}, NAN, 1, 1, Cpu()).status()));
}

}  // namespace
}  // namespace tower
