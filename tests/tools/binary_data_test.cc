// `tower train` on NumPy and TFRecord files written by Python: NumPy's np.save / np.savez, and
// tf.train.Example messages from Python classes that Debian's protoc generates from
// tests/data/tensorflow_proto (TensorFlow's messages), framed with python3-crc32c
// (tests/tools/write_binary_data.py). Each trains, with --deterministic, to the same bytes
// of saved model as the same rows in CSV; damaged files fail with exit 2, one line naming the
// file and record, and nothing written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "tests/testing/run_program.h"
#include "tests/testing/tower_cli.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using testing::ProgramOutput;
using testing::TempPath;

bool Exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

class BinaryDataTest : public ::testing::Test {
 protected:
  // Generates the Python classes and the files once for the whole suite.
  static void SetUpTestSuite() {
    dir_ = new std::string(TempPath("binary_data"));
    const std::string proto = testing::Runfile("tests/data/tensorflow_proto");
    const std::string py = *dir_ + "/proto_py";
    const ProgramOutput made = testing::RunCommand(
        "mkdir -p " + py + " && protoc -I " + proto + " --python_out=" + py +
        " tensorflow/core/example/example.proto tensorflow/core/example/feature.proto && "
        "/usr/bin/python3 " +
        testing::Runfile("tests/tools/write_binary_data.py") + " " + *dir_ + " " + py);
    written_ = new ProgramOutput(made);
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete written_;
  }

  void SetUp() override {
    ASSERT_EQ(written_->exit_code, 0)
        << "writing the files failed (protoc from protobuf-compiler, python3-numpy, "
           "python3-protobuf and python3-crc32c are needed; ./bazelw installs them):\n"
        << written_->text;
  }

  static std::string File(const std::string& name) { return *dir_ + "/" + name; }

  // Trains on `data` (flags) and returns the saved model file's bytes ("" when it failed).
  static std::string TrainAndSave(const std::string& data, const std::string& model,
                                  const std::string& name) {
    const std::string saved = File(name);
    const ProgramOutput run = testing::Tower("train " + data + " " + model +
                                             " --epochs=3 --global-batch=16 --deterministic "
                                             "--save=" +
                                             saved);
    EXPECT_EQ(run.exit_code, 0) << data << ":\n" << run.text;
    return testing::ReadBytes(saved);
  }

  static std::string* dir_;
  static ProgramOutput* written_;
};

std::string* BinaryDataTest::dir_ = nullptr;
ProgramOutput* BinaryDataTest::written_ = nullptr;

constexpr char kRegression[] = "--layers=1";
constexpr char kClassifier[] = "--layers=3 --loss=sparse_categorical_crossentropy";

TEST_F(BinaryDataTest, NpyPairTrainsLikeTheSameRowsInCsv) {
  const std::string csv =
      TrainAndSave("--data=" + File("npy_rows.csv") + " --target=y", kRegression, "csv.st");
  ASSERT_FALSE(csv.empty());
  EXPECT_TRUE(csv == TrainAndSave("--data=" + File("x.npy") + " --target=" + File("y.npy"),
                                  kRegression, "npy.st"));
}

TEST_F(BinaryDataTest, NpzTrainsLikeTheSameRowsInCsv) {
  const std::string csv =
      TrainAndSave("--data=" + File("npy_rows.csv") + " --target=y", kRegression, "csv.st");
  ASSERT_FALSE(csv.empty());
  EXPECT_TRUE(csv ==
              TrainAndSave("--data=" + File("d.npz") + " --target=y", kRegression, "npz.st"));
  EXPECT_TRUE(csv == TrainAndSave("--data=" + File("d.npz") + " --target=y --features=x",
                                  kRegression, "npz_named.st"));
}

TEST_F(BinaryDataTest, IntegerLabelsInNpyTrainAClassifierLikeCsv) {
  const std::string csv =
      TrainAndSave("--data=" + File("npy_class.csv") + " --target=y", kClassifier, "ccsv.st");
  ASSERT_FALSE(csv.empty());
  EXPECT_TRUE(csv == TrainAndSave("--data=" + File("x.npy") + " --target=" + File("label.npy"),
                                  kClassifier, "cnpy.st"));
}

TEST_F(BinaryDataTest, TfRecordFilesTrainLikeTheSameRowsInCsv) {
  const std::string csv =
      TrainAndSave("--data=" + File("rows.csv") + " --target=y", kRegression, "csv_tf.st");
  ASSERT_FALSE(csv.empty());
  // Two files as a list, and as a glob.
  EXPECT_TRUE(csv == TrainAndSave("--data=" + File("part-0.tfrecord") + "," +
                                      File("part-1.tfrecord") + " --target=y --features=a,b",
                                  kRegression, "tfr_list.st"));
  EXPECT_TRUE(csv ==
              TrainAndSave("--data='" + File("part-*.tfrecord") + "' --target=y --features=a,b",
                           kRegression, "tfr_glob.st"));
  // TensorFlow's shard names.
  for (int shard = 0; shard < 2; ++shard) {
    std::ofstream(File("train.tfrecord-0000" + std::to_string(shard) + "-of-00002"),
                  std::ios::binary)
        << testing::ReadBytes(File("part-" + std::to_string(shard) + ".tfrecord"));
  }
  EXPECT_TRUE(csv ==
              TrainAndSave("--data='" + File("train.tfrecord-*") + "' --target=y --features=a,b",
                           kRegression, "tfr_shards.st"));
  // Class ids from an int64_list feature.
  const std::string classes =
      TrainAndSave("--data=" + File("class.csv") + " --target=label", kClassifier, "ctf.st");
  ASSERT_FALSE(classes.empty());
  EXPECT_TRUE(classes ==
              TrainAndSave("--data='" + File("part-*.tfrecord") + "' --target=label --features=a,b",
                           kClassifier, "ctfr.st"));
}

// A bad file: exit 2, one error line naming `where`, no model file.
void ExpectRefused(const std::string& args, const std::string& where, const std::string& what) {
  const std::string saved = TempPath("refused.st");
  const ProgramOutput run =
      testing::Tower("train " + args + " --layers=1 --epochs=1 --save=" + saved);
  EXPECT_EQ(run.exit_code, 2) << run.text;
  EXPECT_THAT(run.text, HasSubstr(where));
  EXPECT_THAT(run.text, HasSubstr(what));
  EXPECT_FALSE(Exists(saved)) << args;
}

TEST_F(BinaryDataTest, DamagedFilesAreRefusedNamingTheFileAndRecord) {
  // One byte of record 5's data flipped: its CRC no longer matches.
  const std::string damaged = File("damaged.tfrecord");
  {
    std::string bytes = testing::ReadBytes(File("part-0.tfrecord"));
    ASSERT_GT(bytes.size(), 1000u);
    const size_t record_bytes = bytes.size() / 70;  // every record has the same size
    bytes[5 * record_bytes + 20] ^= 0x10;
    std::ofstream(damaged, std::ios::binary) << bytes;
  }
  ExpectRefused("--data=" + damaged + " --target=y", "damaged.tfrecord: record 5",
                "CRC-32C does not match");
  // Cut in the middle of its last record.
  const std::string cut = File("cut.tfrecord");
  {
    const std::string bytes = testing::ReadBytes(File("part-1.tfrecord"));
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 7);
  }
  ExpectRefused("--data=" + cut + " --target=y", "cut.tfrecord: record 49", "truncated");
  ExpectRefused("--data=" + File("part-0.tfrecord") + " --target=y --features=a,nope",
                "part-0.tfrecord: record 0", "no feature 'nope'");
  // A .npy cut short, and a targets file of other rows.
  const std::string short_npy = File("short.npy");
  {
    const std::string bytes = testing::ReadBytes(File("x.npy"));
    std::ofstream(short_npy, std::ios::binary) << bytes.substr(0, bytes.size() - 12);
  }
  ExpectRefused("--data=" + short_npy + " --target=" + File("y.npy"), "short.npy", "truncated");
  ExpectRefused("--data=" + File("x.npy") + " --target=" + File("part-0.tfrecord"), "x.npy",
                "--target names the .npy file");
  // A .npy validation file would be paired with the training targets' file.
  ExpectRefused("--data=" + File("x.npy") + " --target=" + File("y.npy") +
                    " --validation-data=" + File("x.npy"),
                "--validation-data=" + File("x.npy"), "use --validation-split");
}

TEST_F(BinaryDataTest, ValidationFilesShareTargetAndFeatures) {
  // The second file validates with the training data's --target and --features.
  const ProgramOutput run = testing::Tower("train --data=" + File("part-0.tfrecord") +
                                           " --validation-data=" + File("part-1.tfrecord") +
                                           " --target=y --features=a,b --layers=1 --epochs=2");
  EXPECT_EQ(run.exit_code, 0) << run.text;
  EXPECT_THAT(run.text, HasSubstr("val_loss"));
}

}  // namespace
}  // namespace tower
