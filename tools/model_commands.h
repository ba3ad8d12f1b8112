// `tower evaluate` and `tower predict`: use a model file written by `tower train --save`,
// which carries its architecture, loss and columns (model/model_file.h), so no flag about
// the model is needed. Both run data-parallel like `train` (--replicas, device flags, under
// mpirun every process is a worker).
//
//   tower evaluate --model=m.safetensors --data=test.csv      # loss=…  mae=… (one per line)
//   tower predict  --model=m.safetensors --data=new.csv --out=predictions.csv
//
// The data's columns are found by name (their order in the file does not matter; other
// columns are ignored); `predict` needs the feature columns only and writes one column per
// target (for a classifier: the predicted class). Exit codes: 2 for bad flags, files or
// models (one `error:` line, nothing written), 1 when the run fails; the output file is
// written atomically.
#ifndef TOWER_TOOLS_MODEL_COMMANDS_H_
#define TOWER_TOOLS_MODEL_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

namespace tower {

int RunEvaluateCommand(const std::vector<std::string>& args, std::ostream& out,
                       std::ostream& err);
int RunPredictCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tower

#endif  // TOWER_TOOLS_MODEL_COMMANDS_H_
