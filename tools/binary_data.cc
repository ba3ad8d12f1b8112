#include "tools/binary_data.h"

#include <glob.h>

#include <vector>

#include "util/strings.h"

namespace tower {
namespace {

// TensorFlow's names: x.tfrecord, x.tfrecords, x.tfr, and shards x.tfrecord-00000-of-00004.
bool IsTfRecordName(const std::string& name) {
  return name.find(".tfrecord") != std::string::npos || EndsWith(name, ".tfr");
}

// The files of a comma-separated list of paths and globs, each glob's matches sorted.
StatusOr<std::vector<std::string>> ExpandFiles(const std::string& spec) {
  std::vector<std::string> files;
  for (const std::string& part : Split(spec, ',')) {
    if (part.find_first_of("*?[") == std::string::npos) {
      files.push_back(part);
      continue;
    }
    glob_t matches{};
    const int result = ::glob(part.c_str(), 0, nullptr, &matches);
    for (size_t i = 0; result == 0 && i < matches.gl_pathc; ++i) {
      files.push_back(matches.gl_pathv[i]);
    }
    ::globfree(&matches);
    if (result != 0) {
      return InvalidArgumentError("'" + part +
                                  "' matches no file (give TFRecord files, "
                                  "a comma-separated list, or globs that match some)");
    }
  }
  return files;
}

}  // namespace

bool IsBinaryData(const std::string& spec) {
  if (EndsWith(spec, ".npy") || EndsWith(spec, ".npz")) return true;
  const std::vector<std::string> parts = Split(spec, ',');
  return !parts.empty() && IsTfRecordName(parts.front());
}

StatusOr<data::Dataset> LoadBinaryData(const std::string& spec, const std::string& target,
                                       const std::string& features) {
  if (EndsWith(spec, ".npy")) {
    if (!EndsWith(target, ".npy")) {
      return InvalidArgumentError("with --data=" + spec +
                                  ", --target names the .npy file of "
                                  "the targets (--target=y.npy), got '" +
                                  target + "'");
    }
    if (!features.empty()) {
      return InvalidArgumentError(
          "--features applies to .npz, TFRecord and CSV data; a .npy "
          "file is all features");
    }
    return data::Dataset::FromNpy(spec, target);
  }
  if (target.empty()) {
    return InvalidArgumentError("--target is required: the " +
                                std::string(EndsWith(spec, ".npz") ? "array" : "feature(s)") +
                                " to predict");
  }
  if (EndsWith(spec, ".npz")) return data::Dataset::FromNpz(spec, target, features);
  TOWER_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandFiles(spec));
  data::TfRecordOptions options;
  options.target_features = Split(target, ',');
  if (!features.empty()) options.features = Split(features, ',');
  return data::Dataset::FromTfRecords(files, options);
}

Status CheckBinaryValidationData(const std::string& spec) {
  if (!EndsWith(spec, ".npy")) return OkStatus();
  return InvalidArgumentError("--validation-data=" + spec +
                              ": a .npy file cannot be paired with its targets here (--target "
                              "names the training targets' file): use --validation-split, or "
                              "put both in a .npz");
}

}  // namespace tower
