#include "util/status.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "util/span.h"
#include "util/statusor.h"

namespace tower {
namespace {

TEST(StatusTest, OkByDefault) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kOk);
  EXPECT_EQ(status.message(), "");
  EXPECT_EQ(status.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status status = NotFoundError("/job:localhost/replica:0/task:0/device:GPU:2 unknown device");
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(IsNotFound(status));
  EXPECT_EQ(status.ToString(),
            "NOT_FOUND: /job:localhost/replica:0/task:0/device:GPU:2 unknown device");
}

TEST(StatusTest, OkCodeWithMessageIsOk) {
  EXPECT_TRUE(Status(StatusCode::kOk, "ignored").ok());
}

TEST(StatusTest, CopyAndCompare) {
  Status a = InvalidArgumentError("bad");
  Status b = a;
  EXPECT_EQ(a, b);
  b = OkStatus();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.message(), "bad");
}

TEST(StatusTest, WithContextPrefixesMessageAndKeepsCode) {
  Status status = InvalidArgumentError("column 3 is not a number").WithContext("data.csv:7");
  EXPECT_TRUE(IsInvalidArgument(status));
  EXPECT_EQ(status.message(), "data.csv:7: column 3 is not a number");
  EXPECT_TRUE(OkStatus().WithContext("ignored").ok());
}

Status FailIf(bool fail) { return fail ? AbortedError("stop") : OkStatus(); }

Status Chain(bool fail, int* reached) {
  TOWER_RETURN_IF_ERROR(FailIf(fail));
  *reached = 1;
  return OkStatus();
}

TEST(StatusTest, ReturnIfErrorStopsAtFirstError) {
  int reached = 0;
  EXPECT_EQ(Chain(true, &reached).code(), StatusCode::kAborted);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(Chain(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  TOWER_ASSIGN_OR_RETURN(int half, Half(x));
  TOWER_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

TEST(StatusOrTest, ValueOrError) {
  EXPECT_EQ(*Quarter(8), 2);
  StatusOr<int> bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "odd: 3");
}

TEST(StatusOrTest, MoveOnlyAndConvertingValues) {
  struct Base {
    virtual ~Base() = default;
  };
  struct Derived : Base {};
  StatusOr<std::unique_ptr<Base>> value = std::make_unique<Derived>();
  ASSERT_TRUE(value.ok());
  std::unique_ptr<Base> taken = std::move(value).value();
  EXPECT_NE(taken, nullptr);
}

TEST(StatusOrDeathTest, ValueOfErrorAborts) {
  StatusOr<int> bad = InvalidArgumentError("nope");
  EXPECT_DEATH((void)bad.value(), "nope");
}

TEST(CheckDeathTest, SpanIndexOutOfRangeAbortsNamingIndexAndSize) {
  std::vector<int> values = {1, 2, 3};
  Span<int> span(values);
  EXPECT_EQ(span[2], 3);
  EXPECT_DEATH((void)span[3], "Span index 3 out of 3");
}

TEST(StatusOrDeathTest, ConstructingFromOkAborts) {
  EXPECT_DEATH((void)StatusOr<int>{OkStatus()}, "without a value");
}

}  // namespace
}  // namespace tower
