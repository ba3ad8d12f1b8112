#include "device/device_name.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tower {
namespace {

using ::testing::HasSubstr;

struct RoundTrip {
  const char* text;
  const char* canonical;
};

class DeviceNameRoundTripTest : public ::testing::TestWithParam<RoundTrip> {};

TEST_P(DeviceNameRoundTripTest, ParsesAndPrintsCanonically) {
  StatusOr<DeviceName> name = DeviceName::Parse(GetParam().text);
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(name->ToString(), GetParam().canonical);
  // The canonical text parses back to the same name.
  StatusOr<DeviceName> again = DeviceName::Parse(name->ToString());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *name);
}

INSTANTIATE_TEST_SUITE_P(
    Forms, DeviceNameRoundTripTest,
    ::testing::Values(
        RoundTrip{"/device:CPU:0", "/device:CPU:0"},
        RoundTrip{"/GPU:0", "/device:GPU:0"},
        RoundTrip{"/cpu:0", "/device:CPU:0"},
        RoundTrip{"/gpu:3", "/device:GPU:3"},
        RoundTrip{"GPU:1", "/device:GPU:1"},
        RoundTrip{"/device:gpu:1", "/device:GPU:1"},
        RoundTrip{"/job:localhost/replica:0/task:0/device:GPU:1",
                  "/job:localhost/replica:0/task:0/device:GPU:1"},
        RoundTrip{"/job:worker/replica:0/task:12/device:CPU:0",
                  "/job:worker/replica:0/task:12/device:CPU:0"},
        RoundTrip{"/job:worker/task:1", "/job:worker/task:1"},
        RoundTrip{"/job:localhost/gpu:0", "/job:localhost/device:GPU:0"},
        RoundTrip{"/physical_device:GPU:0", "/physical_device:GPU:0"},
        RoundTrip{"/physical_device:cpu:0", "/physical_device:CPU:0"},
        RoundTrip{"/device:TPU:7", "/device:TPU:7"},
        RoundTrip{"/device:XLA_GPU:0", "/device:XLA_GPU:0"}));

TEST(DeviceNameTest, FullNameComponents) {
  StatusOr<DeviceName> name = DeviceName::Parse("/job:localhost/replica:0/task:0/device:GPU:1");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->job, "localhost");
  EXPECT_EQ(name->replica, 0);
  EXPECT_EQ(name->task, 0);
  EXPECT_EQ(name->type, "GPU");
  EXPECT_EQ(name->id, 1);
  EXPECT_FALSE(name->physical);
  EXPECT_TRUE(name->is_full());
  EXPECT_EQ(name->ShortName(), "/device:GPU:1");
  EXPECT_EQ(DeviceName::Full("localhost", 0, 0, "GPU", 1), *name);
}

TEST(DeviceNameTest, PhysicalName) {
  StatusOr<DeviceName> name = DeviceName::Parse("/physical_device:GPU:0");
  ASSERT_TRUE(name.ok());
  EXPECT_TRUE(name->physical);
  EXPECT_FALSE(name->is_full());
  EXPECT_EQ(DeviceName::Physical("GPU", 0), *name);
}

TEST(DeviceNameTest, EmptyIsEmptySpec) {
  StatusOr<DeviceName> name = DeviceName::Parse("");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->ToString(), "");
  EXPECT_FALSE(name->has_device());
}

TEST(DeviceNameTest, MatchesComparesOnlyWhatTheSpecSets) {
  const DeviceName full = DeviceName::Full("localhost", 0, 0, "GPU", 1);
  EXPECT_TRUE(DeviceName::Parse("/GPU:1")->Matches(full));
  EXPECT_TRUE(DeviceName::Parse("/job:localhost")->Matches(full));
  EXPECT_TRUE(DeviceName::Parse("")->Matches(full));
  EXPECT_FALSE(DeviceName::Parse("/GPU:0")->Matches(full));
  EXPECT_FALSE(DeviceName::Parse("/CPU:1")->Matches(full));
  EXPECT_FALSE(DeviceName::Parse("/job:worker/device:GPU:1")->Matches(full));
  EXPECT_FALSE(DeviceName::Parse("/physical_device:GPU:1")->Matches(full));
}

struct Malformed {
  const char* text;
  const char* why;
};

class DeviceNameRejectTest : public ::testing::TestWithParam<Malformed> {};

TEST_P(DeviceNameRejectTest, InvalidArgumentNamesTheTextAndTheProblem) {
  StatusOr<DeviceName> name = DeviceName::Parse(GetParam().text);
  ASSERT_FALSE(name.ok()) << GetParam().text << " parsed as " << name->ToString();
  EXPECT_TRUE(IsInvalidArgument(name.status()));
  EXPECT_THAT(name.status().message(),
              HasSubstr("Malformed device name '" + std::string(GetParam().text) + "'"));
  EXPECT_THAT(name.status().message(), HasSubstr(GetParam().why));
  EXPECT_THAT(name.status().message(), HasSubstr("expected a name such as"));
}

INSTANTIATE_TEST_SUITE_P(
    Rejects, DeviceNameRejectTest,
    ::testing::Values(
        Malformed{"/", "no components"},
        Malformed{"/GPU", "unknown component 'GPU'"},
        Malformed{"/device:GPU", "no ':ID'"},
        Malformed{"/device:GPU:", "device id '' is not a non-negative integer"},
        Malformed{"/device:GPU:-1", "device id '-1'"},
        Malformed{"/device:GPU:x", "device id 'x'"},
        Malformed{"/device:GPU:01", "device id '01'"},
        Malformed{"/device:GPU:99999999999", "device id '99999999999'"},
        Malformed{"/device:Gpx:0", "'Gpx' is not a device type"},
        Malformed{"/device:9PU:0", "'9PU' is not a device type"},
        Malformed{"/device:GPU:0/job:localhost", "follows the device component"},
        Malformed{"/task:0/job:localhost", "'job' is out of order"},
        Malformed{"/job:a/job:b", "'job' is out of order or repeated"},
        Malformed{"/job:Local/device:CPU:0", "job name 'Local'"},
        Malformed{"/job:/device:CPU:0", "job name ''"},
        Malformed{"/replica:x", "replica 'x'"},
        Malformed{"/task:-2", "task '-2'"},
        Malformed{"//GPU:0", "empty component"},
        Malformed{"/GPU:0/", "empty component"},
        Malformed{"/job:localhost/physical_device:GPU:0", "physical device name has no job"},
        Malformed{"/physical_device:GPU", "no ':ID'"},
        Malformed{"/device:GPU:0:1", "device id '0:1'"},
        Malformed{"/host:0", "unknown component 'host:0'"},
        Malformed{"gpu 0", "unknown component"}));

}  // namespace
}  // namespace tower
