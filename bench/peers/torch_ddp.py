#!/usr/bin/python3
"""PyTorch DistributedDataParallel (gloo) peer: N processes on 127.0.0.1, each given global
batch / N rows per step, one intra-op thread each (N processes share the machine's cores).

  /usr/bin/python3 bench/peers/torch_ddp.py --workload=linreg --replicas=2

Rank 0 prints `torch_ddp workload=... replicas=N steps_per_s=... samples_per_s=...` (global
samples), median of --repeats windows of --window-s seconds (rank 0's warm-up rate sets the
steps, every rank runs them), each started and ended at a barrier; with the last loss.
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from common import WORKLOADS, make_batches, make_model, report, set_threads, timed_windows


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, a, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    set_threads(a.threads, a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.replicas)
    spec = WORKLOADS[a.workload]
    batch = a.global_batch or spec["batch"]
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(make_model(a.workload))
    opt = torch.optim.SGD(model.parameters(), lr=spec["lr"])
    loss_fn = torch.nn.MSELoss()
    batches = make_batches(a.workload, batch // a.replicas, seed=rank)

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def agree(steps):  # every process runs rank 0's count (the collectives must match)
        count = torch.tensor([steps])
        dist.broadcast(count, 0)
        return int(count.item())

    rates, steps, loss_last = timed_windows(step, a.window_s, a.repeats, a.warmup_s, a.steps,
                                            sync=dist.barrier, agree=agree)
    # The global loss: each rank's loss is over its own rows.
    loss = torch.tensor([loss_last])
    dist.all_reduce(loss)
    if rank == 0:
        report("torch_ddp", a.workload, a.replicas, rates, batch, model, steps,
               loss.item() / a.replicas, f"backend=gloo threads_per_process={a.threads}")
    dist.barrier()  # no rank tears gloo down while another still uses it
    # Leave without gloo's teardown: with 4 processes on 2 cores one rank has been seen
    # spinning in it until compare.sh's 600 s bound killed it (again on 2026-11-26, after the
    # figure was printed). Everything this process reports is out by now.
    sys.stdout.flush()
    os._exit(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workload", default="linreg", choices=sorted(WORKLOADS))
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    p.add_argument("--window-s", type=float, default=2.0, help="seconds per timed window")
    p.add_argument("--steps", type=int, default=0, help="timed steps per window instead")
    p.add_argument("--warmup-s", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--global-batch", type=int, default=0)
    a = p.parse_args()
    mp.spawn(worker, args=(a, free_port()), nprocs=a.replicas, join=True)


if __name__ == "__main__":
    main()
