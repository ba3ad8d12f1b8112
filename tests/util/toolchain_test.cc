// Guards against a compiler that silently miscompiles under this project's flags.
// GCC 12.2 with AVX-512 (-march=native on AVX-512 machines) stores the constant vector
// {1, 1, 0, 0} as {1, 1, 1, 1} (a ymm broadcast where an xmm one was meant); .bazelrc
// selects clang for that reason. If this test fails, the toolchain is unsafe.
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace {

__attribute__((noinline)) std::vector<int64_t> Copy(const int64_t* p, size_t n) {
  return std::vector<int64_t>(p, p + n);
}

TEST(ToolchainTest, ConstantVectorsAreStoredAsWritten) {
  const std::vector<int64_t> v{1, 1, 0, 0};
  EXPECT_EQ(v[2], 0);
  EXPECT_EQ(v[3], 0);
  int64_t a[4] = {1, 1, 0, 0};
  const std::vector<int64_t> copy = Copy(a, 4);
  EXPECT_EQ(copy, (std::vector<int64_t>{1, 1, 0, 0}));
  const std::vector<float> f{2.0f, 2.0f, 2.0f, 2.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(f[7], 0.0f);
}

}  // namespace
