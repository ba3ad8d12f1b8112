// What the collective tests share: replica names as the strategy makes them, and running one
// body per replica on threads of their own (as MirroredStrategy runs replicas).
#ifndef TOWER_TESTS_TESTING_REPLICA_THREADS_H_
#define TOWER_TESTS_TESTING_REPLICA_THREADS_H_

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "device/device.h"
#include "util/status.h"

namespace tower::testing {

// "replica r (<device's full name>)" for each device.
inline std::vector<std::string> ReplicaNames(const std::vector<Device*>& devices) {
  std::vector<std::string> names;
  for (size_t r = 0; r < devices.size(); ++r) {
    names.push_back("replica " + std::to_string(r) + " (" + devices[r]->full_name() + ")");
  }
  return names;
}

// "replica r" for r < n: names for collectives tested without devices.
inline std::vector<std::string> ReplicaNames(int n) {
  std::vector<std::string> names;
  for (int r = 0; r < n; ++r) names.push_back("replica " + std::to_string(r));
  return names;
}

// Runs `body(i)` for i < n, each on a thread of its own; their statuses, by i.
inline std::vector<Status> OnThreads(int n, const std::function<Status(int)>& body) {
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { results[i] = body(i); });
  for (auto& thread : threads) thread.join();
  return results;
}

}  // namespace tower::testing

#endif  // TOWER_TESTS_TESTING_REPLICA_THREADS_H_
