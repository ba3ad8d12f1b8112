// Save is atomic: a temporary file in the same directory, renamed over the target only when
// complete. A failure at any step leaves the previous checkpoint as it was and no temporary
// file behind. Also Load's file-level errors.
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/checkpoint/safetensors.h"

namespace tower::checkpoint {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// A fresh directory under TEST_TMPDIR.
std::string MakeDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(root != nullptr ? root : "/tmp") + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

std::vector<std::string> Temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const std::string& name : ListDir(dir)) {
    if (name.find(".tmp.") != std::string::npos) found.push_back(name);
  }
  return found;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

File Checkpoint(float value, int size) {
  File file;
  file.tensors.push_back(FromFloats("layers.0.kernel", {size}, std::vector<float>(size, value)));
  file.metadata["value"] = std::to_string(value);
  return file;
}

// Lowers RLIMIT_FSIZE (with SIGXFSZ ignored, so a write past it fails with EFBIG) for the
// life of the object: a file system "full" after `bytes` bytes of any one file. Nothing may
// be printed while it is active (the test log is a file too).
class ScopedFileSizeLimit {
 public:
  explicit ScopedFileSizeLimit(rlim_t bytes) {
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    ok_ = ::setrlimit(RLIMIT_FSIZE, &lowered) == 0;
  }
  ~ScopedFileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::signal(SIGXFSZ, old_handler_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit saved_;
  sighandler_t old_handler_;
  bool ok_ = false;
};

// Root ignores directory permissions through CAP_DAC_OVERRIDE; this drops it (and
// CAP_DAC_READ_SEARCH) from the thread's effective set while the object lives, keeping them
// permitted so they can be raised again. Does nothing for other users.
class ScopedNoDacOverride {
 public:
  ScopedNoDacOverride() {
    header_.version = _LINUX_CAPABILITY_VERSION_3;
    header_.pid = 0;
    if (::syscall(SYS_capget, &header_, saved_) != 0) return;
    __user_cap_data_struct lowered[2];
    std::memcpy(lowered, saved_, sizeof(lowered));
    lowered[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    active_ = ::syscall(SYS_capset, &header_, lowered) == 0;
  }
  ~ScopedNoDacOverride() {
    if (active_) ::syscall(SYS_capset, &header_, saved_);
  }

 private:
  __user_cap_header_struct header_;
  __user_cap_data_struct saved_[2] = {};
  bool active_ = false;
};

// Whether this process can create a file in `dir` (root may, whatever the mode says).
bool CanCreateIn(const std::string& dir) {
  const std::string probe = dir + "/probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return false;
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

TEST(SafetensorsSaveTest, SavesThroughATemporaryAndLeavesOnlyTheFile) {
  const std::string dir = MakeDir("clean");
  const std::string path = dir + "/model.safetensors";
  ASSERT_TRUE(Save(path, Checkpoint(1, 10)).ok());
  ASSERT_TRUE(Save(path, Checkpoint(2, 20)).ok());
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.safetensors"});
  StatusOr<File> loaded = Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*ToFloats(loaded->tensors[0]), std::vector<float>(20, 2));
}

// The new file is a new inode renamed into place: a reader that opened the old checkpoint
// keeps reading it whole, and no byte of it was overwritten in place.
TEST(SafetensorsSaveTest, ReplacesByRenameNotInPlace) {
  const std::string dir = MakeDir("rename");
  const std::string path = dir + "/model.safetensors";
  ASSERT_TRUE(Save(path, Checkpoint(1, 1000)).ok());
  const std::string before = ReadAll(path);
  struct stat old_info;
  ASSERT_EQ(::stat(path.c_str(), &old_info), 0);
  const int reader = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(reader, 0);

  ASSERT_TRUE(Save(path, Checkpoint(2, 10)).ok());
  struct stat new_info;
  ASSERT_EQ(::stat(path.c_str(), &new_info), 0);
  EXPECT_NE(new_info.st_ino, old_info.st_ino);
  std::string old_bytes(before.size() + 1, '\0');
  const ssize_t n = ::pread(reader, old_bytes.data(), old_bytes.size(), 0);
  ::close(reader);
  ASSERT_EQ(n, static_cast<ssize_t>(before.size()));
  old_bytes.resize(static_cast<size_t>(n));
  EXPECT_EQ(old_bytes, before);
  EXPECT_EQ(ReadAll(path), *Serialize(Checkpoint(2, 10)));
  EXPECT_THAT(Temporaries(dir), IsEmpty());
}

// The file system refuses the temporary after 4 KiB (of 40): the write fails part-way, the
// temporary goes, and the previous checkpoint is exactly as it was.
TEST(SafetensorsSaveTest, AFailedWriteLeavesThePreviousFileIntact) {
  const std::string dir = MakeDir("partial");
  const std::string path = dir + "/model.safetensors";
  ASSERT_TRUE(Save(path, Checkpoint(1, 100)).ok());
  const std::string before = ReadAll(path);

  Status status;
  bool limited = false;
  {
    ScopedFileSizeLimit limit(4096);
    limited = limit.ok();
    status = Save(path, Checkpoint(2, 10000));
  }
  ASSERT_TRUE(limited);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(IsResourceExhausted(status)) << status;
  EXPECT_THAT(status.message(), StartsWith("saving " + path + ": writing " + path + ".tmp."));
  EXPECT_THAT(status.message(), HasSubstr("File too large"));
  EXPECT_THAT(status.message(), HasSubstr("(the previous file, if any, is unchanged)"));
  EXPECT_EQ(ReadAll(path), before);
  EXPECT_THAT(Temporaries(dir), IsEmpty());
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.safetensors"});

  // Where there was no previous file, there is still none.
  const std::string fresh = dir + "/fresh.safetensors";
  {
    ScopedFileSizeLimit limit(4096);
    status = Save(fresh, Checkpoint(2, 10000));
  }
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(::access(fresh.c_str(), F_OK), -1);
  EXPECT_THAT(Temporaries(dir), IsEmpty());

  // And once there is room again, the new checkpoint replaces the old one whole.
  ASSERT_TRUE(Save(path, Checkpoint(2, 10000)).ok());
  EXPECT_EQ(*ToFloats(Load(path)->tensors[0]), std::vector<float>(10000, 2));
}

// The directory is read-only but the old checkpoint in it is writable: a writer that
// truncated and rewrote the file in place would succeed. Save must create its temporary
// next to the file, so it fails, and touches nothing.
TEST(SafetensorsSaveTest, AnUnwritableDirectoryFailsCleanly) {
  const std::string dir = MakeDir("readonly");
  const std::string path = dir + "/model.safetensors";
  ASSERT_TRUE(Save(path, Checkpoint(1, 100)).ok());
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  const std::string before = ReadAll(path);
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);

  Status status;
  bool can_create = false;
  {
    ScopedNoDacOverride no_override;
    can_create = CanCreateIn(dir);
    if (!can_create) status = Save(path, Checkpoint(2, 100));
  }
  ::chmod(dir.c_str(), 0755);
  if (can_create) GTEST_SKIP() << "cannot make a directory unwritable for this process";

  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kPermissionDenied) << status;
  EXPECT_THAT(status.message(),
              StartsWith("saving " + path + ": cannot create the temporary file " + path + ".tmp." +
                         std::to_string(::getpid()) + "."));
  EXPECT_THAT(status.message(), HasSubstr("Permission denied"));
  EXPECT_EQ(ReadAll(path), before);
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.safetensors"});
}

TEST(SafetensorsSaveTest, AMissingDirectoryIsNotFound) {
  const std::string dir = MakeDir("missing-parent");
  Status status = Save(dir + "/no/such/dir/model.safetensors", Checkpoint(1, 1));
  EXPECT_TRUE(IsNotFound(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("No such file or directory"));
  EXPECT_THAT(ListDir(dir), IsEmpty());
}

// The rename is the step that fails (the target is a directory): the complete temporary is
// removed again.
TEST(SafetensorsSaveTest, AFailedRenameRemovesTheTemporary) {
  const std::string dir = MakeDir("rename-fails");
  const std::string path = dir + "/model.safetensors";
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  ASSERT_TRUE(Save(path + "/inside.safetensors", Checkpoint(1, 1)).ok());
  Status status = Save(path, Checkpoint(2, 100));
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(": renaming " + path + ".tmp."));
  EXPECT_THAT(status.message(), HasSubstr("(the previous file, if any, is unchanged)"));
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(ListDir(path), std::vector<std::string>{"inside.safetensors"});
}

TEST(SafetensorsSaveTest, AnInvalidFileIsRejectedBeforeTouchingTheDisk) {
  const std::string dir = MakeDir("invalid");
  const std::string path = dir + "/model.safetensors";
  ASSERT_TRUE(Save(path, Checkpoint(1, 4)).ok());
  const std::string before = ReadAll(path);
  File bad;
  bad.tensors = {FromFloats("x", {1}, {1}), FromFloats("x", {1}, {2})};
  Status status = Save(path, bad);
  EXPECT_TRUE(IsInvalidArgument(status)) << status;
  EXPECT_EQ(status.message(), "saving " + path + ": two tensors are named 'x'");
  EXPECT_EQ(ReadAll(path), before);
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.safetensors"});
}

TEST(SafetensorsSaveTest, SavesToARelativePath) {
  const std::string dir = MakeDir("relative");
  char old_cwd[4096];
  ASSERT_NE(::getcwd(old_cwd, sizeof(old_cwd)), nullptr);
  ASSERT_EQ(::chdir(dir.c_str()), 0);
  const Status status = Save("model.safetensors", Checkpoint(3, 3));
  StatusOr<File> loaded = Load("model.safetensors");
  ASSERT_EQ(::chdir(old_cwd), 0);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.safetensors"});
}

TEST(SafetensorsSaveTest, LoadSaysWhyAFileCannotBeRead) {
  const std::string dir = MakeDir("load-errors");
  StatusOr<File> missing = Load(dir + "/nope.safetensors");
  EXPECT_TRUE(IsNotFound(missing.status())) << missing.status();
  EXPECT_EQ(missing.status().message(),
            dir + "/nope.safetensors: cannot open: No such file or directory");

  StatusOr<File> directory = Load(dir);
  EXPECT_TRUE(IsInvalidArgument(directory.status())) << directory.status();
  EXPECT_EQ(directory.status().message(), dir + ": is a directory, not a safetensors file");

  // A FIFO would block a plain open() until a writer came; Load rejects it at once.
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  StatusOr<File> pipe = Load(fifo);
  EXPECT_TRUE(IsInvalidArgument(pipe.status())) << pipe.status();
  EXPECT_EQ(pipe.status().message(), fifo + ": not a regular file");

  const std::string secret = dir + "/secret.safetensors";
  ASSERT_TRUE(Save(secret, Checkpoint(1, 1)).ok());
  ASSERT_EQ(::chmod(secret.c_str(), 0), 0);
  bool can_read = false;
  StatusOr<File> unreadable = [&] {
    ScopedNoDacOverride no_override;
    const int fd = ::open(secret.c_str(), O_RDONLY);
    can_read = fd >= 0;
    if (fd >= 0) ::close(fd);
    return Load(secret);
  }();
  if (!can_read) {  // else a privileged process that could not give up its privilege
    ASSERT_FALSE(unreadable.ok());
    EXPECT_EQ(unreadable.status().code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(unreadable.status().message(), secret + ": cannot open: Permission denied");
  }
}

}  // namespace
}  // namespace tower::checkpoint
