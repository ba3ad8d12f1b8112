// MappedFile: reads out of the mapping give the file's bytes; a range past the end and a file
// shrunk under the mapping are errors naming the file, not a crash (the SIGBUS is caught);
// a SIGBUS outside a read still kills; reading a file larger than the resident window keeps
// the file's pages in this process under the window.
#include "data/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tower::data {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// Bytes i % 251 (a period prime to every power of two, so offsets are told apart).
std::string Pattern(size_t bytes) {
  std::string data(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i % 251);
  return data;
}

void Write(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

// This process's resident pages of mapped files, in kB (/proc/self/status RssFile).
int64_t ResidentFileKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssFile:", 0) == 0) return std::stoll(line.substr(8));
  }
  return -1;
}

TEST(MappedFileTest, ReadsGiveTheFilesBytes) {
  const std::string path = TempPath("pattern.bin");
  const std::string data = Pattern(3 * 4096 + 17);
  Write(path, data);
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  for (const auto& [offset, bytes] : std::vector<std::pair<size_t, size_t>>{
           {0, 1}, {0, data.size()}, {4095, 2}, {5000, 7000}, {data.size() - 1, 1}, {17, 0}}) {
    std::string out(bytes, '\xff');
    ASSERT_TRUE((*file)->ReadAt(offset, bytes, out.data()).ok()) << offset;
    EXPECT_EQ(out, data.substr(offset, bytes)) << offset;
  }
}

TEST(MappedFileTest, ARangePastTheEndIsAnErrorNamingTheFile) {
  const std::string path = TempPath("short.bin");
  Write(path, Pattern(100));
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  char out[16];
  for (const uint64_t offset : {uint64_t{90}, uint64_t{101}, UINT64_MAX - 4}) {
    const Status status = (*file)->ReadAt(offset, sizeof(out), out);
    EXPECT_EQ(status.code(), StatusCode::kDataLoss) << offset;
    EXPECT_NE(status.message().find(path), std::string::npos) << status;
  }
}

TEST(MappedFileTest, AFileShrunkWhileMappedIsAnErrorNotACrash) {
  const std::string path = TempPath("shrinks.bin");
  const std::string data = Pattern(16 * 4096);
  Write(path, data);
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  std::string out(4096, '\0');
  // Twice: the second read of the damaged page is the error too (not the zeros put there).
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Status status = (*file)->ReadAt(8 * 4096, out.size(), out.data());
    EXPECT_EQ(status.code(), StatusCode::kDataLoss) << attempt;
    EXPECT_NE(status.message().find(path), std::string::npos) << status;
    EXPECT_NE(status.message().find("shrank"), std::string::npos) << status;
  }
  // A damaged file stays an error, even where it still has its bytes.
  EXPECT_EQ((*file)->ReadAt(0, out.size(), out.data()).code(), StatusCode::kDataLoss);
}

TEST(MappedFileTest, AFileShrunkUnderAReadInOrderIsAnError) {
  const std::string path = TempPath("shrinks_in_order.bin");
  const size_t ahead = MappedFile::kReadAhead;
  const std::string data = Pattern(2 * ahead);
  Write(path, data);
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::string out(4096, '\0');
  // In order: the first read fills the read-ahead buffer with the file's first kReadAhead
  // bytes, read before the file shrank; the read past them refills it and finds the end.
  ASSERT_TRUE((*file)->ReadAt(0, out.size(), out.data()).ok());
  EXPECT_EQ(out, data.substr(0, 4096));
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  std::string rest(ahead - 4096, '\0');
  ASSERT_TRUE((*file)->ReadAt(4096, rest.size(), rest.data()).ok());
  EXPECT_EQ(rest, data.substr(4096, rest.size()));
  const Status status = (*file)->ReadAt(ahead, out.size(), out.data());
  EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
}

TEST(MappedFileDeathTest, ASigbusOutsideAReadStillKills) {
  const std::string path = TempPath("any.bin");
  Write(path, Pattern(10));
  auto file = MappedFile::Open(path);  // installs the handler
  ASSERT_TRUE(file.ok()) << file.status();
  // Killed by it, or, under a sanitizer whose handler came first, reported and ended by it.
  EXPECT_DEATH(::raise(SIGBUS), "");
}

TEST(MappedFileTest, TheDefaultWindowIsAnEighthOfMemoryAtLeast64MiB) {
  const size_t memory = static_cast<size_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
  EXPECT_EQ(MappedFile::DefaultResidentWindow(), std::max(memory / 8, size_t{64} << 20));
}

// A file of 3 windows read twice, in 100,000-byte reads (aligned to neither pages nor the
// read-ahead buffer), each checked byte for byte: in order (the read-ahead buffer), then
// scattered (each read out of the mapping), which keeps the resident pages under a window.
TEST(MappedFileTest, ReadsInOrderAndScatteredGiveTheBytesAndStayUnderTheWindow) {
  const std::string path = TempPath("large.bin");
  const size_t window = size_t{16} << 20;
  const size_t size = 3 * window;
  const std::string expected = Pattern(1 << 20);
  {
    const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    // Written, not a hole: every page is a page-cache page to map.
    for (size_t written = 0; written < size; written += expected.size()) {
      ASSERT_EQ(::write(fd, expected.data(), expected.size()),
                static_cast<ssize_t>(expected.size()));
    }
    ::close(fd);
  }
  auto file = MappedFile::Open(path, window);
  ASSERT_TRUE(file.ok()) << file.status();
  const size_t piece = 100000;
  const size_t pieces = (size + piece - 1) / piece;
  std::string out(piece, '\0');
  const auto read = [&](size_t index) {
    const size_t offset = index * piece;
    const size_t bytes = std::min(piece, size - offset);
    ASSERT_TRUE((*file)->ReadAt(offset, bytes, out.data()).ok()) << offset;
    for (size_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(out[i], expected[(offset + i) % expected.size()]) << offset + i;
    }
  };
  for (size_t index = 0; index < pieces; ++index) read(index);
  const int64_t before = ResidentFileKb();
  ASSERT_GE(before, 0) << "no RssFile in /proc/self/status";
  int64_t most = 0;
  // Every piece once, in the order 0, 11, 22, ... (mod pieces, which 11 does not divide).
  ASSERT_NE(pieces % 11, 0u);
  for (size_t k = 0; k < pieces; ++k) {
    read(k * 11 % pieces);
    most = std::max(most, ResidentFileKb() - before);
  }
  // The window, plus a quarter window mapped between two looks; the file is 3 windows.
  const size_t bound = window + window / 4;
  EXPECT_LT(most, static_cast<int64_t>(bound >> 10)) << most;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tower::data
