#!/usr/bin/python3
"""SGEMM roofline through PyTorch (its CPU BLAS: OpenBLAS with libopenblas0-pthread) and
numpy: a 1024^3 float32 product with 1 and 2 OpenBLAS threads, GFLOP/s, median of 3 windows.

  /usr/bin/python3 bench/peers/torch_gemm.py
"""
import argparse
import statistics
import time

import torch

from common import set_threads


def rate(fn, flops, iters, repeats=3):
    fn()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        rates.append(flops * iters / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    n = a.size
    flops = 2.0 * n * n * n
    x, y = torch.rand(n, n), torch.rand(n, n)
    out = torch.empty(n, n)
    for threads in [int(t) for t in a.threads.split(",")]:
        # torch.mm runs in OpenBLAS, on OpenBLAS's own threads; PyTorch's OpenMP threads would
        # only spin beside them, so PyTorch keeps one.
        set_threads(1, threads)
        g = rate(lambda: torch.mm(x, y, out=out), flops, a.iters)
        print(f"torch_sgemm size={n} threads={threads} gflops={g:.1f}", flush=True)
    try:  # numpy's BLAS (the same OpenBLAS), with its default threads
        import numpy as np
        xn, yn = x.numpy(), y.numpy()
        g = rate(lambda: xn @ yn, flops, a.iters)
        print(f"numpy_sgemm size={n} threads=default gflops={g:.1f}", flush=True)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
