#!/usr/bin/python3
"""The ceiling OpenBLAS puts on an `mlp` step: only the step's matrix products, as R replicas
would run them, each replica a process with one OpenBLAS thread and its own global_batch / R
rows, all timed in the same windows. No activation, loss, all-reduce or update is computed:
what this prints is more than any training step built on these products can reach.

The products of one replica's step (rows b = 256 / R; W1 256x1024, W2 1024x1024):
  forward   h1 = x W1 (b x 256 . 256 x 1024), h2 = h1 W2 (b x 1024 . 1024 x 1024)
  backward  dW2 = h1^T dh2, dh1 = dh2 W2^T, dW1 = x^T dh1
(the last layer's 1024 x 1 products are left out: under 0.2 % of the flops).

Prints, per replica count R:
  torch_mlp_products replicas=R rows=b steps_per_s=S gflops=G gflops_products=P
where S counts whole steps of all R replicas per second (the median of 3 windows of
--window-s, the slowest replica's count in each), G = the step's FLOPs per sample as
train_bench counts them (docs/BENCHMARKS.md "FLOPs": the whole mlp, the first layer without
its input gradient) x samples/s, and P the flops of the products above.

  OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/peers/torch_mlp_products.py --replicas=2
"""
import argparse
import multiprocessing as mp
import statistics
import time

FEATURES, HIDDEN, GLOBAL_BATCH = 256, 1024, 256
# The mlp step's FLOPs per sample (train_bench's StepFlopsPerSample): 2kn forward and 2kn
# weight gradient per layer, 2kn input gradient for every layer but the first.
STEP_FLOPS = 2 * (2 * FEATURES * HIDDEN + 3 * HIDDEN * HIDDEN + 3 * HIDDEN)


def replica(rows, blas_threads, window_s, windows, start_barrier, window_barrier, results):
    import torch
    from common import set_threads
    set_threads(1, blas_threads)
    g = torch.Generator().manual_seed(rows)
    x = torch.rand(rows, FEATURES, generator=g)
    w1 = torch.rand(FEATURES, HIDDEN, generator=g)
    w2 = torch.rand(HIDDEN, HIDDEN, generator=g)
    h1, h2 = torch.empty(rows, HIDDEN), torch.empty(rows, HIDDEN)
    dh2 = torch.rand(rows, HIDDEN, generator=g)
    dh1 = torch.empty(rows, HIDDEN)
    dw1, dw2 = torch.empty(FEATURES, HIDDEN), torch.empty(HIDDEN, HIDDEN)

    def step():
        torch.mm(x, w1, out=h1)
        torch.mm(h1, w2, out=h2)
        torch.mm(h1.t(), dh2, out=dw2)
        torch.mm(dh2, w2.t(), out=dh1)
        torch.mm(x.t(), dh1, out=dw1)

    for _ in range(20):  # warm-up: OpenBLAS's buffers, the caches
        step()
    start_barrier.wait()
    counts = []
    for _ in range(windows):
        window_barrier.wait()
        end = time.perf_counter() + window_s
        steps = 0
        while time.perf_counter() < end:
            step()
            steps += 1
        counts.append(steps)
    results.put(counts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--replicas", default="2", help="comma-separated replica counts")
    p.add_argument("--window-s", type=float, default=2.0)
    p.add_argument("--windows", type=int, default=3)
    p.add_argument("--blas-threads", type=int, default=1, help="OpenBLAS threads per replica")
    a = p.parse_args()
    if a.window_s <= 0 or a.windows < 1 or a.blas_threads < 1:
        raise SystemExit("--window-s must be > 0, --windows and --blas-threads >= 1")
    ctx = mp.get_context("spawn")
    for r in [int(v) for v in a.replicas.split(",")]:
        if r < 1 or GLOBAL_BATCH % r != 0:
            raise SystemExit(f"--replicas: {r} does not divide the global batch {GLOBAL_BATCH}")
        rows = GLOBAL_BATCH // r
        start_barrier, window_barrier = ctx.Barrier(r), ctx.Barrier(r)
        results = ctx.Queue()
        procs = [ctx.Process(target=replica, args=(rows, a.blas_threads, a.window_s, a.windows, start_barrier,
                                                    window_barrier, results)) for _ in range(r)]
        for proc in procs:
            proc.start()
        counts = [results.get() for _ in procs]
        for proc in procs:
            proc.join()
        # A step of R replicas is done when the slowest has done it.
        rates = [min(c[w] for c in counts) / a.window_s for w in range(a.windows)]
        steps_per_s = statistics.median(rates)
        product_flops = 2.0 * rows * (2 * FEATURES * HIDDEN + 3 * HIDDEN * HIDDEN) * r
        print(f"torch_mlp_products replicas={r} rows={rows} steps_per_s={steps_per_s:.2f} "
              f"gflops={STEP_FLOPS * GLOBAL_BATCH * steps_per_s / 1e9:.1f} "
              f"gflops_products={product_flops * steps_per_s / 1e9:.1f}", flush=True)


if __name__ == "__main__":
    main()
