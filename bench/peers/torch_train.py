#!/usr/bin/python3
"""PyTorch single-process peer of bench/train_bench: the same workload, model, data and step
(forward, MSE, backward, SGD), timed after warm-up; median of --repeats windows of
--window-s seconds each (as train_bench's), with the last loss.

  /usr/bin/python3 bench/peers/torch_train.py --workload=mlp --threads=1,2 --blas-threads=1,2

Prints one line per thread setting:
  torch_single workload=mlp replicas=1 steps_per_s=... samples_per_s=... gflops=...
and, with several settings (PyTorch intra-op threads x OpenBLAS threads), a
`torch_single_best` line for the fastest: the peer gets its best configuration.
"""
import argparse
import statistics

import torch

from common import (WORKLOADS, blas_info, make_batches, make_model, report,
                    set_threads, timed_windows)


def profile(step, steps, device):
    """Prints the ops' and kernels' self times over `steps` steps, largest first."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
        torch.cuda.synchronize()
    with torch_profile(activities=activities) as prof:
        for i in range(steps):
            step(i)
        if device.type == "cuda":
            torch.cuda.synchronize()
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=15), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workload", default="linreg", choices=sorted(WORKLOADS))
    p.add_argument("--threads", default="1,2", help="intra-op thread settings to try")
    p.add_argument("--blas-threads", default="1,2", help="OpenBLAS thread settings to try")
    p.add_argument("--window-s", type=float, default=2.0, help="seconds per timed window")
    p.add_argument("--steps", type=int, default=0, help="timed steps per window instead")
    p.add_argument("--warmup-s", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--global-batch", type=int, default=0)
    p.add_argument("--hidden", type=int, default=0)
    p.add_argument("--depth", type=int, default=0)
    p.add_argument("--profile-steps", type=int, default=0, help="after timing, this many steps "
                   "under torch.profiler: a table of the kernels' self times")
    p.add_argument("--host-batches", action="store_true", help="with --device=cuda: keep the "
                   "batches in pinned host memory and copy each to the GPU in its step "
                   "(non_blocking, as a DataLoader with pin_memory=True), as Tower's step does")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (a GPU: timed with a "
                   "device synchronisation at each window's ends)")
    a = p.parse_args()
    device = torch.device(a.device)
    if a.host_batches and device.type != "cuda":
        p.error("--host-batches copies batches to a GPU: it needs --device=cuda")
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    spec = WORKLOADS[a.workload]
    batch = a.global_batch or spec["batch"]
    best = None
    settings = [(int(t), int(b)) for t in a.threads.split(",") for b in a.blas_threads.split(",")]
    for threads, blas in settings:
        set_threads(threads, blas)
        torch.manual_seed(0)
        model = make_model(a.workload, a.hidden, a.depth).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=spec["lr"])
        loss_fn = torch.nn.MSELoss()
        batches = make_batches(a.workload, batch)
        if a.host_batches:
            batches = [(x.pin_memory(), y.pin_memory()) for x, y in batches]
        else:
            batches = [(x.to(device), y.to(device)) for x, y in batches]

        def step(i):
            x, y = batches[i % len(batches)]
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss

        rates, steps, loss_last = timed_windows(step, a.window_s, a.repeats, a.warmup_s, a.steps,
                                                sync=sync)
        report("torch_single", a.workload, 1, rates, batch, model, steps, loss_last,
               f"threads={threads} blas_threads={blas} device={a.device}"
               f"{' host_batches=1' if a.host_batches else ''}")
        if a.profile_steps:
            profile(step, a.profile_steps, device)
        if best is None or statistics.median(rates) > statistics.median(best[1]):
            best = (f"threads={threads} blas_threads={blas}", rates, model, steps,
                    loss_last)
    if len(settings) > 1:
        report("torch_single_best", a.workload, 1, best[1], batch, best[2], best[3], best[4],
               best[0] + " blas=" + blas_info())


if __name__ == "__main__":
    main()
