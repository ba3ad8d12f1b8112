// `tower train`: trains a dense network from the command line, no code needed.
//
//   tower train --data=train.csv --target=y --layers=64:relu,64:relu,1 --loss=mse \
//               --optimizer=sgd --lr=0.1 --global-batch=32 --epochs=10 --save=model.safetensors
//   tower train --data=synthetic:mlp --replicas=4 --steps=100 --save=a.safetensors
//
// Everything is checked before anything is written: bad flags and bad files give a one-line
// error and a non-zero exit (2: usage, 1: training failed), never a crash or a half-written
// output (weights are saved atomically).
#ifndef TOWER_TOOLS_TRAIN_COMMAND_H_
#define TOWER_TOOLS_TRAIN_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

namespace tower {

int RunTrainCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tower

#endif  // TOWER_TOOLS_TRAIN_COMMAND_H_
