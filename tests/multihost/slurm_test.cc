// Slurm for real: Debian's slurmctld, slurmd and munged on hosts in network namespaces
// (tests/testing/netns_hosts.h), and the documented sbatch script examples/slurm/train.sbatch
// submitted to them. host1 runs slurmctld (and is where sbatch is called, a login node);
// host2..host4 each run a slurmd of their own name; every host runs munged with one key.
// Needs root and the packages slurmctld, slurmd, slurm-client and munge (./bazelw installs
// them): otherwise every case skips, saying why (with TOWER_REQUIRE_ROOT=1, as in CI, it fails).
//
//   - `sbatch` of the script over 3 and over 2 nodes (mpirun inside the allocation, one
//     worker a node) saves the bytes one device saves with --deterministic;
//   - a node killed mid-job: the job ends, non-zero, naming the node (mpirun's words: it
//     loses its daemon there first); the same script submitted again on the 2 nodes left
//     resumes from the backup (--backup --resume) to the bytes of an uninterrupted run.
//
// Nothing is left: the hosts' teardown kills every process in their namespaces (slurmctld,
// slurmd, slurmstepd, munged, the workers), the test then checks that no process with this
// cluster's SLURM_CONF in its environment is alive, and removes the cluster's directory.
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/env_flag.h"
#include "tests/testing/netns_hosts.h"
#include "tests/testing/tower_cli.h"
#include "util/statusor.h"
#include "util/strings.h"

namespace tower {
namespace {

using testing::BackgroundProgram;
using ::testing::HasSubstr;
using testing::NetnsHosts;
using testing::ProgramOutput;
using testing::ReadBytes;
using testing::RunCommand;
using testing::Runfile;
using testing::TempPath;
using testing::Tower;
using testing::WaitForBackups;
using Clock = std::chrono::steady_clock;

// The daemons these tests run (Debian 12's packages slurmctld, slurmd, slurm-client, munge).
const char* const kPrograms[] = {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged",
                                 "/usr/bin/sbatch",     "/usr/bin/srun",    "/usr/bin/sinfo"};

// 600 rows in batches of 48, as in multihost_test: every epoch ends on a batch of 24.
const char kTrainFlags[] =
    "--data=synthetic:mlp:rows=600:seed=3 --layers=64:relu,1 --global-batch=48 --shuffle "
    "--seed=1 --optimizer=adam --lr=0.001 --deterministic --verbose=1";

bool WriteText(const std::string& path, const std::string& text, mode_t mode = 0644) {
  {
    std::ofstream file(path, std::ios::trunc);
    file << text;
    if (!file.good()) return false;
  }
  return chmod(path.c_str(), mode) == 0;
}

// The last `lines` lines of a file, for failure messages.
std::string Tail(const std::string& path, int lines = 15) {
  return RunCommand("tail -n " + std::to_string(lines) + " " + path + " 2>&1").text;
}

// A Slurm cluster on `hosts`: slurmctld on the first host, a slurmd on each of the others.
// Its files lie in a directory of its own under /tmp (a munge socket's path must stay short:
// TEST_TMPDIR's can exceed the 108 bytes a Unix socket's path may have). Each host sees its
// own subdirectory <dir>/hostK at <dir>/host (a bind mount in the host's mount namespace,
// NetnsHosts::ShowFileOnHost), so one slurm.conf names per-host spool, state, pid, log,
// PMIx and munge socket paths, as separate machines would have them.
class SlurmCluster {
 public:
  static StatusOr<std::unique_ptr<SlurmCluster>> Start(NetnsHosts& hosts);
  // Removes the directory: call it after the hosts' teardown has ended every daemon.
  ~SlurmCluster() { RunCommand("rm -rf " + dir_); }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // A shell command line that runs `command` on the login node (host1) against this cluster;
  // TMPDIR is each node's own directory, and jobs inherit it (sbatch passes the environment).
  std::string OnLoginNode(const std::string& command) const {
    return hosts_.OnHost(hosts_.names()[0], "export SLURM_CONF=" + conf() + " TMPDIR=" + dir_ +
                                                "/host/tmp; " + command);
  }
  std::string conf() const { return dir_ + "/slurm.conf"; }
  // A host's own directory (its daemons' logs: slurmd.log, munged.log, slurmctld.log).
  std::string HostDir(const std::string& host) const { return dir_ + "/" + host; }
  const std::vector<std::string>& nodes() const { return nodes_; }

 private:
  explicit SlurmCluster(NetnsHosts& hosts) : hosts_(hosts) {}
  Status WriteConfiguration() const;
  Status StartDaemons() const;
  // Until every node is idle (30 s at most).
  Status WaitUntilIdle() const;

  NetnsHosts& hosts_;
  std::string dir_;
  std::vector<std::string> nodes_;  // host2.. : the compute nodes
};

StatusOr<std::unique_ptr<SlurmCluster>> SlurmCluster::Start(NetnsHosts& hosts) {
  auto cluster = std::unique_ptr<SlurmCluster>(new SlurmCluster(hosts));
  char dir[] = "/tmp/tower-slurm-XXXXXX";
  if (mkdtemp(dir) == nullptr) return FailedPreconditionError("mkdtemp /tmp/tower-slurm-XXXXXX");
  cluster->dir_ = dir;
  // munged refuses a socket whose directories others cannot traverse.
  chmod(dir, 0755);
  mkdir((cluster->dir_ + "/host").c_str(), 0755);
  mkdir((cluster->dir_ + "/state").c_str(), 0755);
  for (size_t k = 0; k < hosts.names().size(); ++k) {
    const std::string& host = hosts.names()[k];
    const std::string own = cluster->HostDir(host);
    for (const std::string& sub : {own, own + "/spool", own + "/pmix", own + "/tmp"}) {
      if (mkdir(sub.c_str(), 0755) != 0) return FailedPreconditionError("cannot make " + sub);
    }
    TOWER_RETURN_IF_ERROR(hosts.ShowFileOnHost(host, cluster->dir_ + "/host", own));
    if (k > 0) cluster->nodes_.push_back(host);
  }
  TOWER_RETURN_IF_ERROR(cluster->WriteConfiguration());
  TOWER_RETURN_IF_ERROR(cluster->StartDaemons());
  TOWER_RETURN_IF_ERROR(cluster->WaitUntilIdle());
  return cluster;
}

Status SlurmCluster::WriteConfiguration() const {
  const std::string own = dir_ + "/host";  // each host's own directory, as it sees it
  const std::string& controller = hosts_.names()[0];
  std::string nodes;
  for (const std::string& node : nodes_) {
    // host<k> is at 10.231.0.<k> (netns_hosts.h); its slurmd takes its name from its hostname.
    nodes +=
        "NodeName=" + node + " NodeAddr=10.231.0." + node.substr(4) + " CPUs=2 State=UNKNOWN\n";
  }
  std::string node_list;
  for (const std::string& node : nodes_) node_list += (node_list.empty() ? "" : ",") + node;
  const std::vector<std::string> slurm_conf = {
      "# A test cluster (tests/multihost/slurm_test.cc): every path in " + dir_ + ".",
      "ClusterName=tower",
      "SlurmctldHost=" + controller + "(10.231.0.1)",
      "SlurmUser=root",
      "SlurmdUser=root",
      "AuthType=auth/munge",
      "CredType=cred/munge",
      "AuthInfo=socket=" + own + "/munge.socket",
      "StateSaveLocation=" + dir_ + "/state",
      "SlurmctldPidFile=" + own + "/slurmctld.pid",
      "SlurmctldLogFile=" + own + "/slurmctld.log",
      "SlurmdSpoolDir=" + own + "/spool",
      "SlurmdPidFile=" + own + "/slurmd.pid",
      "SlurmdLogFile=" + own + "/slurmd.log",
      // No cgroups: `ip netns exec` mounts a sysfs of its own, without /sys/fs/cgroup.
      "ProctrackType=proctrack/linuxproc",
      "TaskPlugin=task/none",
      "JobAcctGatherType=jobacct_gather/none",
      "SchedulerType=sched/builtin",
      "SelectType=select/cons_tres",
      "SelectTypeParameters=CR_CPU",
      // The configured CPUs, not the machine's (2 cores shared by every host).
      "SlurmdParameters=config_overrides",
      "ReturnToService=2",
      "MpiDefault=none",
      "KillOnBadExit=1",
      // A node whose slurmd is silent for 10 s is DOWN (and its jobs end: NODE_FAIL); srun
      // waits KillWait + 2 s for the tasks of a step being ended (default 30 s).
      "SlurmdTimeout=10",
      "KillWait=5",
      // sbatch -W polls every 2 s while that is under half of MinJobAge, then 8 s, then 32 s
      // (default 300 s: a 6 s job then takes 10 s to be seen ending, a 12 s one 42 s).
      "MinJobAge=4",
      "SlurmctldDebug=info",
      "SlurmdDebug=info",
      nodes + "PartitionName=tower Nodes=" + node_list + " Default=YES MaxTime=INFINITE State=UP",
  };
  // Slurm 22.05's slurmd loads a cgroup plugin even when nothing uses it; naming v1 skips the
  // detection that fails without /sys/fs/cgroup (v1 then loads without touching it).
  const std::string cgroup_conf = "CgroupPlugin=cgroup/v1\n";
  // The PMIx plugin's client directory, per node: by default /tmp, which the hosts share.
  const std::string mpi_conf = "PMIxCliTmpDirBase=" + own + "/pmix\n";
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"slurm.conf", Join(slurm_conf, "\n") + "\n"},
           {"cgroup.conf", cgroup_conf},
           {"mpi.conf", mpi_conf}}) {
    if (!WriteText(dir_ + "/" + name, text)) {
      return FailedPreconditionError("cannot write " + dir_ + "/" + name);
    }
  }
  // One munge key for every host (as a cluster copies /etc/munge/munge.key to each node).
  const ProgramOutput key =
      RunCommand("dd if=/dev/urandom of=" + dir_ + "/munge.key bs=1024 count=1 2>&1 && chmod 400 " +
                 dir_ + "/munge.key");
  if (key.exit_code != 0) return FailedPreconditionError("munge key: " + key.text);
  return OkStatus();
}

Status SlurmCluster::StartDaemons() const {
  const std::string own = dir_ + "/host";
  // SLURM_CONF in every daemon's environment (munged ignores it): what tells this cluster's
  // processes from others' (ProcessesOfCluster).
  const std::string env = "SLURM_CONF=" + conf() + " ";
  // Each daemon forks into the background (writing its pid file) and stays in its host's
  // namespaces, where the hosts' teardown finds it.
  for (const std::string& host : hosts_.names()) {
    const ProgramOutput munge = RunCommand(
        hosts_.OnHost(host, env + "munged --socket=" + own + "/munge.socket --key-file=" + dir_ +
                                "/munge.key --pid-file=" + own + "/munged.pid --log-file=" + own +
                                "/munged.log --seed-file=" + own + "/munged.seed </dev/null"));
    if (munge.exit_code != 0) {
      return FailedPreconditionError("munged on " + host + " failed: " + munge.text +
                                     Tail(HostDir(host) + "/munged.log"));
    }
  }
  const std::string& controller = hosts_.names()[0];
  const ProgramOutput ctld = RunCommand(hosts_.OnHost(controller, env + "slurmctld -i </dev/null"));
  if (ctld.exit_code != 0) {
    return FailedPreconditionError("slurmctld failed: " + ctld.text +
                                   Tail(HostDir(controller) + "/slurmctld.log"));
  }
  for (const std::string& node : nodes_) {
    const ProgramOutput slurmd = RunCommand(hosts_.OnHost(node, env + "slurmd </dev/null"));
    if (slurmd.exit_code != 0) {
      return FailedPreconditionError("slurmd on " + node + " failed: " + slurmd.text +
                                     Tail(HostDir(node) + "/slurmd.log"));
    }
  }
  return OkStatus();
}

Status SlurmCluster::WaitUntilIdle() const {
  const auto start = Clock::now();
  std::string states;
  while (Clock::now() - start < std::chrono::seconds(30)) {
    states = RunCommand(OnLoginNode("sinfo -h -N -o '%N %T'")).text;
    int idle = 0;
    std::istringstream lines(states);
    for (std::string line; std::getline(lines, line);) {
      if (line.size() > 5 && line.compare(line.size() - 5, 5, " idle") == 0) ++idle;
    }
    if (idle == static_cast<int>(nodes_.size())) return OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return DeadlineExceededError("the Slurm nodes were not idle within 30 s: " + states +
                               "\nslurmctld.log:\n" +
                               Tail(HostDir(hosts_.names()[0]) + "/slurmctld.log"));
}

// The processes alive whose environment names `conf` as SLURM_CONF: the daemons, their job
// steps and the workers of this cluster (sbatch passes the environment on).
std::vector<std::string> ProcessesOfCluster(const std::string& conf) {
  std::vector<std::string> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  const std::string wanted = "SLURM_CONF=" + conf;
  while (dirent* entry = readdir(proc)) {
    const std::string pid = entry->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream environ("/proc/" + pid + "/environ");
    bool ours = false;
    for (std::string variable; std::getline(environ, variable, '\0');) {
      if (variable == wanted) ours = true;
    }
    if (!ours) continue;
    std::string command = ReadBytes("/proc/" + pid + "/cmdline");
    for (char& c : command) c = c == '\0' ? ' ' : c;
    found.push_back(pid + " " + command);
  }
  closedir(proc);
  return found;
}

class SlurmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = NetnsHosts::WhyNot();
    for (const char* program : kPrograms) {
      if (why.empty() && access(program, X_OK) != 0) {
        why = std::string(program) + " is missing: install Debian's slurmctld, slurmd, " +
              "slurm-client and munge (./bazelw does, as root)";
      }
    }
    if (!why.empty()) {
      // CI runs as root and sets TOWER_REQUIRE_ROOT=1: there a skip would hide these tests.
      if (testing::EnvFlag("TOWER_REQUIRE_ROOT")) FAIL() << why << " (TOWER_REQUIRE_ROOT=1)";
      GTEST_SKIP() << why;
    }
    const auto start = Clock::now();
    auto hosts = NetnsHosts::Create(4);
    ASSERT_TRUE(hosts.ok()) << hosts.status();
    hosts_ = std::move(*hosts);
    auto cluster = SlurmCluster::Start(*hosts_);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    std::printf("the Slurm cluster was up (3 nodes idle) %.1f s after the start\n",
                std::chrono::duration<double>(Clock::now() - start).count());
  }
  void TearDown() override {
    const std::string conf = cluster_ != nullptr ? cluster_->conf() : "";
    hosts_.reset();
    if (!conf.empty()) {
      for (const std::string& process : ProcessesOfCluster(conf)) {
        ADD_FAILURE() << "process left behind: " << process;
      }
    }
    cluster_.reset();
    for (const std::string& ns : NetnsHosts::NamespacesOfThisProcess()) {
      ADD_FAILURE() << "namespace " << ns << " left behind";
    }
  }

  // sbatch of examples/slurm/train.sbatch on `nodes` nodes with `train_flags`, waiting for the
  // job's end (sbatch -W: its exit code is the job's), bounded in time; the job's output in
  // `log`. The environment, which sbatch passes on to the job, lets mpirun run as root (CI's
  // user) and keeps Open MPI on TCP over the hosts' network.
  ProgramOutput SubmitAndWait(int nodes, const std::string& train_flags,
                              const std::string& log) const {
    return RunCommand(Submission(std::to_string(nodes), train_flags, log));
  }
  // The command line of SubmitAndWait; `options`: sbatch's, before the script.
  std::string Submission(const std::string& options, const std::string& train_flags,
                         const std::string& log) const {
    return (cluster_->OnLoginNode(
        "export TOWER=" + Runfile("tools/tower") +
        " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
        " OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=10.231.0.0/24 "
        "OMPI_MCA_oob_tcp_if_include=10.231.0.0/24; timeout -k 5 120 sbatch -W --nodes=" +
        options + " --output=" + log + " " + Runfile("examples/slurm/train.sbatch") + " " +
        train_flags));
  }

  std::unique_ptr<NetnsHosts> hosts_;
  std::unique_ptr<SlurmCluster> cluster_;
};

TEST_F(SlurmTest, AnSbatchJobOverTwoAndThreeNodesSavesTheBytesOfOneDevice) {
  const std::string train = std::string(kTrainFlags) + " --epochs=3";
  const std::string reference = TempPath("one_device.safetensors");
  const ProgramOutput one = Tower("train " + train + " --save=" + reference);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  const std::string expected = ReadBytes(reference);
  ASSERT_FALSE(expected.empty());
  for (int nodes : {3, 2}) {
    SCOPED_TRACE(std::to_string(nodes) + " nodes");
    const std::string saved = TempPath("nodes" + std::to_string(nodes) + ".safetensors");
    const std::string log = TempPath("nodes" + std::to_string(nodes) + ".log");
    const auto start = Clock::now();
    const ProgramOutput job = SubmitAndWait(nodes, train + " --save=" + saved, log);
    std::printf("sbatch -W of a %d-node job: %.1f s\n", nodes,
                std::chrono::duration<double>(Clock::now() - start).count());
    const std::string text = ReadBytes(log);
    ASSERT_EQ(job.exit_code, 0) << job.text << "\n" << text;
    // One worker on each node, ranks in node order.
    const std::string last = cluster_->nodes()[nodes - 1];
    EXPECT_THAT(
        text, HasSubstr("Worker rank " + std::to_string(nodes - 1) + " (host " + last + ") of " +
                        std::to_string(nodes) + ": " + std::to_string(nodes) + " replicas in sync"))
        << text;
    EXPECT_TRUE(ReadBytes(saved) == expected) << "saved other bytes than one device\n" << text;
  }
}

TEST_F(SlurmTest, ALostNodeEndsTheJobNamingItAndAResubmittedJobResumesToTheSameBytes) {
  // The same command line for both jobs, as a script resubmitted (or requeued) would run it:
  // --resume starts afresh when there is no backup yet.
  const std::string backup = TempPath("lost.backup");
  const std::string saved = TempPath("lost.safetensors");
  const std::string train = std::string(kTrainFlags) + " --epochs=20 --collective-timeout=2" +
                            " --backup=" + backup + " --backup-every=10 --resume";
  const std::string reference = TempPath("uninterrupted.safetensors");
  const ProgramOutput one =
      Tower("train " + std::string(kTrainFlags) + " --epochs=20 --save=" + reference);
  ASSERT_EQ(one.exit_code, 0) << one.text;
  const std::string expected = ReadBytes(reference);
  ASSERT_FALSE(expected.empty());

  const std::string first_log = TempPath("lost_first.log");
  {
    BackgroundProgram job(
        // --no-requeue: a batch job still running when Slurm declares its node DOWN is
        // requeued by default (JobRequeue=1: seen with srun --mpi=pmix, whose step waited for
        // the lost node), and would wait for 3 nodes again; this job is to end.
        BackgroundProgram::ShellCommand{
            Submission("3 --no-requeue", train + " --save=" + saved, first_log)},
        TempPath("lost_sbatch.log"));
    ASSERT_TRUE(job.started());
    ASSERT_TRUE(WaitForBackups(job, backup, 2)) << ReadBytes(first_log);
    const auto at = Clock::now();
    ASSERT_TRUE(hosts_->KillHost("host4").ok());
    const int code = job.Wait();
    std::printf("host4 killed: the job ended %.1f s later (sbatch -W exit %d)\n",
                std::chrono::duration<double>(Clock::now() - at).count(), code);
    const std::string text = ReadBytes(first_log);
    EXPECT_NE(code, 0) << text;
    // The lost node named: mpirun loses its daemon there and ends every worker (before
    // Tower's deadline, which would name rank 2 on host4, runs out).
    EXPECT_THAT(text, HasSubstr("ORTE has lost communication with a remote daemon")) << text;
    EXPECT_THAT(text, HasSubstr("on node host4")) << text;
    EXPECT_FALSE(std::ifstream(saved).good()) << "the lost job saved weights\n" << text;
  }
  // Slurm releases the failed job's nodes once it has ended its steps there; until then a new
  // job waits in the queue (sbatch -W below would only take longer): measured apart.
  const auto ended = Clock::now();
  std::string states;
  while (Clock::now() - ended < std::chrono::seconds(90)) {
    states = RunCommand(cluster_->OnLoginNode("sinfo -h -N -o '%N %T' | tr '\\n' ' '")).text;
    if (states.find("host2 idle") != std::string::npos &&
        states.find("host3 idle") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::printf("host2 and host3 idle again %.1f s after the job ended (%s)\n",
              std::chrono::duration<double>(Clock::now() - ended).count(), states.c_str());
  // Resubmitted on the 2 nodes left: it resumes from the backup.
  const std::string second_log = TempPath("lost_second.log");
  const auto start = Clock::now();
  const ProgramOutput second = SubmitAndWait(2, train + " --save=" + saved, second_log);
  std::printf("the resubmitted job took %.1f s\n",
              std::chrono::duration<double>(Clock::now() - start).count());
  const std::string text = ReadBytes(second_log);
  ASSERT_EQ(second.exit_code, 0) << second.text << "\n" << text;
  EXPECT_THAT(text, HasSubstr("Resuming from " + backup)) << text;
  EXPECT_THAT(text, HasSubstr("Worker rank 1 (host host3) of 2")) << text;
  EXPECT_TRUE(ReadBytes(saved) == expected) << "the resumed job saved other bytes\n" << text;
}

}  // namespace
}  // namespace tower
