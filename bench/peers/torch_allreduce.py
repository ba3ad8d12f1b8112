#!/usr/bin/python3
"""PyTorch gloo all-reduce peer of bench/allreduce_bench: N processes on 127.0.0.1, float32
tensors of 4 KB ... 64 MB per process, dist.all_reduce(SUM) back to back; rank 0 times them.

  /usr/bin/python3 bench/peers/torch_allreduce.py --replicas=2

Prints one line per size: bytes, latency (us), algbw and busbw = algbw * 2(n-1)/n (GB/s),
each the median of --repeats windows.
"""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, a, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=a.replicas)
    n = a.replicas
    if rank == 0:
        print(f"# torch gloo all-reduce, {n} processes", flush=True)
        print(f"{'bytes':>12} {'iters':>8} {'latency_us':>12} {'algbw_GB/s':>12} {'busbw_GB/s':>12}",
              flush=True)
    size = a.min_bytes
    while size <= a.max_bytes:
        t = torch.zeros(size // 4)
        guess = 50e-6 + size * n / 1e9
        iters = max(3, int(a.target_ms * 1e-3 / guess))
        for _ in range(min(iters, 10)):
            dist.all_reduce(t)
        times = []
        for _ in range(a.repeats):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(t)
            times.append((time.perf_counter() - start) / iters)
        if rank == 0:
            s = statistics.median(times)
            algbw = size / s
            print(f"{size:>12} {iters:>8} {s * 1e6:>12.2f} {algbw / 1e9:>12.3f} "
                  f"{algbw * 2 * (n - 1) / n / 1e9:>12.3f}", flush=True)
        size *= 2
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--min-bytes", type=int, default=4 << 10)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--target-ms", type=float, default=100)
    a = p.parse_args()
    mp.spawn(worker, args=(a, free_port()), nprocs=a.replicas, join=True)


if __name__ == "__main__":
    main()
