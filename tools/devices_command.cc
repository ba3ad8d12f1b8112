#include "tools/devices_command.h"

#include <cstdlib>
#include <iomanip>

#include <nlohmann/json.hpp>

#include "device/device_flags.h"
#include "util/flags.h"
#include "util/strings.h"

namespace tower {
namespace {

using Json = nlohmann::ordered_json;

std::string ComputeCapability(const PhysicalDeviceInfo& info) {
  return std::to_string(info.compute_capability_major) + "." +
         std::to_string(info.compute_capability_minor);
}

Json PlatformJson(const Platform& platform) {
  Json json;
  json["device_type"] = platform.device_type();
  json["name"] = platform.name();
  json["version"] = platform.version();
  json["status"] = platform.status().ok() ? "OK" : platform.status().ToString();
  json["devices"] = platform.devices().size();
  return json;
}

Json EnvJson() {
  Json env = Json::object();
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "TF_FORCE_GPU_ALLOW_GROWTH"}) {
    const char* value = std::getenv(name);
    if (value != nullptr) env[name] = value;
  }
  return env;
}

// Everything `tower devices` reports, as JSON; the text form is printed from it too.
Json Describe(Context& context) {
  Json root;
  root["platforms"] = Json::array();
  for (const char* type : {"CPU", "GPU"}) {
    Platform* platform = context.GetPlatform(type);
    if (platform != nullptr) root["platforms"].push_back(PlatformJson(*platform));
  }
  root["environment"] = EnvJson();
  const std::vector<PhysicalDevice> visible = context.GetVisibleDevices();
  root["physical_devices"] = Json::array();
  for (const PhysicalDevice& device : context.ListPhysicalDevices()) {
    StatusOr<PhysicalDeviceInfo> info = context.GetDeviceDetails(device);
    if (!info.ok()) continue;
    Json json;
    json["name"] = device.name;
    json["device_type"] = device.device_type;
    json["model"] = info->model;
    json["cores"] = info->cores;
    json["total_memory_bytes"] = info->total_memory_bytes;
    StatusOr<MemoryInfo> memory = context.QueryMemoryInfo(device);
    if (memory.ok()) json["free_memory_bytes"] = memory->free_bytes;
    if (device.device_type == "GPU") {
      json["uuid"] = info->uuid;
      json["pci_bus_id"] = info->pci_bus_id;
      json["compute_capability"] = ComputeCapability(*info);
      StatusOr<bool> growth = context.GetMemoryGrowth(device);
      if (growth.ok()) json["memory_growth"] = *growth;
    }
    json["visible"] = std::find(visible.begin(), visible.end(), device) != visible.end();
    root["physical_devices"].push_back(json);
  }
  root["logical_devices"] = Json::array();
  StatusOr<std::vector<Device*>> devices = context.Devices();
  if (!devices.ok()) {
    root["error"] = devices.status().ToString();
    return root;
  }
  for (Device* device : *devices) {
    const AllocatorStats stats = device->allocator().GetStats();
    Json json;
    json["name"] = device->full_name();
    json["device_type"] = device->device_type();
    json["physical_device"] = device->physical().name();
    json["memory_limit_bytes"] = device->memory_limit_bytes();
    // A limit equal to the whole physical memory is no limit of the user's.
    json["explicit_limit"] = device->memory_limit_bytes() != device->physical().total_memory_bytes;
    json["memory_growth"] = device->memory_growth();
    json["bytes_reserved"] = stats.bytes_reserved;
    root["logical_devices"].push_back(json);
  }
  // Free memory again, now that logical devices exist (preallocation shows up here).
  for (Json& physical : root["physical_devices"]) {
    StatusOr<MemoryInfo> memory = context.QueryMemoryInfo(
        PhysicalDevice{physical["name"].get<std::string>(),
                       physical["device_type"].get<std::string>()});
    if (memory.ok()) physical["free_memory_bytes"] = memory->free_bytes;
  }
  return root;
}

void PrintText(const Json& root, std::ostream& out) {
  out << "Platforms\n";
  for (const Json& platform : root["platforms"]) {
    out << "  " << platform["device_type"].get<std::string>() << "  "
        << platform["name"].get<std::string>();
    const std::string version = platform["version"].get<std::string>();
    if (!version.empty()) out << ": " << version;
    const std::string status = platform["status"].get<std::string>();
    if (status != "OK") out << " [" << status << "]";
    out << "\n";
  }
  for (const auto& [name, value] : root["environment"].items()) {
    out << "  " << name << "=" << value.get<std::string>() << "\n";
  }
  out << "\nPhysical devices\n";
  for (const Json& device : root["physical_devices"]) {
    out << "  " << device["name"].get<std::string>() << "  " << device["model"].get<std::string>()
        << ", " << HumanBytes(device["total_memory_bytes"].get<uint64_t>());
    if (device.contains("free_memory_bytes")) {
      out << " (" << HumanBytes(device["free_memory_bytes"].get<uint64_t>()) << " free)";
    }
    if (device["device_type"] == "GPU") {
      out << ", compute capability " << device["compute_capability"].get<std::string>() << ", "
          << device["cores"].get<int>() << " SMs, pci " << device["pci_bus_id"].get<std::string>()
          << ", " << device["uuid"].get<std::string>();
    } else {
      out << ", " << device["cores"].get<int>() << " cores";
    }
    if (!device["visible"].get<bool>()) out << "  [hidden]";
    out << "\n";
  }
  out << "\nLogical devices\n";
  for (const Json& device : root["logical_devices"]) {
    const uint64_t limit = device["memory_limit_bytes"].get<uint64_t>();
    out << "  " << device["name"].get<std::string>() << "  on "
        << device["physical_device"].get<std::string>() << ": "
        << (device["explicit_limit"].get<bool>() ? "limit " + HumanBytes(limit)
                                                 : "no limit (" + HumanBytes(limit) + ")")
        << ", "
        << (device["memory_growth"].get<bool>() ? "grows on demand" : "preallocated")
        << ", holds " << HumanBytes(device["bytes_reserved"].get<uint64_t>()) << "\n";
  }
}

}  // namespace

int RunDevicesCommand(const std::vector<std::string>& args, Context& context,
                      std::ostream& out, std::ostream& err) {
  DeviceFlags device_flags;
  bool json = false;
  FlagParser parser("tower devices");
  AddDeviceFlags(&parser, &device_flags);
  parser.AddBool("json", &json, "print JSON instead of text");
  Status status = parser.Parse(args);
  if (!status.ok()) {
    err << "error: " << status.message() << "\n";
    return 2;
  }
  if (parser.help_requested()) {
    out << "Lists the devices Tower can run on, after applying the device flags.\n"
        << parser.Usage();
    return 0;
  }
  status = ApplyDeviceFlags(device_flags, context);
  if (!status.ok()) {
    err << "error: " << status.message() << "\n";
    return 2;
  }
  const Json root = Describe(context);
  if (json) {
    out << root.dump(2) << "\n";
  } else {
    PrintText(root, out);
  }
  if (root.contains("error")) {
    err << "error: " << root["error"].get<std::string>() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace tower
