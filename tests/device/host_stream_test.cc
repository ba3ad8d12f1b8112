// A host stream's early read (DeviceStream::StartRead / FinishRead): nothing is queued on a
// host stream, so the bytes are taken at StartRead; the errors every stream shares.
#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/stream.h"

namespace tower {
namespace {

using ::testing::HasSubstr;

TEST(HostStreamTest, AnEarlyReadTakesTheBytesWhenStarted) {
  HostStream stream;
  float value = 2.5f;
  ASSERT_TRUE(stream.StartRead(&value, sizeof(value)).ok());
  value = 7.0f;  // after the start: not what the read saw
  float got = 0;
  ASSERT_TRUE(stream.FinishRead(&got).ok());
  EXPECT_EQ(got, 2.5f);
  // Finished: a second FinishRead has nothing to finish.
  const Status again = stream.FinishRead(&got);
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("StartRead first"));
}

TEST(HostStreamTest, ANewReadDropsOneNotFinished) {
  HostStream stream;
  const float first[2] = {1, 2};
  const float second[4] = {3, 4, 5, 6};
  ASSERT_TRUE(stream.StartRead(first, sizeof(first)).ok());
  ASSERT_TRUE(stream.StartRead(second, sizeof(second)).ok());
  float got[4] = {};
  ASSERT_TRUE(stream.FinishRead(got).ok());
  EXPECT_EQ(std::memcmp(got, second, sizeof(second)), 0);
}

TEST(HostStreamTest, AnEarlyReadTakesOneToSixtyFourBytes) {
  HostStream stream;
  unsigned char bytes[65] = {};
  for (size_t size : {size_t{0}, size_t{65}}) {
    const Status status = stream.StartRead(bytes, size);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << size;
    EXPECT_THAT(status.message(), HasSubstr("takes 1 to 64 bytes; use CopyToHost")) << size;
  }
  // A refused start leaves no read to finish.
  EXPECT_EQ(stream.FinishRead(bytes).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(stream.StartRead(bytes, 64).ok());
  EXPECT_TRUE(stream.FinishRead(bytes).ok());
}

}  // namespace
}  // namespace tower
