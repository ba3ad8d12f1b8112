// tower: the command-line tool.
//   tower devices [flags]   what this process can run on (see `tower devices --help`)
//   tower train [flags]     train a dense network (see `tower train --help`)
//   tower evaluate [flags]  loss and metrics of a saved model on a CSV file
//   tower predict [flags]   predictions of a saved model for a CSV file
//   tower launch [flags] -- train [flags]
//                           train over several hosts with mpirun, relaunching on the rest
//                           when a host is lost
//   tower doctor DIR        who diverged or stalled, from every worker's flight recorder file
#include <iostream>
#include <string>
#include <vector>

#include "device/context.h"
#include "tools/devices_command.h"
#include "tools/doctor_command.h"
#include "tools/launch_command.h"
#include "tools/model_commands.h"
#include "tools/train_command.h"

namespace {

constexpr char kUsage[] =
    "usage: tower <command> [flags]\n"
    "commands:\n"
    "  devices   list platforms, physical and logical devices (--json for scripts)\n"
    "  train     train a dense network on a CSV file or synthetic data\n"
    "  evaluate  the loss and metrics of a model saved by train, on a CSV file\n"
    "  predict   a model's predictions for a CSV file, written as CSV\n"
    "  launch    train over several hosts with mpirun; a lost host is dropped and the job\n"
    "            resumed on the rest from its backup\n"
    "  doctor    after a failed or stuck multi-worker run: which worker went astray, from the\n"
    "            flight recorder files (--flight-recorder=DIR) of every worker\n"
    "run `tower <command> --help` for a command's flags\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (command == "devices") {
    return tower::RunDevicesCommand(args, tower::Context::Global(), std::cout, std::cerr);
  }
  if (command == "train") return tower::RunTrainCommand(args, std::cout, std::cerr);
  if (command == "evaluate") return tower::RunEvaluateCommand(args, std::cout, std::cerr);
  if (command == "predict") return tower::RunPredictCommand(args, std::cout, std::cerr);
  if (command == "launch") return tower::RunLaunchCommand(args, std::cout, std::cerr);
  if (command == "doctor") return tower::RunDoctorCommand(args, std::cout, std::cerr);
  std::cerr << "error: unknown command '" << command << "'\n" << kUsage;
  return 2;
}
