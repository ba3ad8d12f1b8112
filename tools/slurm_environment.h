// The hosts of a Slurm allocation, from the environment Slurm gives a job (sbatch, salloc,
// srun): SLURM_JOB_NODELIST in Slurm's compact form ("node[01-03,07],gpu5") and
// SLURM_TASKS_PER_NODE ("2(x3),1"). For `tower launch` inside an allocation, where --hosts is
// not given.
#ifndef TOWER_TOOLS_SLURM_ENVIRONMENT_H_
#define TOWER_TOOLS_SLURM_ENVIRONMENT_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "util/statusor.h"

namespace tower {

// Slurm's host list expanded into host names, in Slurm's order (that of `scontrol show
// hostnames`): entries separated by commas; in each, a bracket holds numbers and ranges
// ("[01-03,07]"), each number as wide as the range's first one ("[08-11]" → 08 09 10 11,
// "[8-11]" → 8 9 10 11); several brackets in one entry give their product, the first varying
// slowest ("rack[1-2]-n[1-2]" → rack1-n1 rack1-n2 rack2-n1 rack2-n2). Duplicates are kept.
// InvalidArgument naming the list and the character where it goes wrong: an unclosed, nested
// or stray bracket, an empty entry or bracket, a range that runs backwards, anything but
// digits, '-' and ',' in a bracket, or more than 65536 hosts.
StatusOr<std::vector<std::string>> ExpandSlurmHostList(const std::string& list);

// SLURM_TASKS_PER_NODE expanded, one count per node in node order: "2(x3),1" → 2 2 2 1.
// InvalidArgument, naming the text and the entry, for anything but counts ≥ 1, each with an
// optional repetition "(xN)", N ≥ 1.
StatusOr<std::vector<int>> ExpandSlurmTasksPerNode(const std::string& text);

struct SlurmAllocation {
  std::string job_id;               // SLURM_JOB_ID ("" when unset)
  std::vector<std::string> hosts;   // SLURM_JOB_NODELIST expanded
  std::vector<int> tasks_per_node;  // one per host: SLURM_TASKS_PER_NODE, 1 each when unset
};

// The allocation this process runs in: std::nullopt outside one (SLURM_JOB_NODELIST, or the
// older SLURM_NODELIST, unset or empty). InvalidArgument, naming the variable, when a list
// is malformed or the task counts do not match the hosts one to one. `getenv` reads a
// variable (nullptr when unset); the default reads the process's environment.
StatusOr<std::optional<SlurmAllocation>> HostsFromSlurmEnvironment(
    const std::function<const char*(const char*)>& getenv = nullptr);

}  // namespace tower

#endif  // TOWER_TOOLS_SLURM_ENVIRONMENT_H_
