#include "util/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tower {
namespace {

using ::testing::HasSubstr;

struct Targets {
  int64_t steps = 10;
  double lr = 0.1;
  std::string data = "synthetic";
  bool json = false;
};

FlagParser Parser(Targets* t) {
  FlagParser parser("prog");
  parser.AddInt("steps", &t->steps, "steps to run");
  parser.AddDouble("lr", &t->lr, "learning rate");
  parser.AddString("data", &t->data, "where data comes from");
  parser.AddBool("json", &t->json, "JSON output");
  return parser;
}

TEST(FlagsTest, ParsesEveryType) {
  Targets t;
  FlagParser parser = Parser(&t);
  std::vector<std::string> positional;
  ASSERT_TRUE(parser.Parse({"train", "--steps=5", "--lr=0.25", "--data=a.csv", "--json"},
                           &positional).ok());
  EXPECT_EQ(t.steps, 5);
  EXPECT_DOUBLE_EQ(t.lr, 0.25);
  EXPECT_EQ(t.data, "a.csv");
  EXPECT_TRUE(t.json);
  EXPECT_EQ(positional, std::vector<std::string>{"train"});
  EXPECT_TRUE(parser.WasSet("lr"));
  EXPECT_FALSE(parser.help_requested());
}

TEST(FlagsTest, EmptyStringValueAndExplicitBool) {
  Targets t;
  t.json = true;
  FlagParser parser = Parser(&t);
  ASSERT_TRUE(parser.Parse({"--data=", "--json=false"}).ok());
  EXPECT_EQ(t.data, "");
  EXPECT_FALSE(t.json);
}

TEST(FlagsTest, ErrorsNameTheFlagAndChangeNothing) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--steps=5", "--lr=fast"}, "--lr='fast' is not a finite number"},
           {{"--steps=1e3"}, "--steps='1e3' is not an integer"},
           {{"--lr=nan"}, "not a finite number"},
           {{"--lr=inf"}, "not a finite number"},
           {{"--steps"}, "--steps needs a value"},
           {{"--json=yes"}, "--json='yes' is not true or false"},
           {{"--nope=1"}, "unknown flag --nope"},
           {{"--steps=1", "--steps=2"}, "--steps is given more than once"},
           {{"stray"}, "unexpected argument 'stray'"}}) {
    Targets t;
    FlagParser parser = Parser(&t);
    Status status = parser.Parse(c.args);
    EXPECT_TRUE(IsInvalidArgument(status)) << c.message;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
    EXPECT_EQ(t.steps, 10) << "a failed parse must not apply earlier flags";
    EXPECT_DOUBLE_EQ(t.lr, 0.1);
  }
}

TEST(FlagsTest, HelpAndUsage) {
  Targets t;
  FlagParser parser = Parser(&t);
  ASSERT_TRUE(parser.Parse({"--help"}).ok());
  EXPECT_TRUE(parser.help_requested());
  const std::string usage = parser.Usage();
  EXPECT_THAT(usage, HasSubstr("usage: prog [flags]"));
  EXPECT_THAT(usage, HasSubstr("--steps=<int>"));
  EXPECT_THAT(usage, HasSubstr("(default 10)"));
  EXPECT_THAT(usage, HasSubstr("(default \"synthetic\")"));
}

}  // namespace
}  // namespace tower
