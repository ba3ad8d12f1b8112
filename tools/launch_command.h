// `tower launch`: runs a `tower train` job over several hosts with Open MPI's mpirun, and
// when a host is lost (a worker names it unreachable), drops that host and relaunches on the
// rest from the last backup, while at least --min-hosts remain, up to --max-restarts times,
// and takes a dropped host back when it answers again.
// It wraps mpirun; it does not replace it (mpirun still starts the workers, over ssh or
// whatever launch agent --mpirun-args names).
//
//   tower launch --hosts=node1,node2,node3 --min-hosts=2 -- \
//       train --data=/shared/data.csv --target=y --layers=64:relu,1 --epochs=20 \
//             --deterministic --backup=/shared/run.backup --save=/shared/model.safetensors
//
// Inside a Slurm allocation (sbatch, salloc) without --hosts, the hosts are its nodes
// (SLURM_JOB_NODELIST, tools/slurm_environment.h).
//
// The train command must name --backup (on a file system every host sees, as --data and
// --save): a relaunch resumes from it (--resume is added). With --deterministic the result
// is the same bytes as an uninterrupted run on any number of hosts; the global batch never
// changes.
//
// How a lost host is found: every worker gives up on a collective after
// --collective-timeout, names the workers that never came or stopped answering, and prints a
// report line (strategy/collectives/mpi/worker_report.h) that this command reads from mpirun's
// output. A reported rank is mapped to the --hosts entry this command placed it on (-H
// host:workers-per-host, --map-by slot: rank r on the (r / workers-per-host)-th host, this
// machine's entry first), so hosts may be written as names or addresses, mixed: the host name
// a worker reports is shown, never matched. --mpirun-args that would move ranks (-H,
// --hostfile, --map-by, --rankfile, -np, ...) are refused.
// mpirun itself may hang on a host it cannot reach: it is ended --grace seconds after the
// first report. The job succeeded when every worker printed its "finished" report (mpirun's
// exit status is not enough: with the recovery mode used here it exits 0 after failures).
// A job whose workers did not all start (within --start-timeout, or before mpirun ended) and
// none of which failed in Tower's own code ("error: ...") is relaunched on the same hosts: an
// Open MPI daemon can fail to come up or to reach mpirun. Each relaunch counts as a restart.
// Before each relaunch the hosts dropped at earlier ones are probed (--readmit, default on):
// mpirun, with --mpirun-args, runs `true` on each alone within --probe-timeout, which checks
// the launch agent and the daemon's way back to mpirun as a relaunch uses them; those that
// answer take their place back in the --hosts order and count towards --min-hosts.
//
// Exit status: 0 done; 1 the job failed and was not (or no longer) restarted; 2 bad flags.
#ifndef TOWER_TOOLS_LAUNCH_COMMAND_H_
#define TOWER_TOOLS_LAUNCH_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

namespace tower {

int RunLaunchCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tower

#endif  // TOWER_TOOLS_LAUNCH_COMMAND_H_
