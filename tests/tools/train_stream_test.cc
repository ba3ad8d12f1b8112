// `tower train` on streamed CSV (tools/train_stream.h): the same weights as the file read
// whole, two workers under mpirun that each read about half of the bytes and train as one
// process reading both shares, a killed run that resumes to the same bits, and one-line
// refusals for what needs every row first.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "tests/testing/run_program.h"
#include "tests/testing/tower_cli.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::ProgramOutput;
using testing::ReadBytes;
using testing::TempPath;

// `rows` rows of 8 features and y, a linear function of them; numbers of several widths.
std::string WriteData(const std::string& name, int64_t rows) {
  const std::string path = TempPath(name);
  std::ofstream out(path);
  out << "x0,x1,x2,x3,x4,x5,x6,x7,y\n";
  uint64_t state = 12345;
  for (int64_t r = 0; r < rows; ++r) {
    double y = 0;
    for (int j = 0; j < 8; ++j) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const double x = static_cast<double>(state >> 11) / 9007199254740992.0 * 2 - 1;
      y += (j % 3 - 1) * x;
      char cell[32];
      std::snprintf(cell, sizeof(cell), j % 2 ? "%.4f," : "%.6g,", x);
      out << cell;
    }
    out << y << "\n";
  }
  return path;
}

const char* kModel = " --target=y --layers=16:relu,1 --optimizer=sgd --lr=0.05 --verbose=1";

TEST(TrainStreamTest, AStreamedFileTrainsToTheWeightsOfTheFileInMemory) {
  const std::string data = WriteData("same.csv", 2048);
  const std::string args = std::string(kModel) + " --global-batch=64 --steps=80 --data=" + data;
  ProgramOutput memory = testing::Tower("train" + args + " --save=" + TempPath("memory.st"));
  ASSERT_EQ(memory.exit_code, 0) << memory.text;
  // 80 steps of 64 rows: 2.5 passes over the 2048 rows, the stream repeating as the epochs.
  ProgramOutput stream =
      testing::Tower("train --stream" + args + " --save=" + TempPath("stream.st"));
  ASSERT_EQ(stream.exit_code, 0) << stream.text;
  EXPECT_THAT(stream.text, HasSubstr("Streaming 1 file(s)"));
  const std::string expected = ReadBytes(TempPath("memory.st"));
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(ReadBytes(TempPath("stream.st")), expected);
}

// "Worker R read N bytes of the data's T": N / T for each worker.
std::vector<double> ReadFractions(const std::string& text, int workers) {
  std::vector<double> fractions(static_cast<size_t>(workers), -1);
  const std::regex line(R"(Worker (\d+) read (\d+) bytes of the data's (\d+))");
  for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it) {
    const int rank = std::stoi((*it)[1]);
    if (rank < workers) fractions[rank] = std::stod((*it)[2]) / std::stod((*it)[3]);
  }
  return fractions;
}

TEST(TrainStreamTest, TwoWorkersReadHalfEachAndTrainAsOneProcessReadingTwoShares) {
  // About 1.2 MB: 7500 rows a share; 50 steps of 128 rows a share stay in the first pass.
  const std::string data = WriteData("workers.csv", 15000);
  const std::string args = "train" + std::string(kModel) +
                           " --global-batch=256 --steps=50 --shuffle --shuffle-buffer=1000"
                           " --seed=5 --deterministic --stream --data=" +
                           data;
  ProgramOutput one =
      testing::Tower(args + " --replicas=2 --shares=2 --save=" + TempPath("one.st"));
  ASSERT_EQ(one.exit_code, 0) << one.text;
  ProgramOutput two = testing::RunCommand(
      "timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 " +
      testing::Runfile("tools/tower") + " " + args + " --replicas=1 --save=" + TempPath("two.st"));
  ASSERT_EQ(two.exit_code, 0) << two.text;
  const std::string expected = ReadBytes(TempPath("one.st"));
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(ReadBytes(TempPath("two.st")), expected);
  const std::vector<double> fractions = ReadFractions(two.text, 2);
  for (int w = 0; w < 2; ++w) {
    EXPECT_GE(fractions[w], 0.45) << "worker " << w << "\n" << two.text;
    EXPECT_LE(fractions[w], 0.55) << "worker " << w << "\n" << two.text;
  }
  EXPECT_GE(ReadFractions(one.text, 1)[0], 0.99) << one.text;
}

TEST(TrainStreamTest, AKilledRunResumesToTheSameBits) {
  const std::string data = WriteData("resume.csv", 3000);
  const std::string args =
      "train --target=y --layers=256:relu,256:relu,1 --optimizer=adam "
      "--lr=0.001 --global-batch=32 --steps=300 --shuffle "
      "--shuffle-buffer=200 --seed=3 --backup-every=3 --stream "
      "--data=" +
      data;
  ProgramOutput whole =
      testing::Tower(args + " --verbose=0 --backup=" + TempPath("whole_backup.st") +
                     " --save=" + TempPath("whole.st"));
  ASSERT_EQ(whole.exit_code, 0) << whole.text;
  const std::string backup = TempPath("killed_backup.st");
  bool killed = false;
  for (int attempt = 0; attempt < 3 && !killed; ++attempt) {
    std::remove(backup.c_str());
    testing::BackgroundProgram run("tools/tower", args + " --verbose=0 --resume --backup=" + backup,
                                   TempPath("killed.log"));
    ASSERT_TRUE(run.started());
    killed = testing::KillAfterBackups(run, backup, attempt == 0 ? 10 : 2, 0, SIGKILL);
    if (killed) EXPECT_EQ(run.Wait(), -SIGKILL);
  }
  ASSERT_TRUE(killed) << "every run ended before the kill";
  const int64_t killed_at = testing::BackupPosition(backup).total_steps;
  EXPECT_GT(killed_at, 0);
  EXPECT_LT(killed_at, 300);
  ProgramOutput resumed = testing::Tower(args + " --resume --backup=" + backup +
                                         " --save=" + TempPath("resumed.st") + " --verbose=1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.text;
  EXPECT_THAT(resumed.text, HasSubstr("Resuming from " + backup));
  const std::string expected = ReadBytes(TempPath("whole.st"));
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(ReadBytes(TempPath("resumed.st")), expected) << "killed after step " << killed_at;
}

// A cell that is not a number 2000 rows into the stream is met mid-run: the run stops with
// one line naming the file, line and column, exits 2 (bad input, as before training), and
// saves nothing.
TEST(TrainStreamTest, ABadCellMetMidRunExits2NamingItsLineAndSavesNothing) {
  const std::string data = WriteData("bad_cell.csv", 2000);
  {
    std::ofstream out(data, std::ios::app);
    out << "0.1,0.2,oops,0.4,0.5,0.6,0.7,0.8,1\n";
  }
  const std::string saved = TempPath("bad_cell.st");
  std::remove(saved.c_str());
  ProgramOutput run = testing::Tower("train --stream" + std::string(kModel) +
                                     " --global-batch=64 --steps=100 --data=" + data +
                                     " --save=" + saved);
  EXPECT_EQ(run.exit_code, 2) << run.text;
  EXPECT_THAT(run.text, ::testing::EndsWith("error: " + data +
                                            ": line 2002, column 'x2' (3): 'oops' is not a "
                                            "number\n"));
  EXPECT_TRUE(ReadBytes(saved).empty());
}

TEST(TrainStreamTest, WhatNeedsEveryRowFirstIsRefusedInOneLine) {
  const std::string data = WriteData("refused.csv", 100);
  const std::string base = "train --stream --global-batch=10 --data=" + data + kModel;
  struct Case {
    std::string flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {" --epochs=2",
       "error: --epochs (an epoch's length is not known): give --steps; is not available with "
       "streamed data (streamed data is read once, front to back, without a pass over all "
       "rows first)\n"},
      {" --steps=0", "error: give --epochs=E or --steps=S (positive)\n"},
      {" --steps=5 --validation-split=0.2",
       "error: --validation-split (use --validation-data) is not available with streamed data "
       "(streamed data is read once, front to back, without a pass over all rows first)\n"},
      {" --steps=5 --normalize",
       "error: --normalize is not available with streamed data (streamed data is read once, "
       "front to back, without a pass over all rows first)\n"},
      {" --steps=5 --shuffle-buffer=100",
       "error: --shuffle-buffer needs --shuffle (without it rows keep the files' order)\n"},
      {" --steps=5 --shares=3",
       "error: --global-batch=10 must be a multiple of the 3 shares (each share gives the "
       "same rows to every batch)\n"},
  };
  ProgramOutput whole = testing::Tower("train --global-batch=10 --steps=5 --shares=2 --data=" +
                                       data + kModel);
  EXPECT_EQ(whole.exit_code, 2) << whole.text;
  EXPECT_THAT(whole.text, ::testing::EndsWith("error: --shares and --shuffle-buffer apply to "
                                              "streamed data: add --stream (or give several "
                                              "files or a glob)\n"));
  for (const Case& c : cases) {
    const std::string saved = TempPath("refused.st");
    std::remove(saved.c_str());
    ProgramOutput out = testing::Tower(base + c.flags + " --save=" + saved);
    EXPECT_EQ(out.exit_code, 2) << c.flags << "\n" << out.text;
    EXPECT_THAT(out.text, ::testing::EndsWith(c.message)) << c.flags;
    EXPECT_TRUE(ReadBytes(saved).empty()) << c.flags;
  }
}

}  // namespace
}  // namespace tower
