"""What the PyTorch peers share: BENCHMARKS.md's workloads, data and timing."""
import statistics
import time

import torch

WORKLOADS = {
    # name: (layer widths after the input, activation between layers, global batch, lr)
    "linreg": dict(features=1, hidden=[], batch=64, lr=0.2),
    "mlp": dict(features=256, hidden=[1024, 1024], batch=256, lr=0.01),
}


def set_threads(threads, blas_threads):
    """Intra-op threads of PyTorch, and of its BLAS: OpenBLAS keeps its own thread pool, which
    torch.set_num_threads does not touch (it defaults to one thread per core)."""
    import ctypes
    torch.set_num_threads(threads)
    if blas_threads is None:
        return
    with open("/proc/self/maps") as maps:
        libs = sorted({line.split()[-1] for line in maps if "libopenblas" in line})
    for lib in libs:
        ctypes.CDLL(lib).openblas_set_num_threads(blas_threads)


def blas_info():
    """The BLAS library PyTorch loaded and its core type, for the report."""
    import os
    with open("/proc/self/maps") as maps:
        libs = sorted({os.path.basename(line.split()[-1]) for line in maps
                       if "blas" in line.split()[-1]})
    return ",".join(libs) + " OPENBLAS_CORETYPE=" + os.environ.get("OPENBLAS_CORETYPE", "auto")


def make_model(name, hidden=None, depth=None):
    spec = WORKLOADS[name]
    widths = list(spec["hidden"])
    if name == "mlp" and (hidden or depth):
        widths = [hidden or 1024] * (depth or 2)
    layers, width = [], spec["features"]
    for w in widths:
        layers += [torch.nn.Linear(width, w), torch.nn.ReLU()]
        width = w
    layers.append(torch.nn.Linear(width, 1))
    return torch.nn.Sequential(*layers)


def make_batches(name, rows_per_batch, count=16, seed=0):
    """BENCHMARKS.md's data: linreg x ~ U(-1,1), y = 3x + 2 + 0.01 N(0,1); mlp x ~ U(-1,1)^256,
    y = 3 (x . w) + 2 + 0.01 N(0,1), w = linspace(-1, 1, 256). Generated once, then cycled."""
    g = torch.Generator().manual_seed(seed)
    features = WORKLOADS[name]["features"]
    w = torch.linspace(-1, 1, features) if features > 1 else torch.ones(1)
    batches = []
    for _ in range(count):
        x = torch.rand(rows_per_batch, features, generator=g) * 2 - 1
        y = 3 * (x @ w).unsqueeze(1) + 2 + 0.01 * torch.randn(rows_per_batch, 1, generator=g)
        batches.append((x.contiguous(), y.contiguous()))
    return batches


def params_of(model):
    return sum(p.numel() for p in model.parameters())


def step_flops_per_sample(model):
    """FLOPs one sample costs a training step, as it performs them (train_bench counts the
    same, docs/BENCHMARKS.md "FLOPs"): per Linear layer of k inputs and n outputs, 2kn
    forward, 2kn weight gradient, and 2kn input gradient except the first layer's, which
    autograd does not compute (the input needs no gradient)."""
    flops = 0
    first = True
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            product = 2 * module.in_features * module.out_features
            flops += (2 if first else 3) * product
            first = False
    return flops


def timed_windows(step, window_s, repeats, warmup_s=1.0, steps=0, sync=None, agree=None):
    """Warm-up for `warmup_s` seconds, then `repeats` timed windows of about `window_s` each
    (Tower's train_bench times the same): the warm-up's rate sets the steps per window, or
    `steps` does. `agree(n)` makes every process use the same count (DDP: rank 0's).
    `step(i)` returns the loss tensor. Returns (steps/s per window, steps per window, the
    last loss as a float)."""
    loss = None
    start = time.perf_counter()
    done = 0
    while True:
        loss = step(done)
        done += 1
        go_on = time.perf_counter() - start < warmup_s
        if agree:  # processes in a collective stop warming up together
            go_on = bool(agree(int(go_on)))
        if not go_on:
            break
    if not steps:
        steps = max(5, int(window_s * done / (time.perf_counter() - start)))
    if agree:
        steps = agree(steps)
    rates = []
    for _ in range(repeats):
        if sync:
            sync()
        start = time.perf_counter()
        for i in range(steps):
            loss = step(i)
        if sync:
            sync()
        rates.append(steps / (time.perf_counter() - start))
    return rates, steps, float(loss.item())


def report(prefix, workload, replicas, rates, batch, model, steps, loss_last, extra=""):
    sps = statistics.median(rates)
    params = params_of(model)
    flops = step_flops_per_sample(model)
    print(f"{prefix} workload={workload} replicas={replicas} steps_per_s={sps:.1f} "
          f"samples_per_s={sps * batch:.0f} gflops={flops * sps * batch / 1e9:.2f} "
          f"params={params} global_batch={batch} steps={steps} window_s={steps / sps:.2f} "
          f"runs={','.join(f'{r:.1f}' for r in rates)} loss_last={loss_last:.4g}"
          f"{(' ' + extra) if extra else ''}", flush=True)
