// `tower launch`'s supervision, against a stand-in for mpirun (a script that prints what
// workers would print and records how it was called): which hosts it relaunches on, when it
// gives up, and its bad flags. The real thing, mpirun over hosts in network namespaces, is
// tests/multihost.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/testing/tower_cli.h"

namespace tower {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProgramOutput;
using testing::ReadLines;
using testing::TempPath;
using testing::Tower;

// A stand-in for mpirun: appends its arguments to calls.txt, then plays the scene its host
// list (-H) selects from scenes.txt ("<hosts> <scene>"; the first match): `ok` (every rank
// starts and finishes), `lose-R:NAME[,R:NAME...]` (every rank starts, rank 0 reports ranks R
// unreachable on hosts that call themselves NAME, then it hangs until killed), `no-start` (exits at
// once, printing Open MPI's daemon error), `hang` (prints nothing, hangs), `error` (every rank
// starts, one prints Tower's error line), `down-then-up` (the first call fails as ssh does on a
// host it cannot reach, later ones succeed: a probe of a host that comes back).
class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath("launch_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    mkdir(dir_.c_str(), 0755);
    mpirun_ = dir_ + "/mpirun";
    std::ofstream script(mpirun_);
    script
        << "#!/bin/sh\n"
           "echo \"$*\" >> "
        << dir_
        << "/calls.txt\n"
           "hosts=''; np=0; prev=''\n"
           "for a in \"$@\"; do\n"
           "  [ \"$prev\" = -H ] && hosts=\"$a\"\n"
           "  [ \"$prev\" = -np ] && np=\"$a\"\n"
           "  prev=\"$a\"\n"
           "done\n"
           "scene=$(awk -v h=\"$hosts\" '$1 == h {print $2; exit}' "
        << dir_
        << "/scenes.txt)\n"
           "started() { r=0; while [ $r -lt $np ]; do echo \"tower-worker: started: rank $r of "
           "$np\"; r=$((r+1)); done; }\n"
           "case \"$scene\" in\n"
           "  ok) started; r=0; while [ $r -lt $np ]; do echo \"[rank $r] tower-worker: finished: "
           "rank $r of $np\"; r=$((r+1)); done ;;\n"
           "  lose-*) started; lost=$(echo \"${scene#lose-}\" | sed "
           "'s/\\([0-9]*\\):\\([^,]*\\)/rank \\1 on \\2/g; s/,/, /g')\n"
           "          echo \"error: $lost never reached collective 7\";\n"
           "          echo \"[rank 0] tower-worker: unreachable: $lost\"; exec sleep 600 ;;\n"
           "  no-start) echo 'ORTE was unable to reliably start one or more daemons.'; exit 1 ;;\n"
           "  hang) exec sleep 600 ;;\n"
           "  error) started; echo 'error: --data=x.csv: no such file'; exit 0 ;;\n"
           "  down-then-up) [ -e \"$0.up.$hosts\" ] && exit 0; touch \"$0.up.$hosts\"\n"
           "          echo 'ssh: connect to host x port 22: No route to host'; exit 255 ;;\n"
           "  *) echo \"stand-in mpirun: no scene for $hosts\"; exit 3 ;;\n"
           "esac\n";
    script.close();
    chmod(mpirun_.c_str(), 0755);
  }
  void Scenes(const std::string& text) { std::ofstream(dir_ + "/scenes.txt") << text; }
  ProgramOutput Launch(const std::string& flags, const std::string& train = kTrain) {
    const std::string grace = flags.find("--grace") == std::string::npos ? " --grace=0.2" : "";
    return Tower("launch --mpirun=" + mpirun_ + grace + " " + flags + " -- " + train);
  }
  std::vector<std::string> Calls() { return ReadLines(dir_ + "/calls.txt"); }

  static constexpr const char* kTrain = "train --data=d.csv --backup=/shared/run.backup";
  std::string dir_, mpirun_;
};

TEST_F(LaunchTest, ALostHostIsDroppedAndTheJobRelaunchedOnTheRestWithResume) {
  // Ranks 4 and 5 are on host3 (2 a host, in -H order); their worker calls its host "vm".
  Scenes("host1:2,host2:2,host3:2 lose-5:vm,4:vm\nhost1:2,host2:2 ok\n");
  const ProgramOutput out = Launch("--hosts=host1,host2,host3 --workers-per-host=2");
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("tower launch: lost host3, where rank 5 (host vm), rank 4 (host "
                                  "vm) were placed (reported unreachable by the workers)"));
  EXPECT_THAT(out.text, HasSubstr("still running 0.2 s after a host was reported lost: ending it"));
  EXPECT_THAT(out.text, HasSubstr("relaunching on host1, host2 from the backup (restart 1 of at most 3)"));
  EXPECT_THAT(out.text, HasSubstr("tower launch: done on 2 hosts (host1, host2) after 1 restart"));
  const std::vector<std::string> calls = Calls();
  ASSERT_EQ(calls.size(), 2u) << out.text;
  EXPECT_THAT(calls[0],
              HasSubstr("-H host1:2,host2:2,host3:2 -np 6 --map-by slot --enable-recovery"));
  EXPECT_THAT(calls[1], HasSubstr("-H host1:2,host2:2 -np 4 --map-by slot --enable-recovery"));
  for (const std::string& call : calls) {
    EXPECT_THAT(call, HasSubstr("-x TOWER_WORKER_REPORTS=1"));
    EXPECT_THAT(call, HasSubstr(" train --data=d.csv --backup=/shared/run.backup --resume"));
  }
}

// A lost rank is mapped to the --hosts entry it was placed on, however the hosts are written;
// the host name the worker reports is shown, never matched. 203.0.113.0/24 is TEST-NET-3, for
// documentation: this machine has none of them (the build machine uses TEST-NET-1's
// 192.0.2.2, which would come first as this machine's).
TEST_F(LaunchTest, ALostRankIsMappedToItsHostByPlacementWhateverTheNames) {
  const struct {
    std::string name, hosts, flags, scenes, lost, rest;
  } cases[] = {
      {"addresses", "203.0.113.1,203.0.113.2,203.0.113.3", "",
       "203.0.113.1:1,203.0.113.2:1,203.0.113.3:1 lose-1:node2\n203.0.113.1:1,203.0.113.3:1 ok\n",
       "lost 203.0.113.2, where rank 1 (host node2) was placed", "203.0.113.1, 203.0.113.3"},
      {"names the workers do not use", "host1,host2,host3", "",
       "host1:1,host2:1,host3:1 lose-2:vm\nhost1:1,host2:1 ok\n",
       "lost host3, where rank 2 (host vm) was placed", "host1, host2"},
      {"a worker naming another listed host", "a.cluster,b.cluster,c", "",
       "a.cluster:1,b.cluster:1,c:1 lose-1:c\na.cluster:1,c:1 ok\n",
       "lost b.cluster, where rank 1 (host c) was placed", "a.cluster, c"},
      {"mixed, 2 workers a host", "node1,203.0.113.2,node3.cluster", "--workers-per-host=2",
       "node1:2,203.0.113.2:2,node3.cluster:2 lose-3:x,4:y\nnode1:2 ok\n",
       "lost 203.0.113.2, where rank 3 (host x) was placed; node3.cluster, where rank 4 (host y) "
       "was placed",
       "node1"},
      {"3 workers a host, the last rank", "203.0.113.1,nodeB", "--workers-per-host=3",
       "203.0.113.1:3,nodeB:3 lose-5:nodeB.example\n203.0.113.1:3 ok\n",
       "lost nodeB, where rank 5 (host nodeB.example) was placed", "203.0.113.1"},
  };
  for (const auto& c : cases) {
    Scenes(c.scenes);
    const ProgramOutput out = Launch("--hosts=" + c.hosts + " " + c.flags);
    EXPECT_EQ(out.exit_code, 0) << c.name << "\n" << out.text;
    EXPECT_THAT(out.text, HasSubstr("tower launch: " + c.lost + " (reported unreachable"))
        << c.name;
    EXPECT_THAT(out.text, HasSubstr("relaunching on " + c.rest + " from the backup")) << c.name;
  }
}

TEST_F(LaunchTest, ThisMachinesEntryComesFirstWhereMpirunPlacesItsFirstRanks) {
  // mpirun puts its first ranks on its own host whatever -H says: tower launch orders -H so.
  Scenes("127.0.0.1:1,203.0.113.1:1,203.0.113.2:1 lose-2:a\n127.0.0.1:1,203.0.113.1:1 ok\n");
  ProgramOutput out = Launch("--hosts=203.0.113.1,203.0.113.2,127.0.0.1");
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("tower launch: 127.0.0.1 is this machine, where mpirun runs: "
                                  "it comes first"));
  EXPECT_THAT(out.text, HasSubstr("lost 203.0.113.2, where rank 2 (host a) was placed"));
  // This machine is never dropped.
  Scenes("localhost:1,203.0.113.1:1 lose-0:vm\n");
  out = Launch("--hosts=localhost,203.0.113.1");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("workers report rank 0 (host vm) unreachable, placed on "
                                  "localhost, this machine: it runs mpirun"));
}

TEST_F(LaunchTest, ItGivesUpBelowMinHostsAndAfterMaxRestarts) {
  Scenes("host1:1,host2:1,host3:1 lose-2:host3\nhost1:1,host2:1 lose-1:host2\n");
  ProgramOutput out = Launch("--hosts=host1,host2,host3 --min-hosts=2");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("1 host would remain (host1), fewer than --min-hosts=2; giving up"));
  // host3, dropped at the first relaunch, was probed before the second, and did not answer.
  EXPECT_THAT(out.text, HasSubstr("host3 is still unreachable (mpirun exited 3: stand-in mpirun: "
                                  "no scene for host3:1): not re-admitted"));
  EXPECT_EQ(Calls().size(), 3u);
  out = Launch("--hosts=host1,host2,host3 --max-restarts=0");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("--max-restarts=0 reached; giving up"));
}

// A host dropped at one relaunch is probed before the next (mpirun runs `true` on it alone) and,
// answering, takes its place back in -H; the host lost just before is not probed. The hosts
// it brings back count towards --min-hosts (without it 2 hosts would remain, fewer than 3),
// and --max-restarts still bounds the relaunches.
TEST_F(LaunchTest, ADroppedHostThatAnswersAgainIsReadmittedInItsPlace) {
  const std::string scenes =
      "host1:1,host2:1,host3:1,host4:1 lose-1:host2\nhost1:1,host3:1,host4:1 lose-2:host4\n"
      "host2:1 ok\n";
  Scenes(scenes + "host1:1,host2:1,host3:1 ok\n");
  ProgramOutput out = Launch("--hosts=host1,host2,host3,host4 --min-hosts=3");
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("tower launch: probing host2 (dropped before): mpirun runs "
                                  "`true` there, within 10 s"));
  EXPECT_THAT(out.text, HasSubstr("tower launch: re-admitting host2: it answers again (mpirun ran "
                                  "`true` there in "));
  EXPECT_THAT(out.text, HasSubstr("relaunching on host1, host2, host3 from the backup (restart 2 "
                                  "of at most 3)"));
  EXPECT_THAT(out.text, HasSubstr("tower launch: done on 3 hosts (host1, host2, host3) after 2 "
                                  "restarts"));
  std::vector<std::string> calls = Calls();
  ASSERT_EQ(calls.size(), 4u) << out.text;
  EXPECT_THAT(calls[2], HasSubstr(" -H host2:1 -np 1 "));
  EXPECT_THAT(calls[2], ::testing::EndsWith(" true"));
  EXPECT_THAT(calls[3], HasSubstr("-H host1:1,host2:1,host3:1 -np 3 --map-by slot"));
  EXPECT_THAT(calls[3], HasSubstr(" train --data=d.csv --backup=/shared/run.backup --resume"));
  for (const std::string& call : calls) EXPECT_THAT(call, Not(HasSubstr("-H host4:1 ")));

  // The same with --max-restarts=1: no relaunch is left after the second loss, nothing is
  // probed.
  std::remove((dir_ + "/calls.txt").c_str());
  out = Launch("--hosts=host1,host2,host3,host4 --min-hosts=2 --max-restarts=1");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("--max-restarts=1 reached; giving up"));
  EXPECT_THAT(out.text, Not(HasSubstr("probing")));
  EXPECT_EQ(Calls().size(), 2u);

  // A job that did not start is relaunched with the hosts that answer again too (host2 at
  // its second probe; host4 has no scene: its probe fails).
  Scenes(
      "host1:1,host2:1,host3:1,host4:1 lose-1:host2\nhost1:1,host3:1,host4:1 lose-2:host4\n"
      "host1:1,host3:1 no-start\nhost2:1 down-then-up\nhost1:1,host2:1,host3:1 ok\n");
  std::remove((dir_ + "/calls.txt").c_str());
  out = Launch("--hosts=host1,host2,host3,host4");
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("0 of 2 workers started before mpirun ended: relaunching on "
                                  "host1, host2, host3 (restart 3 of at most 3)"));
  calls = Calls();
  ASSERT_EQ(calls.size(), 7u) << out.text;  // 4 runs, 3 probes
  EXPECT_THAT(calls[6], HasSubstr("-H host1:1,host2:1,host3:1 -np 3 "));
}

TEST_F(LaunchTest, WithReadmitFalseADroppedHostStaysOut) {
  Scenes(
      "host1:1,host2:1,host3:1,host4:1 lose-1:host2\nhost1:1,host3:1,host4:1 lose-2:host4\n"
      "host2:1 ok\nhost1:1,host3:1 ok\n");
  const ProgramOutput out = Launch("--hosts=host1,host2,host3,host4 --readmit=false");
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, Not(HasSubstr("probing")));
  EXPECT_THAT(out.text, Not(HasSubstr("re-admitting")));
  EXPECT_THAT(out.text, HasSubstr("relaunching on host1, host3 from the backup (restart 2"));
  EXPECT_THAT(out.text, HasSubstr("tower launch: done on 2 hosts (host1, host3) after 2 restarts"));
  const std::vector<std::string> calls = Calls();
  ASSERT_EQ(calls.size(), 3u) << out.text;
  for (const std::string& call : calls) EXPECT_THAT(call, Not(HasSubstr("-H host2:1 ")));
}

// Probes that fail (the launch agent cannot reach the host; no answer within --probe-timeout)
// leave their host out, with a line saying why; the dropped hosts are probed again before
// every relaunch, all at once, and come back in their --hosts order.
TEST_F(LaunchTest, AHostThatDoesNotAnswerItsProbeStaysOutUntilItDoes) {
  Scenes(
      "host1:1,host2:1,host3:1,host4:1,host5:1 lose-1:host2\n"
      "host1:1,host3:1,host4:1,host5:1 lose-2:host4\n"
      "host1:1,host3:1,host5:1 lose-2:host5\n"
      "host2:1 down-then-up\nhost4:1 hang\n"
      "host1:1,host2:1,host3:1 ok\n");
  const ProgramOutput out =
      Launch("--hosts=host1,host2,host3,host4,host5 --probe-timeout=0.3 --min-hosts=2");
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("tower launch: host2 is still unreachable (mpirun exited 255: "
                                  "ssh: connect to host x port 22: No route to host): not "
                                  "re-admitted"));
  EXPECT_THAT(out.text, HasSubstr("relaunching on host1, host3, host5 from the backup (restart 2"));
  EXPECT_THAT(out.text, HasSubstr("tower launch: probing host2, host4 (dropped before)"));
  EXPECT_THAT(out.text, HasSubstr("tower launch: re-admitting host2: it answers again"));
  EXPECT_THAT(out.text, HasSubstr("tower launch: host4 is still unreachable (no answer within "
                                  "0.3 s): not re-admitted"));
  EXPECT_THAT(out.text, HasSubstr("relaunching on host1, host2, host3 from the backup (restart 3"));
  EXPECT_THAT(out.text, HasSubstr("done on 3 hosts (host1, host2, host3) after 3 restarts"));
  const std::vector<std::string> calls = Calls();
  ASSERT_EQ(calls.size(), 7u) << out.text;  // 4 runs, 3 probes
  EXPECT_THAT(calls[6], HasSubstr("-H host1:1,host2:1,host3:1 -np 3 "));
}

// Inside a Slurm allocation without --hosts, the hosts are the allocation's nodes in Slurm's
// order; a lost one is dropped as any other. Outside one, --hosts is required.
TEST_F(LaunchTest, InsideASlurmAllocationItsNodesAreTheHosts) {
  Scenes("node07:1,node08:1,node09:1 lose-2:node09\nnode07:1,node08:1 ok\n");
  setenv("SLURM_JOB_ID", "4242", 1);
  setenv("SLURM_JOB_NODELIST", "node[07-09]", 1);
  const ProgramOutput out = Launch("--min-hosts=2");
  const ProgramOutput given = Launch("--hosts=node07,node08 --min-hosts=2");
  setenv("SLURM_JOB_NODELIST", "node[07-", 1);
  const ProgramOutput malformed = Launch("");
  unsetenv("SLURM_JOB_NODELIST");
  unsetenv("SLURM_JOB_ID");
  const ProgramOutput outside = Launch("");
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("tower launch: hosts from Slurm job 4242's nodes "
                                  "(SLURM_JOB_NODELIST): node07, node08, node09"));
  EXPECT_THAT(out.text, HasSubstr("relaunching on node07, node08 from the backup"));
  const std::vector<std::string> calls = Calls();
  ASSERT_EQ(calls.size(), 3u) << out.text << given.text;
  EXPECT_THAT(calls[0], HasSubstr("-H node07:1,node08:1,node09:1 -np 3 --map-by slot"));
  EXPECT_THAT(calls[1], HasSubstr("-H node07:1,node08:1 -np 2 --map-by slot"));
  // --hosts, when given, wins over the allocation.
  EXPECT_EQ(given.exit_code, 0) << given.text;
  EXPECT_THAT(given.text, Not(HasSubstr("hosts from Slurm")));
  EXPECT_THAT(calls[2], HasSubstr("-H node07:1,node08:1 -np 2"));
  EXPECT_EQ(malformed.exit_code, 2);
  EXPECT_THAT(malformed.text, HasSubstr("SLURM_JOB_NODELIST"));
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_THAT(outside.text, HasSubstr("--hosts is required"));
}

TEST_F(LaunchTest, ARankThatWasNotPlacedIsNotRestarted) {
  Scenes("host1:1,host2:1 lose-7:host9\n");
  const ProgramOutput out = Launch("--hosts=host1,host2");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("workers report rank 7 (host host9) unreachable, but only ranks "
                                  "0-1 were placed (on host1, host2); not restarting"));
  EXPECT_EQ(Calls().size(), 1u);
}

TEST_F(LaunchTest, AJobThatDidNotStartIsRelaunchedOnTheSameHostsUpToMaxRestarts) {
  Scenes("host1:1,host2:1 no-start\n");
  ProgramOutput out = Launch("--hosts=host1,host2 --max-restarts=2");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("0 of 2 workers started before mpirun ended: relaunching on the same hosts (restart 1 of at most 2)"));
  EXPECT_THAT(out.text, HasSubstr("0 of 2 workers started, and --max-restarts=2 is reached; giving up"));
  EXPECT_EQ(Calls().size(), 3u);
  // One that hangs without starting is ended after --start-timeout.
  Scenes("host1:1,host2:1 hang\n");
  out = Launch("--hosts=host1,host2 --max-restarts=0 --start-timeout=0.3");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("0 of 2 workers started within 0.3 s: ending mpirun"));
}

TEST_F(LaunchTest, AWorkerErrorIsNotRestarted) {
  Scenes("host1:1,host2:1 error\n");
  const ProgramOutput out = Launch("--hosts=host1,host2");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr("0 of 2 workers finished and none reported a lost host"));
  EXPECT_THAT(out.text, HasSubstr("not restarting"));
  EXPECT_EQ(Calls().size(), 1u);
}

TEST_F(LaunchTest, BadFlagsAreRefusedBeforeAnythingRuns) {
  Scenes("");
  const struct {
    std::string flags, train, message;
  } cases[] = {
      {"", kTrain, "--hosts is required"},
      {"--hosts=a,a", kTrain, "--hosts names a twice"},
      {"--hosts=a,b --min-hosts=3", kTrain, "--min-hosts must be between 1 and the 2 hosts given"},
      {"--hosts=a --workers-per-host=0", kTrain, "--workers-per-host must be between 1 and 1024"},
      {"--hosts=a --max-restarts=-1", kTrain, "--max-restarts must be 0 or more"},
      {"--hosts=a --grace=0", kTrain, "--grace must be between 0 and 3600 seconds"},
      {"--hosts=a --start-timeout=-1", kTrain, "--start-timeout must be between"},
      {"--hosts=a --probe-timeout=0", kTrain, "--probe-timeout must be between"},
      {"--hosts=a --readmit=maybe", kTrain, "--readmit"},
      {"--hosts=a", "evaluate --model=m", "give the job after --"},
      {"--hosts=a", "train --data=d.csv", "the train command needs --backup=PATH"},
      {"--hosts=a", "train --backup=b --resume=false", "--resume=false"},
      {"--hosts=a --bogus=1", kTrain, "unknown flag --bogus"},
      {"--hosts=a --mpirun-args=\"--bind-to none --map-by node\"", kTrain,
       "--mpirun-args gives --map-by: tower launch places the ranks itself"},
      {"--hosts=a --mpirun-args=--hostfile=h.txt", kTrain, "--mpirun-args gives --hostfile"},
  };
  for (const auto& c : cases) {
    const ProgramOutput out = Launch(c.flags, c.train);
    EXPECT_EQ(out.exit_code, 2) << c.flags << " -- " << c.train << "\n" << out.text;
    EXPECT_THAT(out.text, HasSubstr(c.message)) << c.flags << " -- " << c.train;
    EXPECT_THAT(out.text, Not(HasSubstr("tower launch: run"))) << "nothing may run";
  }
  EXPECT_TRUE(Calls().empty());
}

}  // namespace
}  // namespace tower
