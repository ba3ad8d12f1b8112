// CUDAEMU_SEED=random (this binary's environment, BUILD): each process draws its own seed for
// the stream delays, prints it once so that a failing run can be replayed, and two processes
// draw different seeds (what makes repeated shaken runs shake other delays).
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace {

// Creates and destroys a stream with stderr captured: what cudaemu printed.
std::string StderrOfAStreamCreation() {
  testing::internal::CaptureStderr();
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  return testing::internal::GetCapturedStderr();
}

// The seed a "drew N" line names, or -1 where there is none.
long long DrawnSeed(const std::string& text) {
  const std::string drew = "cudaemu: CUDAEMU_SEED=random drew ";
  const size_t at = text.find(drew);
  if (at == std::string::npos) return -1;
  const long long seed = std::atoll(text.c_str() + at + drew.size());
  const std::string replay = "(CUDAEMU_SEED=" + std::to_string(seed) + " replays";
  return text.find(replay) == std::string::npos ? -1 : seed;
}

// What a child process (forked before this process drew its seed) prints at its first stream;
// `seed`, where given, is the child's CUDAEMU_SEED.
std::string StderrOfAChild(const char* seed = nullptr) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return "pipe failed";
  const pid_t child = fork();
  if (child < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return "fork failed";
  }
  if (child == 0) {
    close(pipe_fds[0]);
    dup2(pipe_fds[1], STDERR_FILENO);
    if (seed != nullptr) setenv("CUDAEMU_SEED", seed, 1);
    cudaStream_t stream = nullptr;
    _exit(cudaStreamCreate(&stream) == cudaSuccess ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child failed: " + text;
  return text;
}

TEST(RandomSeedTest, EachProcessDrawsItsOwnSeedAndNamesItOnce) {
  ASSERT_STREQ(std::getenv("CUDAEMU_SEED"), "random") << "BUILD sets it for this test";
  // Children first: they are forked before this process draws.
  const std::string first_child = StderrOfAChild();
  const std::string second_child = StderrOfAChild();
  const long long first = DrawnSeed(first_child);
  const long long second = DrawnSeed(second_child);
  ASSERT_GE(first, 0) << first_child;
  ASSERT_GE(second, 0) << second_child;
  // A draw of 31 bits: equal seeds in two processes have a chance of 2^-31.
  EXPECT_NE(first, second);

  // A misspelling is named, with what the variable accepts.
  const std::string misspelt = StderrOfAChild("Random");
  EXPECT_NE(misspelt.find("CUDAEMU_SEED='Random' is neither an integer nor `random`; using 1"),
            std::string::npos)
      << misspelt;

  const std::string once = StderrOfAStreamCreation();
  EXPECT_GE(DrawnSeed(once), 0) << once;
  const std::string again = StderrOfAStreamCreation();
  EXPECT_EQ(again.find("CUDAEMU_SEED"), std::string::npos) << "printed twice: " << again;
}

}  // namespace
