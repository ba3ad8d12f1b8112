// `tower train` end to end: CSV and synthetic data, train → save → reload → continue,
// replicas, metrics logs, the steps' wait for their input, and a table of bad inputs that must
// each give one line and a non-zero exit, without crashing or leaving output behind.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/checkpoint/safetensors.h"
#include "tests/testing/run_program.h"
#include "tests/testing/tower_cli.h"
#include "tools/train_stream.h"
#include "util/strings.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::ProgramOutput;

std::string Dir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

std::string Path(const std::string& name) { return Dir() + "/" + name; }

bool Exists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

ProgramOutput Train(const std::string& args) {
  return testing::RunProgram("tools/tower", "train " + args);
}

// y = 2·x1 − 3·x2 + 1 on a grid, with a header; a class column for classification.
void WriteCsv(const std::string& path) {
  std::ofstream out(path);
  out << "x1,x2,y,class\n";
  for (int i = 0; i < 400; ++i) {
    const float a = -1.0f + 2.0f * (i % 20) / 19;
    const float b = -1.0f + 2.0f * (i / 20) / 19;
    out << a << "," << b << "," << 2 * a - 3 * b + 1 << "," << (a > 0 ? 1 : 0) + (b > 0 ? 2 : 0)
        << "\n";
  }
}

std::vector<float> Weights(const std::string& path, const std::string& name) {
  StatusOr<checkpoint::File> file = checkpoint::Load(path);
  TOWER_CHECK_OK(file.status());
  return *checkpoint::ToFloats(*file->Find(name));
}

int64_t Iterations(const std::string& path) {
  StatusOr<checkpoint::File> file = checkpoint::Load(path);
  int64_t value = -1;
  std::memcpy(&value, file->Find("optimizer.iterations")->bytes.data(), 8);
  return value;
}

TEST(TrainCommandTest, CsvTrainSaveReloadContinue) {
  const std::string csv = Path("line.csv");
  WriteCsv(csv);
  const std::string first = Path("first.safetensors");
  const std::string second = Path("second.safetensors");
  ProgramOutput out = Train("--data=" + csv + " --target=y --layers=1 --lr=0.1 --epochs=3 "
                            "--global-batch=20 --save=" + first + " --verbose=2");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Saved weights to " + first));
  EXPECT_EQ(Iterations(first), 60);  // 20 batches × 3 epochs
  ProgramOutput more = Train("--data=" + csv + " --target=y --layers=1 --lr=0.1 --epochs=20 "
                             "--global-batch=20 --init=" + first + " --save=" + second +
                             " --verbose=2");
  ASSERT_EQ(more.exit_code, 0) << more.text;
  EXPECT_EQ(Iterations(second), 60 + 400);  // continued, not restarted
  const std::vector<float> w = Weights(second, "layers.0.kernel");
  EXPECT_NEAR(w[0], 2.0f, 0.01f);
  EXPECT_NEAR(w[1], -3.0f, 0.01f);
  EXPECT_NEAR(Weights(second, "layers.0.bias")[0], 1.0f, 0.01f);
}

TEST(TrainCommandTest, ClassifierWithMetricsLog) {
  const std::string csv = Path("classes.csv");
  WriteCsv(csv);
  const std::string log = Path("metrics.csv");
  ProgramOutput out = Train("--data=" + csv + " --target=class --layers=16:tanh,4 "
                            "--loss=sparse_categorical_crossentropy --optimizer=adam --lr=0.02 "
                            "--metrics=accuracy --epochs=30 --shuffle --metrics-out=" + log +
                            " --verbose=0");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  std::ifstream in(log);
  std::string header, line, last;
  std::getline(in, header);
  EXPECT_EQ(header, "epoch,accuracy,loss");
  while (std::getline(in, line)) last = line;
  const double accuracy = std::stod(last.substr(last.find(',') + 1));
  EXPECT_GT(accuracy, 0.95);
}

TEST(TrainCommandTest, FourReplicasSaveWhatOneDeviceSaves) {
  const std::string one = Path("r1.safetensors");
  const std::string four = Path("r4.safetensors");
  const std::string common = "--data=synthetic:mlp:rows=512 --layers=32:tanh,16:relu,1 --steps=24 "
                             "--global-batch=30 --verbose=0 --save=";
  ASSERT_EQ(Train(common + one + " --replicas=1").exit_code, 0);
  ProgramOutput out = Train(common + four + " --replicas=4");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Cross-device ops: in-process"));
  double num = 0, den = 0;
  for (const char* name : {"layers.0.kernel", "layers.0.bias", "layers.1.kernel", "layers.1.bias",
                           "layers.2.kernel", "layers.2.bias"}) {
    const std::vector<float> a = Weights(four, name);
    const std::vector<float> b = Weights(one, name);
    for (size_t i = 0; i < a.size(); ++i) {
      num += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
      den += double{b[i]} * b[i];
    }
  }
  EXPECT_LE(std::sqrt(num / den), 1e-5);
}

// By default each of 4 logical CPUs' replicas computes its own shard and sums its gradients
// with the others (what 4 GPUs would do): --verbose=2 says so for the first step, replica by
// replica; with --batch-replica-rows replica 0 computes every replica's rows as one batch.
TEST(TrainCommandTest, VerboseTwoShowsEachReplicaComputingItsShardAndSumming) {
  const std::string args =
      "--data=synthetic:linreg --steps=3 --global-batch=32 --replicas=4 --virtual-cpus=4 "
      "--verbose=2";
  ProgramOutput out = Train(args);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Steps: each of the 4 replicas computes its own shard"));
  EXPECT_THAT(out.text, ::testing::Not(HasSubstr("Steps: computed in"))) << out.text;
  for (int r = 0; r < 4; ++r) {
    const std::string rows = std::to_string(8 * r) + "-" + std::to_string(8 * r + 7);
    EXPECT_THAT(out.text,
                ::testing::ContainsRegex("Step 1: replica " + std::to_string(r) +
                                         " \\(/job:localhost/replica:0/task:0/device:CPU:" +
                                         std::to_string(r) + "\\), its shard rows " + rows +
                                         " of 32: [1-9][0-9]* all-reduce call\\(s\\) with "
                                         "the other 3 replica\\(s\\), [1-9][0-9]* bytes"))
        << out.text;
  }
  ProgramOutput batched = Train(args + " --batch-replica-rows");
  ASSERT_EQ(batched.exit_code, 0) << batched.text;
  EXPECT_THAT(batched.text, HasSubstr("Steps: computed in 1 batch(es) for 4 replicas"));
  EXPECT_THAT(batched.text, HasSubstr("Step 1: replica 0 (/job:localhost/replica:0/task:0/"
                                      "device:CPU:0), its shard rows 0-7 of 32: computing the "
                                      "batch of replicas 0, 1, 2, 3 as one batch"));
  EXPECT_THAT(batched.text, HasSubstr("Step 1: replica 3 (/job:localhost/replica:0/task:0/"
                                      "device:CPU:3), its shard rows 24-31 of 32: computed by "
                                      "replica 0 in its batch"));
}

TEST(TrainCommandTest, AccumulationClippingAndSchedulesOnFourReplicasSaveWhatOneDeviceSaves) {
  // AdamW under a cosine schedule with warmup and global-norm clipping: 4 replicas, each
  // shard in 3 micro-batches, against one device on the whole batch.
  const std::string one = Path("scale_r1.safetensors");
  const std::string four = Path("scale_r4.safetensors");
  const std::string common = "--data=synthetic:mlp:rows=512 --layers=32:tanh,16:relu,1 --steps=24 "
                             "--global-batch=60 --verbose=0 --optimizer=adamw --lr=0.003 "
                             "--weight-decay=0.01 --lr-schedule=cosine:decay_steps=20,alpha=0.1 "
                             "--warmup-steps=4 --save=";
  ASSERT_EQ(Train(common + one + " --clip-norm=0.5").exit_code, 0);
  ProgramOutput out = Train(common + four + " --clip-norm=0.5 --replicas=4 --accumulate=3");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  // Without clipping the run ends elsewhere: the flag reached the optimizer.
  ProgramOutput unclipped = Train(common + Path("scale_free.safetensors"));
  ASSERT_EQ(unclipped.exit_code, 0) << unclipped.text;
  double num = 0, den = 0, free_num = 0;
  for (const char* name : {"layers.0.kernel", "layers.0.bias", "layers.1.kernel", "layers.1.bias",
                           "layers.2.kernel", "layers.2.bias"}) {
    const std::vector<float> a = Weights(four, name);
    const std::vector<float> b = Weights(one, name);
    const std::vector<float> c = Weights(Path("scale_free.safetensors"), name);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      num += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
      free_num += (double{c[i]} - b[i]) * (double{c[i]} - b[i]);
      den += double{b[i]} * b[i];
    }
  }
  EXPECT_LE(std::sqrt(num / den), 1e-5);
  EXPECT_GT(std::sqrt(free_num / den), 1e-3) << "--clip-norm changed nothing";
}

TEST(TrainCommandTest, JsonLinesLogHasStepsAndEpochs) {
  const std::string log = Path("steps.jsonl");
  ProgramOutput out = Train("--data=synthetic:linreg:rows=64 --epochs=2 --global-batch=16 "
                            "--verbose=0 --metrics-out=" + log);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  std::ifstream in(log);
  int steps = 0, epochs = 0;
  for (std::string line; std::getline(in, line);) {
    steps += line.rfind("{\"step\"", 0) == 0;
    epochs += line.rfind("{\"epoch\"", 0) == 0;
  }
  EXPECT_EQ(steps, 8);
  EXPECT_EQ(epochs, 2);
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(TrainCommandTest, TheSameCommandTwiceGivesTheSameBits) {
  // Every CPU path is deterministic: shuffling, the split into replicas, the all-reduce's
  // summation order (replica order, whatever the thread timing) and the kernels.
  for (const std::string replicas : {"1", "3"}) {
    std::string outputs[2];
    for (int run = 0; run < 2; ++run) {
      const std::string tag = replicas + "_" + std::to_string(run);
      const std::string weights = Path("twice_" + tag + ".safetensors");
      const std::string metrics = Path("twice_" + tag + ".jsonl");
      ProgramOutput out = Train(
          "--data=synthetic:mlp:rows=600 --layers=64:relu,32:tanh,1 --epochs=2 --shuffle "
          "--global-batch=50 --optimizer=adam --lr=0.001 --metrics=mae --verbose=0 "
          "--replicas=" + replicas + " --save=" + weights + " --metrics-out=" + metrics);
      ASSERT_EQ(out.exit_code, 0) << out.text;
      outputs[run] = ReadBytes(weights) + ReadBytes(metrics);
    }
    EXPECT_FALSE(outputs[0].empty());
    EXPECT_EQ(outputs[0], outputs[1]) << replicas << " replicas";
  }
}

// More replicas than replica threads fold their gradients, one sum per thread (logged), each
// replica computing its own shard by default; --fold-gradients=false gives, on one thread,
// the bits of a thread per replica, and --batch-replica-rows computes the folded replicas'
// rows as one batch (logged).
TEST(TrainCommandTest, UnfoldedGradientsOnOneThreadGiveTheBitsOfAThreadPerReplica) {
  const std::string args =
      "--data=synthetic:mlp:rows=600 --layers=32:relu,1 --epochs=2 --shuffle --global-batch=50 "
      "--verbose=1 --replicas=3 ";
  // A thread per replica, unfolded fibers, folded fibers in one batch, folded fibers each
  // computing its own shard (the default).
  const std::string variants[4] = {"--inter-op-threads=3",
                                   "--inter-op-threads=1 --fold-gradients=false",
                                   "--inter-op-threads=1 --batch-replica-rows",
                                   "--inter-op-threads=1"};
  const std::string folded =
      "Gradients: folded into one running sum per replica thread (1 for 3 replicas)";
  const std::string batched = "Steps: computed in 1 batch(es) for 3 replicas";
  std::string saved[4];
  for (int i = 0; i < 4; ++i) {
    const std::string weights = Path("fold" + std::to_string(i) + ".safetensors");
    ProgramOutput out = Train(args + variants[i] + " --save=" + weights);
    ASSERT_EQ(out.exit_code, 0) << out.text;
    if (i >= 2) {
      EXPECT_THAT(out.text, HasSubstr(folded)) << variants[i];
    } else {
      EXPECT_THAT(out.text, ::testing::Not(HasSubstr("Gradients: folded"))) << variants[i];
    }
    if (i == 2) {
      EXPECT_THAT(out.text, HasSubstr(batched)) << variants[i];
    } else {
      EXPECT_THAT(out.text, ::testing::Not(HasSubstr("Steps: computed in"))) << variants[i];
    }
    saved[i] = ReadBytes(weights);
  }
  EXPECT_FALSE(saved[0].empty());
  EXPECT_EQ(saved[1], saved[0]);
  EXPECT_FALSE(saved[2].empty());
  EXPECT_FALSE(saved[3].empty());
}

// --batch-replica-rows --batch-threads=N splits each step into N batches, one per replica
// thread (logged); more batches than replica threads is refused before training, naming the
// limit, and --batch-threads alone is refused.
TEST(TrainCommandTest, BatchThreadsSplitsAStepIntoBatches) {
  const std::string args =
      "--data=synthetic:mlp:rows=600 --layers=32:relu,1 --epochs=2 --global-batch=50 "
      "--verbose=1 --replicas=4 --inter-op-threads=2 --batch-replica-rows ";
  ProgramOutput one = Train(args);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  EXPECT_THAT(one.text, HasSubstr("Steps: computed in 1 batch(es) for 4 replicas"));
  // Without --batch-replica-rows there are no batches to count.
  ProgramOutput alone = Train("--data=synthetic:linreg --steps=2 --replicas=2 --batch-threads=2");
  EXPECT_EQ(alone.exit_code, 2) << alone.text;
  EXPECT_THAT(alone.text, HasSubstr("--batch-threads needs --batch-replica-rows"));
  ProgramOutput two = Train(args + "--batch-threads=2");
  ASSERT_EQ(two.exit_code, 0) << two.text;
  EXPECT_THAT(two.text, HasSubstr("Steps: computed in 2 batch(es) for 4 replicas"));
  ProgramOutput refused = Train(args + "--batch-threads=3");
  EXPECT_NE(refused.exit_code, 0) << refused.text;
  EXPECT_THAT(refused.text,
              HasSubstr("batch_threads must be 0 (one batch) or 1 to the 2 replica threads, not 3"));
}

// --prefetch reads batches ahead on a thread of its own; they arrive in the same order, so the
// weights are the same bits. On CPU replicas the default reads inline (every core computes).
TEST(TrainCommandTest, PrefetchTrainsToTheBitsOfTheInlinePipeline) {
  const std::string args =
      "--data=synthetic:mlp:rows=600 --layers=32:relu,1 --epochs=2 --shuffle --global-batch=50 "
      "--verbose=1 --replicas=2 ";
  std::string saved[3];
  const std::string prefetch[3] = {"", "--prefetch=0", "--prefetch=3"};
  for (int i = 0; i < 3; ++i) {
    const std::string weights = Path("prefetch" + std::to_string(i) + ".safetensors");
    ProgramOutput out = Train(args + prefetch[i] + " --save=" + weights);
    ASSERT_EQ(out.exit_code, 0) << out.text;
    if (i == 2) {
      EXPECT_THAT(out.text, HasSubstr("Input pipeline: 3 batches read ahead on a thread"));
    } else {
      EXPECT_THAT(out.text, ::testing::Not(HasSubstr("Input pipeline:"))) << prefetch[i];
    }
    saved[i] = ReadBytes(weights);
  }
  EXPECT_FALSE(saved[0].empty());
  EXPECT_TRUE(saved[0] == saved[1]);
  EXPECT_TRUE(saved[0] == saved[2]) << "prefetching changed the weights";
}

// The lines of `text` that begin with `prefix`.
std::vector<std::string> LinesStartingWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  }
  return lines;
}

// One line at the end says how long the steps waited for their batches, inline or prefetched;
// --verbose=0 prints none. The figures are the machine's: only their form is checked here
// (tests/model:fit_step_times_test checks what they measure).
TEST(TrainCommandTest, PrintsHowLongTheStepsWaitedForTheirBatches) {
  const std::regex line(
      "input: the steps waited [0-9]+\\.[0-9]{2} s of [0-9]+\\.[0-9]{2} s for their batches "
      "\\([0-9]+\\.[0-9] %\\)");
  const std::string args =
      "--data=synthetic:mlp:rows=300 --layers=16:relu,1 --epochs=2 --global-batch=50 ";
  for (const std::string flags : {"--verbose=1", "--verbose=1 --prefetch=2", "--verbose=2"}) {
    ProgramOutput out = Train(args + flags);
    ASSERT_EQ(out.exit_code, 0) << out.text;
    const std::vector<std::string> lines = LinesStartingWith(out.text, "input:");
    ASSERT_EQ(lines.size(), 1u) << flags << "\n" << out.text;
    EXPECT_TRUE(std::regex_match(lines[0], line)) << lines[0];
  }
  ProgramOutput quiet = Train(args + "--verbose=0");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.text;
  EXPECT_THAT(quiet.text, ::testing::Not(HasSubstr("input:")));
}

TEST(TrainCommandTest, InputWaitLineGivesTheWaitsShareOfTheSteps) {
  StepTimes times;
  times.input_wait_seconds = 0.42;
  times.step_seconds = 12.3;
  times.steps = 100;
  EXPECT_EQ(InputWaitLine(times),
            "input: the steps waited 0.42 s of 12.30 s for their batches (3.4 %)");
  EXPECT_EQ(InputWaitLine(StepTimes()),
            "input: the steps waited 0.00 s of 0.00 s for their batches (0.0 %)");
}

TEST(TrainCommandTest, IntraOpThreadsTrainToTheBitsOfOneThread) {
  // The mlp workload's default model (256 -> 1024 -> 1024 -> 1): its products and Adam's
  // updates are large enough to split over the threads. Split products and updates give the
  // bits of one thread (ops/cpu/math_kernels.cc), so the saved files are the same bytes.
  ProgramOutput help = Train("--help");
  ASSERT_EQ(help.exit_code, 0) << help.text;
  EXPECT_THAT(help.text, HasSubstr("--intra-op-threads=<int>"));
  EXPECT_THAT(help.text, HasSubstr("--inter-op-threads=<int>"));
  std::string saved[3];
  for (int threads = 1; threads <= 3; ++threads) {
    const std::string weights = Path("threads_" + std::to_string(threads) + ".safetensors");
    ProgramOutput out = Train("--data=synthetic:mlp --steps=4 --global-batch=64 --optimizer=adam "
                              "--lr=0.0001 --verbose=0 --inter-op-threads=1 --intra-op-threads=" +
                              std::to_string(threads) + " --save=" + weights);
    ASSERT_EQ(out.exit_code, 0) << out.text;
    saved[threads - 1] = ReadBytes(weights);
  }
  EXPECT_FALSE(saved[0].empty());
  EXPECT_TRUE(saved[1] == saved[0]) << "2 intra-op threads changed the weights";
  EXPECT_TRUE(saved[2] == saved[0]) << "3 intra-op threads changed the weights";
}

TEST(TrainCommandTest, CheckNumericsStopsAtTheFirstInfNamingIt) {
  const std::string save = Path("diverged.safetensors");
  ProgramOutput out = Train("--data=synthetic:linreg:rows=64 --lr=1e20 --epochs=5 "
                            "--global-batch=8 --verbose=0 --check-numerics --save=" + save);
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("error: epoch 1, step 2: check-numerics: global step 2: the "
                                  "loss has Inf"));
  EXPECT_FALSE(Exists(save));
  // Without it, the divergence still stops the run (the loss is checked every step), with
  // an error that says what to do, a non-zero exit and no weights written.
  ProgramOutput plain = Train("--data=synthetic:linreg:rows=64 --lr=1e20 --epochs=5 "
                              "--global-batch=8 --verbose=0 --save=" + save);
  EXPECT_EQ(plain.exit_code, 1) << plain.text;
  EXPECT_THAT(plain.text, HasSubstr("error: epoch 1, step 2: training diverged: the loss is Inf "
                                    "at global step 2 (lower the learning rate"));
  EXPECT_FALSE(Exists(save));
}

// Lines of a file.
std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(TrainCommandTest, ValidationSplitIsEvaluatedEveryEpoch) {
  const std::string csv = Path("validated.csv");
  WriteCsv(csv);
  const std::string log = Path("validated_log.csv");
  for (int replicas : {1, 2}) {
    ProgramOutput out = Train("--data=" + csv + " --target=y --layers=1 --epochs=3 "
                              "--global-batch=16 --lr=0.1 --validation-split=0.25 "
                              "--metrics=mae --verbose=2 --replicas=" + std::to_string(replicas) +
                              " --metrics-out=" + log);
    ASSERT_EQ(out.exit_code, 0) << out.text;
    EXPECT_THAT(out.text, HasSubstr(" - val_loss: ")) << out.text;
    EXPECT_THAT(out.text, HasSubstr(" - val_mae: ")) << out.text;
    const std::vector<std::string> lines = Lines(log);
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_EQ(lines[0], "epoch,loss,mae,val_loss,val_mae");
  }
  // y = 2·x1 − 3·x2 + 1 is learnable: the held-out rows' loss falls too.
  const std::vector<std::string> lines = Lines(log);
  const auto val_loss = [](const std::string& line) {
    return std::stod(line.substr(line.find(',', line.find(',', line.find(',') + 1) + 1) + 1));
  };
  EXPECT_LT(val_loss(lines[3]), val_loss(lines[1]));
}

// `tower train --tensorboard=DIR`: Keras's layout (DIR/train, DIR/validation), read back by
// the independent reader of tests/model (CRCs and every Event checked); the epoch figures
// are the metrics file's.
TEST(TrainCommandTest, TensorBoardEventFilesForTrainingAndValidation) {
  const std::string csv = Path("tensorboard.csv");
  WriteCsv(csv);
  const std::string log = Path("tensorboard_log.csv");
  const std::string dir = Path("tensorboard_logs/run1");  // parents created too
  ProgramOutput out = Train("--data=" + csv + " --target=y --layers=8:tanh,1 --epochs=2 "
                            "--global-batch=50 --lr=0.05 --validation-split=0.25 --metrics=mae "
                            "--verbose=0 --replicas=2 --tensorboard=" + dir +
                            " --tensorboard-update-freq=batch --metrics-out=" + log);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  // The reader's {"scalars": {tag: {step: value}}, ...} of the one event file in `sub`.
  const auto read = [&](const std::string& sub) {
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir + "/" + sub)) {
      if (entry.path().filename().string().find("tfevents") != std::string::npos) {
        files.push_back(entry.path().string());
      }
    }
    EXPECT_EQ(files.size(), 1u) << sub;
    if (files.size() != 1) return nlohmann::json::object();
    ProgramOutput events = testing::RunCommand(
        "/usr/bin/python3 " + testing::Runfile("tests/model/read_tensorboard_events.py") + " " +
        files[0]);
    EXPECT_EQ(events.exit_code, 0) << events.text;
    return events.exit_code == 0 ? nlohmann::json::parse(events.text) : nlohmann::json::object();
  };
  ASSERT_TRUE(Exists(dir + "/train") && Exists(dir + "/validation"));
  const nlohmann::json train = read("train");
  const nlohmann::json validation = read("validation");
  EXPECT_EQ(train["file_version"], "brain.Event:2");
  // 300 training rows in batches of 50: 6 steps an epoch, 12 in all.
  for (const char* tag : {"batch_loss", "batch_mae", "learning_rate", "gradient_global_norm",
                          "step_time_ms", "all_reduce_time_ms"}) {
    EXPECT_EQ(train["scalars"][tag].size(), 12u) << tag;
    EXPECT_TRUE(train["scalars"][tag].contains("12")) << tag;
  }
  EXPECT_FALSE(train["scalars"].contains("loss_scale"));
  EXPECT_EQ(train["scalars"]["learning_rate"]["7"], 0.05f);
  // The metrics file's last epoch (epoch,loss,mae,val_loss,val_mae), as float32.
  const std::vector<std::string> lines = Lines(log);
  ASSERT_EQ(lines.size(), 3u);
  std::vector<double> last;
  for (const std::string& field : Split(lines[2], ',')) last.push_back(std::stod(field));
  EXPECT_EQ(train["scalars"]["epoch_loss"]["1"], static_cast<float>(last[1]));
  EXPECT_EQ(train["scalars"]["epoch_mae"]["1"], static_cast<float>(last[2]));
  EXPECT_EQ(validation["scalars"]["epoch_loss"]["1"], static_cast<float>(last[3]));
  EXPECT_EQ(validation["scalars"]["epoch_mae"]["1"], static_cast<float>(last[4]));
  EXPECT_EQ(validation["scalars"].size(), 2u);  // epoch_loss, epoch_mae
}

// Training on y = x and validating on y = −x: the better the model fits, the worse the
// validation loss, so early stopping with patience 0 ends the run at epoch 2, and the best
// checkpoint holds epoch 1's weights.
// `--trace=FILE --trace-steps=A:B`: the steps traced, in a file Chrome and Perfetto open (the
// trace's own tests check the lanes, buckets and nesting): by default one lane per replica;
// with --batch-replica-rows replica 0's lane, which computes both replicas' rows as one batch,
// named for it.
TEST(TrainCommandTest, TraceOfChosenStepsIsWritten) {
  for (const bool batched : {true, false}) {
    const std::string path = Path(batched ? "steps.trace.json" : "steps_unbatched.trace.json");
    ProgramOutput out = Train("--data=synthetic:linreg --steps=6 --verbose=0 --replicas=2 "
                              "--trace=" + path + " --trace-steps=2:3" +
                              (batched ? " --batch-replica-rows" : ""));
    ASSERT_EQ(out.exit_code, 0) << out.text;
    std::ifstream file(path);
    nlohmann::json trace;
    ASSERT_NO_THROW(trace = nlohmann::json::parse(file));
    std::set<int> steps, lanes;
    std::set<std::string> names;
    for (const nlohmann::json& event : trace.at("traceEvents")) {
      if (event.at("ph") == "M" && event.at("name") == "thread_name") {
        names.insert(event.at("args").at("name").get<std::string>());
      }
      if (event.at("ph") != "X") continue;
      lanes.insert(event.at("tid").get<int>());
      if (event.at("cat") == "step" && event.at("tid") == 0) steps.insert(event.at("args").at("step").get<int>());
    }
    EXPECT_EQ(steps, (std::set<int>{2, 3})) << batched;
    if (batched) {
      EXPECT_EQ(lanes, (std::set<int>{-1, 0})) << trace.dump().substr(0, 500);
      EXPECT_TRUE(names.count("replica 0 (/job:localhost/replica:0/task:0/device:CPU:0), "
                              "computing the batch of replicas 0, 1 in batched steps"))
          << trace.dump().substr(0, 1500);
    } else {
      EXPECT_EQ(lanes, (std::set<int>{-1, 0, 1})) << trace.dump().substr(0, 500);
    }
  }
}

// SIGUSR1 to a running `tower train --flight-recorder=DIR` writes what its collectives did
// and training goes on; SIGTERM then ends it. Each wait is for an event, not a time: steps
// have run once a backup is written, and training went on once another one is.
TEST(TrainCommandTest, Sigusr1WritesTheFlightRecorderAndTrainingGoesOn) {
  const std::string dir = Path("flight_sigusr1/nested");  // made by --flight-recorder
  const std::string file = dir + "/flight_recorder.rank0.json";
  const std::string backup = Path("flight_sigusr1.backup");
  testing::BackgroundProgram train(
      "tools/tower",
      "train --data=synthetic:linreg --steps=100000000 --verbose=0 --replicas=2 "
      "--backup=" + backup + " --backup-every=2000 --flight-recorder=" +
          dir,
      Path("flight_sigusr1.log"));
  ASSERT_TRUE(train.started());
  // Its collectives have run (and SIGUSR1's handler, installed before the first step, is in
  // place) once the first backup is written.
  ASSERT_TRUE(testing::WaitForBackups(train, backup, 1))
      << testing::ReadBytes(Path("flight_sigusr1.log"));
  train.Kill(SIGUSR1);
  for (int i = 0; i < 1200 && !Exists(file); ++i) usleep(50000);
  ASSERT_TRUE(Exists(file));
  // Another backup after the ring was written: training went on.
  EXPECT_TRUE(testing::WaitForBackups(train, backup, 2)) << "SIGUSR1 must not end training";
  EXPECT_TRUE(train.Running()) << "SIGUSR1 must not end training";
  std::ifstream in(file);
  const nlohmann::json dump = nlohmann::json::parse(in);
  EXPECT_THAT(dump.at("reason").get<std::string>(), HasSubstr("SIGUSR1"));
  EXPECT_GT(dump.at("current_step").get<int64_t>(), 0);
  ASSERT_FALSE(dump.at("records").empty());
  // The replicas' bucket sums, each with its replica, step and fingerprint (unbatched: both
  // replicas sum; in one batch, replica 0 alone: flight_records_test).
  std::set<int> replicas;
  for (const nlohmann::json& record : dump.at("records")) {
    if (record.at("scope") == "replicas") replicas.insert(record.at("replica").get<int>());
  }
  EXPECT_EQ(replicas, (std::set<int>{0, 1}));
  train.Kill(SIGTERM);
  EXPECT_EQ(train.Wait(), -SIGTERM);
}

TEST(TrainCommandTest, EarlyStoppingAndTheBestCheckpointFollowValLoss) {
  const std::string train = Path("up.csv");
  const std::string flipped = Path("down.csv");
  {
    std::ofstream a(train), b(flipped);
    a << "x,y\n";
    b << "x,y\n";
    for (int i = 0; i < 64; ++i) {
      const float x = -1.0f + 2.0f * i / 63;
      a << x << "," << x << "\n";
      b << x << "," << -x << "\n";
    }
  }
  const std::string log = Path("early.csv");
  const std::string best = Path("best.safetensors");
  const std::string common = "--data=" + train + " --target=y --layers=1 --global-batch=8 "
                             "--lr=0.05 --verbose=0 ";
  ProgramOutput out = Train(common + "--epochs=10 --validation-data=" + flipped +
                            " --early-stopping=0 --save-best=" + best + " --metrics-out=" + log);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_EQ(Lines(log).size(), 3u) << "header and epochs 1 and 2";
  const std::string first = Path("epoch1.safetensors");
  ProgramOutput one = Train(common + "--epochs=1 --save=" + first);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  EXPECT_EQ(Weights(best, "layers.0.kernel"), Weights(first, "layers.0.kernel"));
  EXPECT_EQ(Weights(best, "layers.0.bias"), Weights(first, "layers.0.bias"));
}

TEST(TrainCommandTest, BadInputsGiveOneLineAndNoOutput) {
  const std::string csv = Path("good.csv");
  WriteCsv(csv);
  const std::string ragged = Path("ragged.csv");
  std::ofstream(ragged) << "a,b,y\n1,2,3\n4,5\n";
  const std::string text = Path("text.csv");
  std::ofstream(text) << "a,y\n1,2\nfoo,3\n";
  const std::string labels = Path("labels.csv");
  std::ofstream(labels) << "a,y\n0.5,1\n0.1,2.5\n";
  const std::string empty = Path("empty.csv");
  std::ofstream(empty) << "";
  const std::string corrupt = Path("corrupt.safetensors");
  std::ofstream(corrupt) << "not a checkpoint at all";
  const std::string save = Path("never.safetensors");
  const std::string base = "--data=" + csv + " --target=y --save=" + save + " ";
  const std::string layers = "--layers=1 ";
  const std::string epochs = "--epochs=1 ";
  const std::string duplicate = Path("duplicate.csv");
  std::ofstream(duplicate) << "x,x,y\n1,2,3\n";
  const std::string quote = Path("quote.csv");
  std::ofstream(quote) << "x,\"y\n1,2\n";
  const std::string nan = Path("nan.csv");
  std::ofstream(nan) << "x,y\n1,nan\n";
  const std::string weights = Path("weights.safetensors");
  ASSERT_EQ(Train("--data=" + csv + " --target=y --layers=1 --epochs=1 --verbose=0 --save=" +
                  weights).exit_code, 0);
  const std::string truncated = Path("truncated.safetensors");
  {
    std::ifstream in(weights, std::ios::binary);
    std::string bytes(std::istreambuf_iterator<char>(in), {});
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, 50);
  }
  struct Case {
    std::string args;
    std::string message;
    std::string env = "";  // environment assignments before the command
  };
  const Case cases[] = {
      {"", "--data is required"},
      {"--data=" + csv + " --layers=1 --epochs=1", "--target is required"},
      {"--data=" + csv + " --target=y --epochs=1", "--layers is required"},
      {"--data=" + csv + " --target=y --layers=1", "give --epochs=E or --steps=S"},
      {base + layers + "--epochs=-1", "give --epochs=E or --steps=S"},
      {"--data=/no/such.csv --target=y --layers=1 --epochs=1", "no/such.csv"},
      {"--data=" + empty + " --target=y --layers=1 --epochs=1", "empty"},
      {"--data=" + ragged + " --target=y --layers=1 --epochs=1", "line 3 has 2 fields, the header has 3"},
      {"--data=" + text + " --target=y --layers=1 --epochs=1", "'foo' is not a number"},
      {"--data=" + csv + " --target=nope --layers=1 --epochs=1", "no column named 'nope'"},
      {base + epochs + "--layers=0", "'0' is not UNITS[:ACTIVATION]"},
      {base + epochs + "--layers=8:swish,1", "unknown activation 'swish'"},
      {base + epochs + "--layers=8:relu,", "is not UNITS[:ACTIVATION]"},
      {base + epochs + "--layers=2", "the model has 2 outputs but the data has 1 targets"},
      {base + layers + epochs + "--loss=hinge", "unknown loss 'hinge'"},
      {base + layers + epochs + "--prefetch=-2", "--prefetch=-2: give the batches to read ahead"},
      {base + layers + epochs + "--prefetch=65", "--prefetch=65: give the batches to read ahead, 0 (none) to 64"},
      {base + layers + epochs + "--optimizer=rmsprop", "use sgd, adam or adamw"},
      {base + layers + epochs + "--weight-decay=0.1", "--weight-decay applies to --optimizer=adamw"},
      {base + layers + epochs + "--optimizer=adamw --weight-decay=-1e-3", "must be a number >= 0"},
      {base + layers + epochs + "--lr-schedule=cosine:decay=10", "unknown key 'decay'; cosine takes decay_steps=N[,alpha=A]"},
      {base + layers + epochs + "--lr-schedule=linear", "--lr-schedule 'linear'"},
      {base + layers + epochs + "--warmup-steps=-2", "--warmup-steps must be 0 or more"},
      {base + layers + epochs + "--clip-value=1 --clip-norm=1", "not both"},
      {base + layers + epochs + "--clip-norm=-1", "must be finite and >= 0"},
      {base + layers + epochs + "--accumulate=0", "--accumulate=0 must be between 1 and --global-batch"},
      {base + layers + epochs + "--replicas=2 --deterministic --virtual-shards=4 --accumulate=4", "use at least 8 virtual shards"},
      {base + layers + epochs + "--lr=0", "--lr=0.000000 must be a positive number"},
      {base + layers + epochs + "--lr=fast", "--lr='fast' is not a finite number"},
      {base + layers + epochs + "--momentum=1.5", "--momentum must be in [0, 1)"},
      {base + layers + epochs + "--optimizer=adam --momentum=0.9", "apply to --optimizer=sgd"},
      {base + layers + epochs + "--global-batch=0", "--global-batch must be positive"},
      {base + layers + epochs + "--metrics=auc", "unknown metric 'auc'"},
      {base + layers + epochs + "--replicas=0", "--replicas=0: the replicas of one process must number between 1 and 256, not 0"},
      {base + layers + epochs + "--replicas=2 --devices=/CPU:0", "give --replicas or --devices, not both"},
      {base + layers + epochs + "--devices=/GPU:3", "unknown device"},
      {base + layers + epochs + "--devices=/CPU:0,/CPU:0", "listed twice"},
      {base + layers + epochs + "--cross-device-ops=ring", "unknown cross-device ops 'ring'"},
      {base + layers + epochs + "--virtual-cpus=-2", "--virtual-cpus=-2 must be between 0"},
      {base + layers + epochs + "--verbose=7", "--verbose is 0, 1 or 2"},
      {base + layers + epochs + "--init=" + corrupt, "--init: " + corrupt},
      {base + layers + epochs + "--init=" + Path("absent.safetensors"), "absent.safetensors"},
      {base + layers + epochs + "--bogus=1", "unknown flag --bogus"},
      // Device names, device configuration and the environment.
      {base + layers + epochs + "--devices=/dvice:CPU:0", "Malformed device name '/dvice:CPU:0'"},
      {base + layers + epochs + "--visible-gpus=x", "'x' is not a GPU index"},
      {base + layers + epochs + "--memory-fraction=2", "fraction must be in (0, 1], got 2"},
      {base + layers + epochs + "--memory-growth=maybe", "--memory-growth='maybe' must be true or false"},
      {base + layers + epochs + "--cpu-memory-limit=-1", "--cpu-memory-limit=-1 must be a positive"},
      {base + layers + epochs + "--intra-op-threads=-1", "--intra-op-threads=-1 must be between 0 (one per core) and 1024"},
      {base + layers + epochs + "--inter-op-threads=5000", "--inter-op-threads=5000 must be between 0"},
      {base + layers + epochs + "--intra-op-threads=two", "--intra-op-threads='two' is not an integer"},
      {base + layers + epochs, "TF_FORCE_GPU_ALLOW_GROWTH='maybe' is not a valid value",
       "TF_FORCE_GPU_ALLOW_GROWTH=maybe"},
      // CSV contents.
      {"--data=" + duplicate + " --target=y --layers=1 --epochs=1", "duplicate column name 'x'"},
      {"--data=" + quote + " --target=y --layers=1 --epochs=1", "unterminated quote"},
      {"--data=" + nan + " --target=y --layers=1 --epochs=1", "line 2, column 'y' (2): 'nan' is not a finite number"},
      {"--data=" + csv + " --target=y,y --layers=1 --epochs=1", "target column 'y' is listed twice"},
      {"--data=synthetic:mlp:rows=-5 --steps=1", "rows must be a count"},
      // Checkpoint files and resuming.
      {base + layers + epochs + "--init=" + truncated, "truncated: the header length is"},
      {base + epochs + "--layers=4,1 --init=" + weights, "'layers.0.kernel' has shape [3, 1] but the model's is [3, 4]"},
      {base + layers + epochs + "--backup=" + weights + " --resume", "holds weights but no training position"},
      {base + layers + epochs + "--backup=" + truncated + " --resume", "--resume: " + truncated},
      {base + layers + epochs + "--resume", "--resume needs --backup=PATH"},
      {base + layers + epochs + "--backup=" + Path("b.safetensors") + " --backup-every=0", "--backup-every must be a positive"},
      // Output that could not be written is found before training, not after.
      {"--data=" + csv + " --target=y --layers=1 --epochs=1 --save=/no/such/dir/w.safetensors",
       "--save=/no/such/dir/w.safetensors: the directory /no/such/dir does not exist"},
      {base + layers + epochs + "--metrics-out=/no/such/dir/m.csv", "the directory /no/such/dir"},
      {base + layers + epochs + "--bucket-mb=0", "--bucket-mb must be between"},
      {base + layers + epochs + "--bucket-mb=nan", "--bucket-mb"},
      {base + layers + epochs + "--collective-timeout=-1", "--collective-timeout must be between"},
      {base + layers + epochs + "--collective-timeout=1e30", "--collective-timeout must be between"},
      {base + layers + epochs + "--drop-remainder --global-batch=1000", "leaves no batch of the 400 rows"},
      {"--data=synthetic:mlp --epochs=1", "endless: give --steps"},
      {"--data=synthetic:nope --steps=1", "synthetic"},
      {"--data=synthetic:linreg --target=y --steps=1", "--target applies to CSV data"},
      {"--data=" + labels + " --target=y --layers=3 --loss=sparse_categorical_crossentropy --epochs=1",
       "labels.csv:3: target 2.500000 is not a class id in [0, 3)"},
      {"--data=" + csv + " --target=class --layers=1 --loss=sparse_ce --epochs=1",
       "needs a model with one output (logit) per class"},
      {base + layers + epochs + "--validation-split=1.5", "--validation-split=1.500000 must be a fraction in (0, 1)"},
      {base + layers + epochs + "--validation-split=0.999", "of 400 rows leaves no training rows"},
      {base + layers + epochs + "--validation-split=0.2 --validation-data=" + csv,
       "give --validation-split or --validation-data, not both"},
      {base + layers + epochs + "--validation-data=" + duplicate, "--validation-data"},
      {base + layers + epochs + "--validation-data=" + ragged, "--validation-data"},
      {base + layers + epochs + "--validation-data=" + labels, "has columns (a -> y), the training data (x1,x2,class -> y)"},
      {"--data=synthetic:linreg --steps=3 --validation-split=0.5", "--validation-split needs data with a known number of rows"},
      {base + layers + epochs + "--early-stopping=-2", "--early-stopping is a number of epochs"},
      {base + layers + epochs + "--save-best=/nonexistent/dir/b.safetensors", "--save-best=/nonexistent/dir/b.safetensors: the directory"},
      {base + layers + epochs + "--tensorboard-update-freq=batch", "--tensorboard-update-freq needs --tensorboard=DIR"},
      {base + layers + epochs + "--trace-steps=2:6", "--trace-steps needs --trace=FILE"},
      {base + layers + epochs + "--trace=" + Path("t.json") + " --trace-steps=5:3", "--trace-steps='5:3': give the first and last step"},
      {base + layers + epochs + "--trace=/nonexistent/dir/t.json", "trace file /nonexistent/dir/t.json: the folder '/nonexistent/dir' does not exist"},
      {base + layers + epochs + "--flight-recorder=" + csv + "/records", "--flight-recorder: creating the directory " + csv + "/records"},
      {base + layers + epochs + "--tensorboard=" + Path("tb") + " --tensorboard-update-freq=sometimes",
       "--tensorboard-update-freq: TensorBoard update frequency 'sometimes'"},
      {base + layers + epochs + "--tensorboard=" + csv + "/logs/run", "--tensorboard=" + csv + "/logs/run: " + csv + " is not a directory"},
  };
  EXPECT_GE(std::size(cases), 60u) << "the table of bad inputs shrank";
  for (const Case& c : cases) {
    ProgramOutput out = testing::RunCommand(c.env + " " + testing::Runfile("tools/tower") +
                                            " train " + c.args);
    EXPECT_NE(out.exit_code, 0) << c.args;
    // Run through a shell, a program killed by signal N shows as 128 + N (or -1 when the
    // shell itself is killed): Tower's own errors exit 1 or 2.
    EXPECT_TRUE(out.exit_code >= 1 && out.exit_code < 128)
        << "exit " << out.exit_code << ", killed by a signal? " << c.args;
    EXPECT_THAT(out.text, HasSubstr("error: ")) << c.args;
    EXPECT_THAT(out.text, HasSubstr(c.message)) << c.args;
    // One line of error.
    const size_t at = out.text.find("error: ");
    EXPECT_EQ(out.text.find('\n', at), out.text.size() - 1) << c.args << "\n" << out.text;
    EXPECT_FALSE(Exists(save)) << c.args;
  }
}

}  // namespace
}  // namespace tower
