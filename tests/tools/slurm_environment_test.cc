// Slurm's compact host lists and task counts (tools/slurm_environment.h): closed-form cases,
// the expected lists being those `scontrol show hostnames` printed for the same input (Slurm
// 22.05.8, 2026-11-29), and malformed input refused with the variable, the list and the place.
#include "tools/slurm_environment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace tower {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Expand(const std::string& list) {
  StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostList(list);
  EXPECT_TRUE(hosts.ok()) << list << ": " << hosts.status();
  return hosts.ok() ? *hosts : std::vector<std::string>{};
}

std::string ErrorOf(const std::string& list) {
  StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostList(list);
  EXPECT_FALSE(hosts.ok()) << list << " was accepted";
  if (hosts.ok()) return "";
  EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument) << hosts.status();
  return hosts.status().message();
}

TEST(SlurmHostListTest, ExpandsNamesRangesPaddingAndProductsInSlurmsOrder) {
  EXPECT_THAT(Expand("node[01-03,07],gpu5,rack[1-2]-n[1-2]"),
              ElementsAre("node01", "node02", "node03", "node07", "gpu5", "rack1-n1", "rack1-n2",
                          "rack2-n1", "rack2-n2"));
  EXPECT_THAT(Expand("host1"), ElementsAre("host1"));
  // Each number as wide as the range's first one.
  EXPECT_THAT(Expand("n[8-11]"), ElementsAre("n8", "n9", "n10", "n11"));
  EXPECT_THAT(Expand("n[08-11]"), ElementsAre("n08", "n09", "n10", "n11"));
  EXPECT_THAT(Expand("n[001-3]"), ElementsAre("n001", "n002", "n003"));
  EXPECT_THAT(Expand("n[5]"), ElementsAre("n5"));
  // Duplicates kept, as Slurm keeps them.
  EXPECT_THAT(Expand("n[1-2],n1"), ElementsAre("n1", "n2", "n1"));
  EXPECT_EQ(Expand("c[0-99]").size(), 100u);
  EXPECT_EQ(Expand("c[0-99]").back(), "c99");
  EXPECT_EQ(Expand("r[1-4]-c[01-16]-g[0-1]").size(), 4u * 16 * 2);
  EXPECT_EQ(Expand("r[1-4]-c[01-16]-g[0-1]")[33], "r2-c01-g1");
}

TEST(SlurmHostListTest, RefusesMalformedListsNamingTheListAndThePlace) {
  EXPECT_THAT(ErrorOf("node[01-03"), HasSubstr("Slurm host list 'node[01-03': a '[' never "
                                               "closed at character 5"));
  EXPECT_THAT(ErrorOf("node[3-1]"), HasSubstr("the range '3-1' runs backwards at character 6"));
  EXPECT_THAT(ErrorOf("node[]"), HasSubstr("'' is not a number or a range of numbers"));
  EXPECT_THAT(ErrorOf("node[1-]"), HasSubstr("'1-' is not a number"));
  EXPECT_THAT(ErrorOf("node[a-b]"), HasSubstr("'a-b' is not a number"));
  EXPECT_THAT(ErrorOf("node[1,,2]"), HasSubstr("'' is not a number or a range of numbers at "
                                               "character 8"));
  EXPECT_THAT(ErrorOf("node[1-2[3]]"), HasSubstr("a '[' inside brackets at character 9"));
  EXPECT_THAT(ErrorOf("x]"), HasSubstr("a ']' without its '[' at character 2"));
  EXPECT_THAT(ErrorOf("a,,b"), HasSubstr("an empty host name at character 3"));
  EXPECT_THAT(ErrorOf("a,"), HasSubstr("an empty host name at character 3"));
  EXPECT_THAT(ErrorOf(""), HasSubstr("no host"));
  EXPECT_THAT(ErrorOf("a b"), HasSubstr("a space at character 2"));
  EXPECT_THAT(ErrorOf("n[1-99999999]"), HasSubstr("more than 65536 hosts"));
  EXPECT_THAT(ErrorOf("a[1-300]b[1-300]"), HasSubstr("more than 65536 hosts"));
  EXPECT_THAT(ErrorOf("n[1-2"), HasSubstr("expected names and brackets such as "
                                          "node[01-03,07],gpu5"));
}

TEST(SlurmTasksPerNodeTest, ExpandsCountsAndRepetitions) {
  StatusOr<std::vector<int>> tasks = ExpandSlurmTasksPerNode("2(x3),1");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_THAT(*tasks, ElementsAre(2, 2, 2, 1));
  tasks = ExpandSlurmTasksPerNode("4");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_THAT(*tasks, ElementsAre(4));
  tasks = ExpandSlurmTasksPerNode("1,3(x2),12");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_THAT(*tasks, ElementsAre(1, 3, 3, 12));
  for (const std::string bad :
       {"", "0", "2(x0)", "2(x3", "2x3", "2(3)", "a", "1,,2", "1,", "-1", "2(x3)1"}) {
    StatusOr<std::vector<int>> refused = ExpandSlurmTasksPerNode(bad);
    ASSERT_FALSE(refused.ok()) << "'" << bad << "' was accepted";
    EXPECT_THAT(refused.status().message(),
                HasSubstr("Slurm tasks per node '" + bad + "': entry '"))
        << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("as in 2(x3),1")) << refused.status();
  }
}

// A made-up environment.
std::function<const char*(const char*)> Environment(
    const std::map<std::string, std::string>& variables) {
  return [variables](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found != variables.end() ? found->second.c_str() : nullptr;
  };
}

TEST(HostsFromSlurmEnvironmentTest, TheAllocationsHostsAndTasks) {
  const std::map<std::string, std::string> inside = {{"SLURM_JOB_ID", "42"},
                                                     {"SLURM_JOB_NODELIST", "node[01-03],gpu5"},
                                                     {"SLURM_TASKS_PER_NODE", "2(x3),1"}};
  auto allocation = HostsFromSlurmEnvironment(Environment(inside));
  ASSERT_TRUE(allocation.ok()) << allocation.status();
  ASSERT_TRUE(allocation->has_value());
  EXPECT_EQ((*allocation)->job_id, "42");
  EXPECT_THAT((*allocation)->hosts, ElementsAre("node01", "node02", "node03", "gpu5"));
  EXPECT_THAT((*allocation)->tasks_per_node, ElementsAre(2, 2, 2, 1));
  // The older variable, and no task counts: one task a host.
  allocation = HostsFromSlurmEnvironment(Environment({{"SLURM_NODELIST", "n[1-2]"}}));
  ASSERT_TRUE(allocation.ok()) << allocation.status();
  ASSERT_TRUE(allocation->has_value());
  EXPECT_THAT((*allocation)->hosts, ElementsAre("n1", "n2"));
  EXPECT_THAT((*allocation)->tasks_per_node, ElementsAre(1, 1));
  // Outside an allocation: none, and no error.
  allocation = HostsFromSlurmEnvironment(Environment({{"SLURM_TASKS_PER_NODE", "1"}}));
  ASSERT_TRUE(allocation.ok()) << allocation.status();
  EXPECT_FALSE(allocation->has_value());
}

TEST(HostsFromSlurmEnvironmentTest, MalformedVariablesAreNamed) {
  auto bad_list = HostsFromSlurmEnvironment(Environment({{"SLURM_JOB_NODELIST", "n[1-2"}}));
  ASSERT_FALSE(bad_list.ok());
  EXPECT_THAT(bad_list.status().message(),
              HasSubstr("SLURM_JOB_NODELIST: Slurm host list 'n[1-2': a '[' never closed"));
  auto bad_tasks = HostsFromSlurmEnvironment(
      Environment({{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "2(x"}}));
  ASSERT_FALSE(bad_tasks.ok());
  EXPECT_THAT(bad_tasks.status().message(),
              HasSubstr("SLURM_TASKS_PER_NODE: Slurm tasks per node '2(x'"));
  auto mismatch = HostsFromSlurmEnvironment(
      Environment({{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}}));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_THAT(mismatch.status().message(),
              HasSubstr("SLURM_TASKS_PER_NODE='2(x2)' gives 2 task counts for the 3 hosts of "
                        "SLURM_JOB_NODELIST='n[1-3]': one count per host expected"));
}

}  // namespace
}  // namespace tower
