// `tower train --data=...` on the binary formats TensorFlow and NumPy users already have:
//
//   --data=x.npy --target=y.npy          features and targets in two .npy files (np.save)
//   --data=d.npz --target=y [--features=x]   two arrays of one np.savez archive, by name
//                                        (--features may be left out when there are two)
//   --data=train.tfrecord --target=label [--features=a,b]
//                                        TFRecord files of tf.train.Example: a file, a
//                                        comma-separated list, or globs ("data/*.tfrecord");
//                                        --features: default every float_list and int64_list
//                                        feature of the first record but the targets, in name
//                                        order.
#ifndef TOWER_TOOLS_BINARY_DATA_H_
#define TOWER_TOOLS_BINARY_DATA_H_

#include <string>

#include "data/dataset.h"
#include "util/statusor.h"

namespace tower {

// Whether `spec` names one of the formats above, by its (first) file name: ending in .npy or
// .npz, or holding ".tfrecord" (x.tfrecord, x.tfrecords, x.tfrecord-00000-of-00004) or ending
// in .tfr.
bool IsBinaryData(const std::string& spec);

// Opens the data `spec` names (IsBinaryData), with --target and --features as above.
StatusOr<data::Dataset> LoadBinaryData(const std::string& spec, const std::string& target,
                                       const std::string& features);

// --validation-data=`spec` shares --target (and --features) with the training data: fine for
// .npz and TFRecord (names), not for .npy, whose --target is the training targets' file.
Status CheckBinaryValidationData(const std::string& spec);

}  // namespace tower

#endif  // TOWER_TOOLS_BINARY_DATA_H_
