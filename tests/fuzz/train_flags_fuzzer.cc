// Fuzzes `tower train` flag parsing (tools/train_command.h, util/flags.h). One argument per
// input line. The real command runs with `--help` appended, which makes it parse its flags
// and stop; a FlagParser built from its usage text (tests/fuzz/train_flags.h) parses the
// same arguments so that the values can be checked. Then the checks the command makes on
// those values before training that live below tools/ run too: synthetic data specs, device
// names, device flags and replicas on a fresh Context with and without fake GPUs.
//
// Invariants:
//  - the real command and the parser built from its usage agree: both accept (exit 0, the
//    usage on stdout, nothing on stderr) or both reject with the same one-line message
//    (exit 2, "error: <message>" on stderr, nothing on stdout);
//  - a rejected command line leaves every flag at its default and none marked as set; the
//    error is InvalidArgument and names the program or the flag;
//  - an accepted one sets exactly the flags it names (WasSet), to the values given; an
//    integer's text is a plain decimal ([-]digits), a number's has no leading space;
//  - printing the accepted values back as --name=value and parsing that gives the same
//    values (doubles bit for bit);
//  - --help anywhere sets help_requested();
//  - a synthetic spec that parses prints back to one that parses the same; ConfigureReplicaDevices
//    returns one device per replica, each a valid device name.
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data/synthetic.h"
#include "device/device_name.h"
#include "device/testing/fake_gpu_platform.h"
#include "tests/fuzz/train_flags.h"
#include "device/device_flags.h"
#include "strategy/replica_devices.h"
#include "tools/train_command.h"
#include "util/check.h"
#include "util/strings.h"

namespace {

using tower::Status;
using tower::fuzz::FlagSpec;
using tower::fuzz::TrainFlags;

const std::vector<FlagSpec>& Specs() {
  static const std::vector<FlagSpec>* specs = [] {
    tower::StatusOr<std::vector<FlagSpec>> read = tower::fuzz::TrainFlagSpecs();
    TOWER_CHECK(read.ok()) << read.status().ToString();
    // The parser built from the usage prints the same usage.
    TrainFlags flags(*read);
    std::ostringstream out, err;
    TOWER_CHECK(tower::RunTrainCommand({"--help"}, out, err) == 0);
    TOWER_CHECK(out.str() == "Trains a dense network.\n" + flags.parser().Usage())
        << out.str() << "\nvs\n" << flags.parser().Usage();
    return new std::vector<FlagSpec>(std::move(*read));
  }();
  return *specs;
}

bool IsPlainInteger(const std::string& text) {
  size_t i = text.size() > 1 && text[0] == '-' ? 1 : 0;
  if (i == text.size()) return false;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  return true;
}

// "--name=value" -> name, value; "--name" -> name, "" (has_value false).
struct Arg {
  std::string name;
  std::string value;
  bool has_value = false;
};
Arg SplitArg(const std::string& arg) {
  Arg out;
  const size_t equals = arg.find('=');
  out.name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
  if (equals != std::string::npos) {
    out.value = arg.substr(equals + 1);
    out.has_value = true;
  }
  return out;
}

void CheckError(const Status& status) {
  TOWER_CHECK(!status.ok());
  TOWER_CHECK(!status.message().empty());
  TOWER_CHECK(status.message().find('\n') == std::string::npos) << status.message();
  TOWER_CHECK(status.code() != tower::StatusCode::kInternal &&
              status.code() != tower::StatusCode::kUnknown)
      << status.ToString();
}

// The values of the flags DeviceFlags holds, by name (defaults for any the command lacks).
tower::DeviceFlags DeviceFlagsOf(const TrainFlags& flags) {
  tower::DeviceFlags device;
  auto str = [&](const char* name, std::string* out) {
    const int i = flags.Find(name);
    if (i >= 0 && flags.specs()[i].kind == FlagSpec::kString) *out = flags.string_value(i);
  };
  auto num = [&](const char* name, int64_t* out) {
    const int i = flags.Find(name);
    if (i >= 0 && flags.specs()[i].kind == FlagSpec::kInt) *out = flags.int_value(i);
  };
  str("visible-gpus", &device.visible_gpus);
  num("virtual-gpus", &device.virtual_gpus);
  num("memory-limit", &device.memory_limit_mb);
  str("memory-growth", &device.memory_growth);
  const int fraction = flags.Find("memory-fraction");
  if (fraction >= 0 && flags.specs()[fraction].kind == FlagSpec::kDouble) {
    device.memory_fraction = flags.double_value(fraction);
  }
  num("virtual-cpus", &device.virtual_cpus);
  num("cpu-memory-limit", &device.cpu_memory_limit_mb);
  num("intra-op-threads", &device.intra_op_threads);
  num("inter-op-threads", &device.inter_op_threads);
  return device;
}

// The checks RunTrainCommand makes before it trains, for those that live below tools/.
void CheckDownstream(const TrainFlags& flags) {
  const int data = flags.Find("data");
  if (data >= 0 && tower::StartsWith(flags.string_value(data), "synthetic:")) {
    const std::string& text = flags.string_value(data);
    tower::StatusOr<tower::data::SyntheticOptions> spec = tower::data::ParseSyntheticSpec(text);
    if (spec.ok()) {
      const std::string again_text = "synthetic:" + spec->name + ":rows=" +
                                     std::to_string(spec->rows) +
                                     ":seed=" + std::to_string(spec->seed);
      tower::StatusOr<tower::data::SyntheticOptions> again =
          tower::data::ParseSyntheticSpec(again_text);
      TOWER_CHECK(again.ok()) << again_text << ": " << again.status().ToString();
      TOWER_CHECK(again->name == spec->name && again->rows == spec->rows &&
                  again->seed == spec->seed)
          << text << " vs " << again_text;
    } else {
      CheckError(spec.status());
      TOWER_CHECK(spec.status().code() == tower::StatusCode::kInvalidArgument);
    }
  }
  const int devices = flags.Find("devices");
  if (devices >= 0 && !flags.string_value(devices).empty()) {
    for (const std::string& device : tower::Split(flags.string_value(devices), ',')) {
      tower::StatusOr<tower::DeviceName> name = tower::DeviceName::Parse(device);
      if (!name.ok()) CheckError(name.status());
    }
  }
  // Device flags and replicas on a fresh context: CPU only, then two fake GPUs.
  const tower::DeviceFlags device = DeviceFlagsOf(flags);
  const int replicas_index = flags.Find("replicas");
  const int64_t replicas = replicas_index >= 0 ? flags.int_value(replicas_index) : 1;
  for (int gpus = 0; gpus <= 2; gpus += 2) {
    std::unique_ptr<tower::Context> context = tower::testing::MakeContextWithFakeGpus(
        std::vector<tower::testing::FakeGpuSpec>(gpus, tower::testing::FakeGpuSpec{}));
    Status status = tower::ApplyDeviceFlags(device, *context);
    if (!status.ok()) {
      CheckError(status);
      continue;
    }
    tower::StatusOr<std::vector<std::string>> names =
        tower::ConfigureReplicaDevices(replicas, device, *context);
    if (!names.ok()) {
      CheckError(names.status());
      continue;
    }
    TOWER_CHECK(replicas >= 1);
    TOWER_CHECK(names->size() == (replicas == 1 ? 0u : static_cast<size_t>(replicas)));
    for (const std::string& name : *names) {
      tower::StatusOr<tower::DeviceName> parsed = tower::DeviceName::Parse(name);
      TOWER_CHECK(parsed.ok() && parsed->has_device()) << name;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> args = tower::fuzz::SplitArgs(data, size);
  const std::vector<FlagSpec>& specs = Specs();

  TrainFlags defaults(specs);  // never parsed into
  TrainFlags flags(specs);
  const Status status = flags.parser().Parse(args);

  // The real command agrees.
  {
    std::vector<std::string> with_help = args;
    with_help.push_back("--help");
    std::ostringstream out, err;
    const int rc = tower::RunTrainCommand(with_help, out, err);
    if (status.ok()) {
      TOWER_CHECK(rc == 0 && err.str().empty()) << "tower train rejects what its flag set "
                                                << "accepts: exit " << rc << ": " << err.str();
      TOWER_CHECK(out.str() == "Trains a dense network.\n" + flags.parser().Usage());
    } else {
      TOWER_CHECK(rc == 2) << "tower train accepts what its flag set rejects: "
                           << status.message();
      TOWER_CHECK(err.str() == "error: " + status.message() + "\n") << err.str();
      TOWER_CHECK(out.str().empty()) << out.str();
    }
  }

  bool asks_help = false;
  for (const std::string& arg : args) {
    if (!tower::StartsWith(arg, "--")) continue;
    const std::string name = SplitArg(arg).name;
    asks_help |= name == "help" || name == "h";
  }

  if (!status.ok()) {
    CheckError(status);
    TOWER_CHECK(status.code() == tower::StatusCode::kInvalidArgument) << status.ToString();
    TOWER_CHECK(tower::StartsWith(status.message(), "tower train: ") ||
                tower::StartsWith(status.message(), "--"))
        << status.message();
    for (size_t i = 0; i < flags.size(); ++i) {
      TOWER_CHECK(flags.SameValue(i, defaults))
          << "--" << specs[i].name << " changed by a rejected command line";
      TOWER_CHECK(!flags.parser().WasSet(specs[i].name)) << specs[i].name;
    }
    return 0;
  }

  // Accepted: every argument is a known flag, given once, whose target now holds its value.
  TOWER_CHECK(flags.parser().help_requested() == asks_help);
  std::vector<std::string> named;
  for (const std::string& arg : args) {
    TOWER_CHECK(tower::StartsWith(arg, "--")) << "positional argument accepted: " << arg;
    const Arg a = SplitArg(arg);
    if (a.name == "help" || a.name == "h") continue;
    named.push_back(a.name);
    const int i = flags.Find(a.name);
    TOWER_CHECK(i >= 0) << "unknown flag accepted: " << arg;
    TOWER_CHECK(flags.parser().WasSet(a.name)) << a.name;
    switch (specs[i].kind) {
      case FlagSpec::kInt:
        TOWER_CHECK(a.has_value && IsPlainInteger(a.value)) << "integer flag took '" << arg << "'";
        break;
      case FlagSpec::kDouble:
        TOWER_CHECK(a.has_value && !a.value.empty() &&
                    !std::isspace(static_cast<unsigned char>(a.value[0])))
            << "number flag took '" << arg << "'";
        TOWER_CHECK(std::isfinite(flags.double_value(i))) << arg;
        break;
      case FlagSpec::kString:
        TOWER_CHECK(a.has_value && flags.string_value(i) == a.value) << arg;
        break;
      case FlagSpec::kBool: {
        const std::string lower = tower::ToLower(a.value);
        const bool expected = !a.has_value || lower == "true" || lower == "1";
        TOWER_CHECK(flags.bool_value(i) == expected) << arg;
        break;
      }
    }
  }
  for (size_t i = 0; i < flags.size(); ++i) {
    bool given = false;
    for (const std::string& name : named) given |= name == specs[i].name;
    TOWER_CHECK(given == flags.parser().WasSet(specs[i].name)) << specs[i].name;
    if (!given) {
      TOWER_CHECK(flags.SameValue(i, defaults))
          << "--" << specs[i].name << " changed without being given";
    }
  }

  // Print the values back and parse them: the same values.
  std::vector<std::string> printed;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags.parser().WasSet(specs[i].name)) {
      printed.push_back("--" + specs[i].name + "=" + flags.ValueText(i));
    }
  }
  TrainFlags again(specs);
  const Status again_status = again.parser().Parse(printed);
  TOWER_CHECK(again_status.ok()) << again_status.ToString();
  for (size_t i = 0; i < flags.size(); ++i) {
    TOWER_CHECK(flags.SameValue(i, again))
        << "--" << specs[i].name << ": " << flags.ValueText(i) << " reparsed as "
        << again.ValueText(i);
  }

  CheckDownstream(flags);
  return 0;
}
