// IsInputError: which errors that stop a training run are bad input (tower train exits 2)
// and which are not (exit 1).
#include <gtest/gtest.h>

#include "tools/train_data.h"

namespace tower {
namespace {

TEST(InputErrorTest, ADataErrorNamingAFileGivenIsInput) {
  const InputFiles csv{"/d/train.csv", "y", ""};
  EXPECT_TRUE(IsInputError(
      InvalidArgumentError("/d/train.csv: line 3002, column 'b' (2): 'zz' is not a number"), csv));
  EXPECT_TRUE(IsInputError(DataLossError("/d/train.csv: the file shrank"), csv));
  // Several files and globs.
  const InputFiles many{"/d/a.csv,/d/part-*.tfrecord", "label", ""};
  EXPECT_TRUE(IsInputError(InvalidArgumentError("/d/a.csv: line 2: 2 cells, 3 columns"), many));
  EXPECT_TRUE(IsInputError(DataLossError("/d/part-3.tfrecord: record 7 (byte 1180): the data's "
                                         "CRC-32C does not match"),
                           many));
  // A .npz member, a .npy target, the validation file.
  EXPECT_TRUE(IsInputError(DataLossError("/d/d.npz:x: the file ends before byte 9"),
                           InputFiles{"/d/d.npz", "y", ""}));
  EXPECT_TRUE(IsInputError(DataLossError("/d/y.npy: cannot read bytes 0 to 4"),
                           InputFiles{"/d/x.npy", "/d/y.npy", ""}));
  EXPECT_TRUE(IsInputError(InvalidArgumentError("/d/val.csv: line 9: 'q' is not a number"),
                           InputFiles{"/d/train.csv", "y", "/d/val.csv"}));
}

TEST(InputErrorTest, OtherErrorsAreNot) {
  const InputFiles csv{"/d/train.csv", "y", ""};
  // Another code, though it names the file.
  EXPECT_FALSE(IsInputError(InternalError("/d/train.csv: something else"), csv));
  EXPECT_FALSE(IsInputError(UnavailableError("/d/train.csv: peer gone"), csv));
  // Not about a file read: the numerics check, another file, a file only prefixed alike.
  EXPECT_FALSE(IsInputError(
      InvalidArgumentError("check-numerics: step 3: replica 0's gradient has NaN"), csv));
  EXPECT_FALSE(IsInputError(InvalidArgumentError("/d/other.csv: line 2: 'x' is not a number"),
                            csv));
  EXPECT_FALSE(IsInputError(InvalidArgumentError("/d/train.csv.bak: line 2: bad"), csv));
  // A .npy target only counts as a file when it is one (a CSV's --target is a column).
  EXPECT_FALSE(IsInputError(InvalidArgumentError("y: bad"), csv));
  EXPECT_FALSE(IsInputError(OkStatus(), csv));
  EXPECT_FALSE(IsInputError(InvalidArgumentError("synthetic:mlp: bad"),
                            InputFiles{"synthetic:mlp", "", ""}));
}

}  // namespace
}  // namespace tower
