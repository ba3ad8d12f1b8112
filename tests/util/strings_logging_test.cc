#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "util/logging.h"
#include "util/strings.h"

namespace tower {
namespace {

TEST(StringsTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1024), "1.00 KiB");
  EXPECT_EQ(HumanBytes(1536), "1.50 KiB");
  EXPECT_EQ(HumanBytes(1ull << 30), "1.00 GiB");
  EXPECT_EQ(HumanBytes(100ull << 20), "100 MiB");
  EXPECT_EQ(BytesWithExact(1ull << 30), "1.00 GiB (1073741824 bytes)");
  EXPECT_EQ(BytesWithExact(12), "12 B");
}

TEST(StringsTest, ParseInt64RejectsJunk) {
  EXPECT_EQ(ParseInt64("42"), 42);
  EXPECT_EQ(ParseInt64("-7"), -7);
  EXPECT_FALSE(ParseInt64(""));
  EXPECT_FALSE(ParseInt64("12abc"));
  EXPECT_FALSE(ParseInt64(" 1"));
  EXPECT_FALSE(ParseInt64("+1"));
  // Every white space strtoll would skip (found by tests/fuzz/train_flags_fuzzer).
  for (const char* text : {"\t1", "\n1", "\v1", "\f1", "\r1"}) EXPECT_FALSE(ParseInt64(text)) << text;
  EXPECT_FALSE(ParseInt64("99999999999999999999999"));
}

TEST(StringsTest, ParseDouble) {
  EXPECT_DOUBLE_EQ(*ParseDouble("0.25"), 0.25);
  EXPECT_DOUBLE_EQ(*ParseDouble("-1e3"), -1000.0);
  EXPECT_FALSE(ParseDouble("1.5x"));
  EXPECT_FALSE(ParseDouble(""));
  EXPECT_FALSE(ParseDouble("1e999"));
  for (const char* text : {" 1", "\t1", "\n1", "\v1", "\f1", "\r1"}) EXPECT_FALSE(ParseDouble(text)) << text;
}

TEST(StringsTest, SplitJoinCase) {
  EXPECT_EQ(Split("a,b,,c", ','), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(Split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(Join(std::vector<int>{1, 2, 3}, ", "), "1, 2, 3");
  EXPECT_EQ(ToUpper("gpu"), "GPU");
  EXPECT_EQ(ToLower("CPU"), "cpu");
  EXPECT_TRUE(StartsWith("/device:GPU:0", "/device:"));
}

TEST(StringsTest, PrintableEscapesControlBytesOnly) {
  EXPECT_EQ(Printable("<f4"), "<f4");
  EXPECT_EQ(Printable(std::string("a\nb\0c\x7f\x1f", 7)), "a\\x0ab\\x00c\\x7f\\x1f");
  EXPECT_EQ(Printable("\xc3\xa9 \\x"), "\xc3\xa9 \\x");  // UTF-8 and a backslash pass
  EXPECT_EQ(Printable(""), "");
}

TEST(LoggingTest, CaptureSeesLinesWithLocationAndPrefix) {
  ScopedLogCapture capture;
  SetLogPrefix("[rank 1] ");
  TOWER_LOG(INFO) << "hello " << 42;
  LogRaw(LogSeverity::kInfo, "Executing op MatMul in device /job:localhost/replica:0/task:0/device:GPU:0");
  SetLogPrefix("");
  const std::string text = capture.text();
  EXPECT_NE(text.find("[rank 1] I "), std::string::npos) << text;
  EXPECT_NE(text.find("strings_logging_test.cc:"), std::string::npos) << text;
  EXPECT_NE(text.find("] hello 42\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[rank 1] Executing op MatMul in device "
                      "/job:localhost/replica:0/task:0/device:GPU:0\n"),
            std::string::npos)
      << text;
}

TEST(LoggingTest, MinSeverityFilters) {
  ScopedLogCapture capture;
  SetMinLogSeverity(LogSeverity::kWarning);
  TOWER_LOG(INFO) << "dropped";
  TOWER_LOG(WARNING) << "kept";
  SetMinLogSeverity(LogSeverity::kInfo);
  EXPECT_EQ(capture.text().find("dropped"), std::string::npos);
  EXPECT_NE(capture.text().find("kept"), std::string::npos);
}

TEST(LoggingTest, ConcurrentLinesStayWhole) {
  ScopedLogCapture capture;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 100; ++i) TOWER_LOG(INFO) << "thread " << t << " line " << i << " end";
    });
  }
  for (auto& thread : threads) thread.join();
  const std::string text = capture.text();
  int lines = 0;
  size_t start = 0;
  while (true) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) break;
    const std::string line = text.substr(start, end - start);
    EXPECT_EQ(line.substr(line.size() - 4), " end") << line;
    ++lines;
    start = end + 1;
  }
  EXPECT_EQ(lines, 400);
}

}  // namespace
}  // namespace tower
