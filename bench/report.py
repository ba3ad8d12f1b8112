#!/usr/bin/python3
"""Reads the raw outputs of bench/compare.sh and prints the table of ratios for every target of
docs/BENCHMARKS.md (markdown), the measured figures behind them, and (with --plots=DIR) writes the plots:
throughput vs replicas, all-reduce bandwidth vs size, and the step-cost sweep.

  /usr/bin/python3 bench/report.py /tmp/tower-bench.XXXX [--plots=docs]
"""
import argparse
import glob
import json
import math
import os
import re
import statistics
import sys

MB = 1 << 20


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def read_lines(path, prefix):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [fields(l) for l in f if l.startswith(prefix)]


def first(path, prefix):
    lines = read_lines(path, prefix)
    return lines[0] if lines else None


def table_rows(path):
    """Rows of a bandwidth table: {bytes: {column: value}}; header from the line starting 'bytes'."""
    rows, header = {}, None
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts or line.startswith("#"):
                continue
            if parts[0] == "bytes":
                header = parts
                continue
            if header and parts[0].isdigit():
                rows[int(parts[0])] = {h: float(v) for h, v in zip(header[1:], parts[1:])}
    return rows


def mlp_shapes(kind, line):
    """[forward, weight_grad, input_grad] GFLOP/s of gemm_roofline's mlp-shaped products:
    kind "eigen" (Eigen alone, packing every product) or "tower" (as the step computes them,
    each weight packed once per step for the replicas that share it); None for other lines."""
    prefix = "eigen_sgemm" if kind == "eigen" else "tower_products"
    m = re.match(prefix + r" mlp_shapes .* forward=([\d.]+) weight_grad=([\d.]+) "
                 r"input_grad=([\d.]+)", line)
    return [float(x) for x in m.groups()] if m else None


def replica_products(line):
    """(key, steps/s) of a gemm_roofline line of one mlp step's products alone, R replicas on
    2 threads: key "<kind>_replica_products_r<R>", kind eigen (each product packs its
    weight), onednn_packed_once or tower_as_step (as Tower's step computes them: weights
    packed once per step, a thread's weight gradients folded); None for other lines."""
    m = re.match(r"mlp_replica_products kind=(\w+) replicas=(\d+) threads=2 .*"
                 r"steps_per_s=(nan|inf|[\d.]+)", line)
    if not m:
        return None
    return f"{m.group(1)}_replica_products_r{m.group(2)}", float(m.group(3))


# The kinds of gemm_roofline's replica products, with what each computes.
REPLICA_PRODUCT_KINDS = (
    ("tower_as_step", "as the step computes them (weights packed once per step, a thread's "
                      "weight gradients folded)"),
    ("eigen", "Eigen packing the weight in every product"),
    ("onednn_packed_once", "oneDNN, weights packed once per step"),
)
# FLOPs of one mlp sample's step as train_bench counts them (docs/BENCHMARKS.md, "FLOPs":
# 256 -> 1024 -> 1024 -> 1, no input gradient for the first layer): 7,346,176.
MLP_STEP_FLOPS_PER_SAMPLE = 2 * (2 * 256 * 1024 + 3 * 1024 * 1024 + 3 * 1024)
MLP_GLOBAL_BATCH = 256


def mlp_products_gflops(steps_per_s):
    """GFLOP/s of `steps_per_s` mlp steps in train_bench's convention; None for None."""
    return steps_per_s * MLP_GLOBAL_BATCH * MLP_STEP_FLOPS_PER_SAMPLE / 1e9 if steps_per_s else None


def median_of_rounds(values):
    """The median of per-round ratios; NaN when any of them is not a finite number, so that a
    broken figure fails its target instead of hiding among the others."""
    if any(not math.isfinite(v) for v in values):
        return float("nan")
    return statistics.median(values)


def round_ratio(num, den):
    """One round's num / den; NaN when den is not a positive finite number (a NaN num stays
    NaN), so that median_of_rounds fails the target."""
    return num / den if math.isfinite(den) and den > 0 else float("nan")


def round_number(path):
    """The round of a rounds file: N of "..._rN.txt"."""
    return int(re.search(r"_r(\d+)\.txt$", path).group(1))


def square_rate(line):
    """(key, GFLOP/s) of a gemm_roofline square-product line: eigen_t1, eigen_tT, or
    eigen_tT_split (one product split over the threads); None for other lines."""
    m = re.match(r"eigen_sgemm size=\d+ threads=(\d+) gflops=(nan|inf|[\d.]+)(.*)", line)
    if not m:
        return None
    return "eigen_t" + m.group(1) + ("_split" if "split" in m.group(3) else ""), float(m.group(2))


ROOFLINE_KEYS = ("eigen_t2", "eigen_t2_split", "openblas_t2")


def fastest(rates, keys):
    """The fastest of the figures `keys` names in `rates`, as (GFLOP/s, which); (None, "?")
    when none was measured, NaN when one is not a positive number (a broken measurement:
    no bound to take)."""
    candidates = {k: v for k, v in rates.items() if k in keys}
    if not candidates:
        return None, "?"
    for name, v in candidates.items():
        if not (math.isfinite(v) and v > 0):
            return float("nan"), name
    name = max(candidates, key=candidates.get)
    return candidates[name], name


def roofline(rates):
    """The 2-thread SGEMM roofline: the fastest of Eigen's two independent products, Eigen's
    product split over both threads and OpenBLAS on 2 threads (fastest)."""
    return fastest(rates, ROOFLINE_KEYS)


def load(d):
    r = {"machine": {}}
    if os.path.exists(f"{d}/machine.txt"):
        with open(f"{d}/machine.txt") as f:
            r["machine"] = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l)
    gemm = {}
    path = f"{d}/gemm_tower.txt"
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                square = square_rate(line)
                if square:
                    gemm[square[0]] = square[1]
                for kind in ("eigen", "tower"):
                    m = mlp_shapes(kind, line)
                    if m:
                        gemm[f"{kind}_mlp_shapes_t1"] = m
                products = replica_products(line)
                if products:
                    gemm[products[0]] = products[1]
    # The same products at the rows one replica gets with 4 and 8 replicas.
    for b in (64, 32):
        path = f"{d}/gemm_tower_b{b}.txt"
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    for kind in ("eigen", "tower"):
                        m = mlp_shapes(kind, line)
                        if m:
                            gemm[f"{kind}_mlp_shapes_b{b}_t1"] = m
    for t in (1, 2):
        g = first(f"{d}/gemm_torch_t{t}.txt", "torch_sgemm")
        if g:
            gemm[f"openblas_t{t}"] = float(g["gflops"])
    # OpenBLAS's products of one mlp step (torch_mlp_products.py): per replica count, and the
    # whole batch on 2 threads.
    for line in read_lines(f"{d}/gemm_torch_mlp.txt", "torch_mlp_products "):
        gemm[f"openblas_mlp_products_r{line['replicas']}"] = line
    whole = first(f"{d}/gemm_torch_mlp_whole.txt", "torch_mlp_products ")
    if whole:
        gemm["openblas_mlp_products_whole"] = whole
    r["gemm"] = gemm
    train = {}
    for path in glob.glob(f"{d}/train_tower_*.txt"):
        line = first(path, "workload=")
        if line:
            train[("tower", line["workload"], int(line["replicas"]))] = line
    # Alternating rounds of every replica count: rounds[(workload, replicas)][round] = line.
    rounds = {}
    for path in glob.glob(f"{d}/train_rounds_*_r*.txt"):
        m = re.search(r"_r(\d+)\.txt$", path)
        line = first(path, "workload=")
        if m and line:
            rounds.setdefault((line["workload"], int(line["replicas"])), {})[int(m.group(1))] = line
    # 2 replicas computing their rows as one batch (--batch-replica-rows) in the same rounds:
    # batched_rounds[workload][round] = its line.
    batched_rounds = {}
    for path in glob.glob(f"{d}/train_batched_rounds_*_r*.txt"):
        line = first(path, "workload=")
        if line:
            batched_rounds.setdefault(line["workload"], {})[round_number(path)] = line
    # PyTorch single in the same rounds: torch_rounds[workload][round] = its line.
    torch_rounds = {}
    for path in glob.glob(f"{d}/torch_rounds_*_r*.txt"):
        m = re.search(r"_r(\d+)\.txt$", path)
        line = first(path, "torch_single ")  # one setting: no "_best" line
        if m and line:
            torch_rounds.setdefault(line["workload"], {})[int(m.group(1))] = line
    # One replica's share of a 2-replica linreg step (32 rows), pinned to each core, in the
    # same rounds: core_rounds[core][round] = its line.
    core_rounds = {}
    for path in glob.glob(f"{d}/core_rounds_linreg_c*_r*.txt"):
        m = re.search(r"_c(\d+)_r(\d+)\.txt$", path)
        line = first(path, "workload=")
        if m and line:
            core_rounds.setdefault(int(m.group(1)), {})[int(m.group(2))] = line
    # The roofline's products in the same rounds: gemm_rounds[round] = {key: GFLOP/s}.
    gemm_rounds = {}
    for path in glob.glob(f"{d}/gemm_rounds_tower_r*.txt"):
        k = round_number(path)
        with open(path) as fh:
            for line in fh:
                square = square_rate(line)
                if square:
                    gemm_rounds.setdefault(k, {})[square[0]] = square[1]
                products = replica_products(line)
                if products:
                    gemm_rounds.setdefault(k, {})[products[0]] = products[1]
    for path in glob.glob(f"{d}/gemm_rounds_torch_r*.txt"):
        k = round_number(path)
        g = first(path, "torch_sgemm")
        if g and g.get("threads") == "2":
            gemm_rounds.setdefault(k, {})["openblas_t2"] = float(g["gflops"])
    # OpenBLAS's products of one mlp step alone in the same rounds (torch_mlp_products.py).
    for kind, key in (("torch_mlp_whole", "openblas_mlp_products_whole"),
                      ("torch_mlp", "openblas_mlp_products_r2")):
        for path in glob.glob(f"{d}/gemm_rounds_{kind}_r*.txt"):
            k = round_number(path)
            line = first(path, "torch_mlp_products ")
            if line:
                gemm_rounds.setdefault(k, {})[key] = float(line["gflops"])
    r["rounds"] = rounds
    r["gemm_rounds"] = gemm_rounds
    r["torch_rounds"] = torch_rounds
    r["core_rounds"] = core_rounds
    r["batched_rounds"] = batched_rounds
    # --ab-deterministic: today's path and deterministic mode, windows alternating.
    for path in glob.glob(f"{d}/train_ab*_*.txt"):
        lines = read_lines(path, "workload=")
        shards = max((int(l.get("virtual_shards", "0")) for l in lines), default=0)
        for line in lines:
            v = int(line.get("virtual_shards", "0"))
            kind = f"tower_deterministic_v{shards}" if v else f"tower_beside_v{shards}"
            train[(kind, line["workload"], int(line["replicas"]))] = line
    # --ab-precision: float32 and a mixed policy, windows alternating.
    for path in glob.glob(f"{d}/train_precision_*.txt"):
        for line in read_lines(path, "workload="):
            kind = "tower_precision_" + line.get("precision", "float32")
            train[(kind, line["workload"], int(line["replicas"]))] = line
    # --ab-trace: the step with the trace off and on, windows alternating.
    for path in glob.glob(f"{d}/train_trace_*.txt"):
        line = first(path, "trace_overhead")
        if line:
            train[("tower_trace", line["workload"], int(line["replicas"]))] = line
    for w in ("linreg", "mlp"):
        best = first(f"{d}/train_torch_{w}.txt", "torch_single_best")
        if best:
            train[("torch_single", w, 1)] = best
        for line in read_lines(f"{d}/train_torch_{w}.txt", "torch_single "):
            train[("torch_single_" + line["threads"] + "x" + line["blas_threads"], w, 1)] = line
        for path in glob.glob(f"{d}/train_ddp_{w}_*.txt"):
            line = first(path, "torch_ddp")
            if line:
                train[("torch_ddp", w, int(line["replicas"]))] = line
    r["train"] = train
    ar, roof = {}, {}
    for kind in ("tower", "gloo", "mpi"):
        for path in glob.glob(f"{d}/allreduce_{kind}_*.txt"):
            n = int(re.search(r"_(\d+)\.txt$", path).group(1))
            ar[(kind, n)] = table_rows(path)
            if kind == "tower":
                with open(path) as fh:
                    text = fh.read()
                m = re.search(r"memcpy (\d+) MB: 1 thread ([\d.]+) GB/s, (\d+) threads ([\d.]+) GB/s",
                              text)
                if m:
                    roof[n] = dict(mb=int(m.group(1)), t1=float(m.group(2)), tn=float(m.group(4)))
                    # The latency floor (bench/allreduce_bench.cc): one cache line's round
                    # trip between two cores, measured in the same program.
                    trip = re.search(r"cross-core round trip ([\d.]+) ns", text)
                    if trip and float(trip.group(1)) > 0:
                        roof[n]["round_trip_ns"] = float(trip.group(1))
    r["allreduce"] = ar
    r["memcpy"] = roof
    sweep = {}
    for path in glob.glob(f"{d}/sweep_*.txt"):
        line = first(path, "workload=")
        if line:
            kind = re.search(r"sweep_(.*)_\d+\.txt$", path).group(1)
            sweep.setdefault(kind, []).append(line)
    r["sweep"] = sweep
    return r


def f(x, digits=1):
    if x is None:
        return "—"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


REFERENCE = "reference"  # a row's `ok` for a figure of a non-default setting: no target applies


def verdict(ok):
    if ok is None:
        return "(measured limit)"
    if ok == REFERENCE:
        return "(a reference, not the default)"
    return "**met**" if ok else "**missed**"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--plots", default="")
    p.add_argument("--plot-format", default="svg", help="svg or png")
    a = p.parse_args()
    r = load(a.dir)
    T, G, AR, MC = r["train"], r["gemm"], r["allreduce"], r["memcpy"]

    def get(kind, w, n, key):
        line = T.get((kind, w, n))
        return float(line[key]) if line and key in line else None

    rows = []  # (figure, measured, target, ratio text, ok)

    def ratio(a_, b_):
        return a_ / b_ if a_ is not None and b_ else None

    # linreg
    t2 = get("tower", "linreg", 2, "steps_per_s")
    t1 = get("tower", "linreg", 1, "steps_per_s")
    s = get("torch_single", "linreg", 1, "steps_per_s")
    d2 = get("torch_ddp", "linreg", 2, "steps_per_s")
    x = ratio(t2, d2)
    rows.append(("`linreg`, 2 replicas, steps/s vs DDP-gloo (2 proc)",
                 f"Tower {f(t2)} · DDP {f(d2)}", "≥ 50×", x, x is not None and x >= 50))
    x = ratio(t2, s)
    rows.append(("`linreg`, 2 replicas, steps/s vs PyTorch single", f"Tower {f(t2)} · PyTorch {f(s)}",
                 "≥ 1×", x, x is not None and x >= 1))
    x = ratio(t1, s)
    rows.append(("`linreg`, 1 replica, steps/s vs PyTorch single", f"Tower {f(t1)} · PyTorch {f(s)}",
                 "≥ 2×", x, x is not None and x >= 2))
    # mlp
    m2 = get("tower", "mlp", 2, "samples_per_s")
    ms = get("torch_single", "mlp", 1, "samples_per_s")
    md = get("torch_ddp", "mlp", 2, "samples_per_s")
    x = ratio(m2, md)
    rows.append(("`mlp`, 2 replicas, samples/s vs DDP-gloo (2 proc)", f"Tower {f(m2)} · DDP {f(md)}",
                 "≥ 2×", x, x is not None and x >= 2))
    x = ratio(m2, ms)
    best = T.get(("torch_single", "mlp", 1), {})
    rows.append(("`mlp`, 2 replicas, samples/s vs PyTorch single (best threads: "
                 f"{best.get('threads', '?')} torch × {best.get('blas_threads', '?')} BLAS)",
                 f"Tower {f(m2)} · PyTorch {f(ms)}", "≥ 1.2×", x, x is not None and x >= 1.2))
    mg = get("tower", "mlp", 2, "gflops")
    roof, roof_name = roofline(G)
    x = ratio(mg, roof)
    rows.append(("`mlp`, 2 replicas, GFLOP/s vs 2-thread SGEMM roofline",
                 f"Tower {f(mg)} · roofline {f(roof)} ({roof_name})", "≥ 90%",
                 x, x is not None and x >= 0.9))
    # What bounds it: OpenBLAS (the roofline's own library) computing only the two replicas'
    # products, each replica on one core; and the whole batch's products on both cores.
    for key, label in (("openblas_mlp_products_r2", "2 replicas' products, 1 thread each"),
                       ("openblas_mlp_products_whole", "the whole batch's products on 2 threads")):
        g = G.get(key, {}).get("gflops")
        x = ratio(float(g) if g else None, roof)
        rows.append((f"bound: OpenBLAS, {label}, GFLOP/s (same convention) vs the roofline",
                     f"{f(float(g)) if g else '—'} · {f(roof)}", "(limit)", x, None))
    # And Tower's own products alone, as its step computes them, 2 replicas on 2 threads (the
    # gradients' all-reduce, the update and the elementwise work left out).
    own = G.get("tower_as_step_replica_products_r2")
    own_gflops = mlp_products_gflops(own)
    x = ratio(own_gflops, roof)
    rows.append(("bound: Tower's mlp products alone, 2 replicas on 2 threads, as the step "
                 "computes them, GFLOP/s (same convention) vs the roofline",
                 f"{f(own_gflops)} · {f(roof)}", "(limit)", x, None))
    x = ratio(mg, own_gflops)
    rows.append(("`mlp`, 2 replicas vs those products alone, GFLOP/s", f"{f(mg)} · {f(own_gflops)}",
                 "(reached)", x, None))
    # Many replicas on few cores, and one replica on every core.
    for n, target in ((4, 0.5), (8, 0.3)):
        tn = get("tower", "linreg", n, "steps_per_s")
        x = ratio(tn, t2)
        rows.append((f"`linreg`, {n} replicas on {r['machine'].get('cores', '?')} cores vs 2 replicas, steps/s",
                     f"{f(tn)} · {f(t2)}", f"≥ {target}×", x, x is not None and x >= target))
    x = ratio(t2, t1)
    rows.append(("`linreg`, 2 replicas vs 1 replica, steps/s", f"{f(t2)} · {f(t1)}", "≥ 0.8×", x,
                 x is not None and x >= 0.8))
    for n, target in ((4, 0.95), (8, 0.9)):
        mn = get("tower", "mlp", n, "samples_per_s")
        x = ratio(mn, m2)
        rows.append((f"`mlp`, {n} replicas vs 2 replicas, samples/s", f"{f(mn)} · {f(m2)}",
                     f"≥ {target}×", x, x is not None and x >= target))
    # What bounds them: each replica's products have 256 / n rows; on 2 cores the step's
    # products can run at most at 2 × one thread's rate at those rows (the three products
    # of a layer have equal FLOPs, so the rate of the three is their harmonic mean).
    def products_rate(key):
        v = G.get(key)
        return 3 / sum(1 / x_ for x_ in v) if v else None
    # Eigen alone packs the weight in every product; the step packs it once for the
    # replicas that share it (gemm_roofline's tower_products), which is what bounds it now.
    for kind, how in (("tower", "weights packed once per step, as the step does"),
                      ("eigen", "Eigen packing the weight in every product")):
        base = products_rate(f"{kind}_mlp_shapes_t1")
        for n, b in ((4, 64), (8, 32)):
            rate = products_rate(f"{kind}_mlp_shapes_b{b}_t1")
            if rate is None and kind == "tower":
                continue  # a run from before gemm_roofline printed them
            x = ratio(rate, base)
            rows.append((f"bound: mlp products at {b} rows ({n} replicas) vs 128 rows (2 replicas), 1 thread, {how}, GFLOP/s",
                         f"{f(rate)} · {f(base)}", "(limit)", x, None))
    # The products alone of one step of R replicas on the 2 threads against 2 replicas', in
    # each of gemm_roofline's three designs, and the fastest design at R against the fastest
    # at 2: what the step's products allow "R replicas keep the throughput of 2".
    for n in (4, 8):
        for kind, how in REPLICA_PRODUCT_KINDS:
            rate = G.get(f"{kind}_replica_products_r{n}")
            base = G.get(f"{kind}_replica_products_r2")
            if rate is None and base is None:
                continue  # a run from before gemm_roofline printed them
            x = ratio(rate, base)
            rows.append((f"bound: mlp products alone of {n} vs 2 replicas on 2 threads, {how}, "
                         "steps/s", f"{f(rate)} · {f(base)}", "(limit)", x, None))
        best_n, _ = fastest(G, tuple(f"{k}_replica_products_r{n}" for k, _ in REPLICA_PRODUCT_KINDS))
        best_2, _ = fastest(G, tuple(f"{k}_replica_products_r2" for k, _ in REPLICA_PRODUCT_KINDS))
        if best_n is not None:
            x = ratio(best_n, best_2)
            rows.append((f"bound: mlp products alone of {n} vs 2 replicas on 2 threads, the "
                         "fastest of those designs at each count, steps/s",
                         f"{f(best_n)} · {f(best_2)}", "(limit)", x, None))
    base_ob = G.get("openblas_mlp_products_r2", {}).get("steps_per_s")
    for n in (4, 8):
        rate = G.get(f"openblas_mlp_products_r{n}", {}).get("steps_per_s")
        x = ratio(float(rate), float(base_ob)) if rate and base_ob else None
        rows.append((f"bound: OpenBLAS, mlp products of {n} vs 2 replicas (1 thread each), steps/s",
                     f"{rate or '—'} · {base_ob or '—'}", "(limit)", x, None))
    # The same ratios over alternating rounds: each round's ratio, then their median (a
    # round takes under a minute, so both figures of a ratio share the host's phase).
    R = r.get("rounds", {})

    def rounds_row(figure, target, fmt, rounds, value_of, check):
        """A row of the median of each round's value (value_of(k): None when round k lacks
        it); no row when no round has one."""
        values = [v for v in (value_of(k) for k in sorted(rounds)) if v is not None]
        if values:
            x = median_of_rounds(values)
            rows.append((figure, f"{len(values)} rounds: " + ", ".join(fmt(v) for v in sorted(values)),
                         target, x, check(x)))

    def line_ratio(a_rounds, b_rounds, key):
        """value_of for two programs' figures `key` ({round: line} each) in the same round."""
        return lambda k: (round_ratio(float(a_rounds[k][key]), float(b_rounds[k][key]))
                          if k in a_rounds and k in b_rounds else None)

    times = lambda v: f"{v:.2f}"  # noqa: E731
    percent = lambda v: f"{v * 100:.1f}%"  # noqa: E731

    for w, a_n, b_n, key, target in (("linreg", 4, 2, "steps_per_s", 0.5),
                                     ("linreg", 8, 2, "steps_per_s", 0.3),
                                     ("linreg", 2, 1, "steps_per_s", 0.8),
                                     ("mlp", 4, 2, "samples_per_s", 0.95),
                                     ("mlp", 8, 2, "samples_per_s", 0.9)):
        a_rounds = R.get((w, a_n), {})
        rounds_row(f"`{w}`, {a_n} vs {b_n} replicas, {key.replace('_per_s', '/s')}, median of "
                   "alternating rounds", f"≥ {target}×", times, a_rounds,
                   line_ratio(a_rounds, R.get((w, b_n), {}), key), lambda x, t=target: x >= t)
    # Those mlp ratios against what the step's products alone allow (gemm_roofline, as the
    # step computes them): how much of the loss the rest of the step (all-reduce, update,
    # waits) adds.
    for n in (4, 8):
        rate = G.get(f"tower_as_step_replica_products_r{n}")
        base = G.get("tower_as_step_replica_products_r2")
        bound = ratio(rate, base)
        values = [v for v in (line_ratio(R.get(("mlp", n), {}), R.get(("mlp", 2), {}),
                                         "samples_per_s")(k) for k in sorted(R.get(("mlp", n), {})))
                  if v is not None]
        if bound and values:
            reached = median_of_rounds(values)
            rows.append((f"`mlp` {n} vs 2 replicas (median of rounds) vs the same ratio of the "
                         "products alone as the step computes them",
                         f"{reached:.2f} · {bound:.2f}", "(reached)", reached / bound, None))
    # linreg 2 vs 1's ceiling in each round: a 2-replica step runs one replica's 32-row
    # share on each core (at best the slower core's 32-row rate) or both shares on one core
    # (at best half the faster one's), whatever it spends meeting; against that round's
    # 1-replica figure.
    cores = r.get("core_rounds", {})
    one = R.get(("linreg", 1), {})
    bounds, reached = [], []
    for k in sorted(one):
        rates = [float(cores[c][k]["steps_per_s"]) for c in cores if k in cores[c]]
        if len(rates) < 2 or k not in R.get(("linreg", 2), {}):
            continue
        ceiling = max(min(rates), max(rates) / 2)
        bounds.append(ceiling / float(one[k]["steps_per_s"]))
        reached.append(float(R[("linreg", 2)][k]["steps_per_s"]) / ceiling)
    if bounds:
        rows.append(("bound: `linreg` 2 vs 1 replica, the slower core's 32-row rate (or half the "
                     "faster's) vs 1 replica, median of alternating rounds",
                     f"{len(bounds)} rounds: " + ", ".join(f"{b:.2f}" for b in bounds),
                     "(limit)", statistics.median(bounds), None))
        rows.append(("`linreg` 2 replicas vs that bound, median of alternating rounds",
                     f"{len(reached)} rounds: " + ", ".join(f"{b:.2f}" for b in sorted(reached)),
                     "(reached)", statistics.median(reached), None))
    # Tower against PyTorch single, each round's pair, then the median.
    torch_rounds = r.get("torch_rounds", {})
    for w, n, key, target in (("linreg", 1, "steps_per_s", 2.0),
                              ("linreg", 2, "steps_per_s", 1.0),
                              ("mlp", 1, "samples_per_s", 1.0),
                              ("mlp", 2, "samples_per_s", 1.2)):
        a_rounds = R.get((w, n), {})
        rounds_row(f"`{w}`, {n} replica{'s' if n > 1 else ''} vs PyTorch single (best threads), "
                   f"{key.replace('_per_s', '/s')}, median of alternating rounds", f"≥ {target}×",
                   times, a_rounds, line_ratio(a_rounds, torch_rounds.get(w, {}), key),
                   lambda x, t=target: x >= t)
    # The mlp's 2 replicas against the roofline and the products alone, both taken right after
    # them in each round, and the products alone against PyTorch single in that round: what
    # any step could reach in the host's state of that round.
    mlp2 = R.get(("mlp", 2), {})
    gemm_rounds = r.get("gemm_rounds", {})

    def per_round(k, num, den):
        """num(k) / den(k) in round k; None when the round lacks either."""
        n_, d_ = num(k), den(k)
        return None if n_ is None or d_ is None else round_ratio(n_, d_)

    def tower(k):
        return float(mlp2[k]["gflops"]) if k in mlp2 else None

    def roof(k):
        return roofline(gemm_rounds[k])[0]

    def products(k):
        # OpenBLAS's products of one step alone, GFLOP/s as train_bench counts them: the faster
        # of the whole batch on 2 threads and 2 replicas a thread each (None: not run).
        return fastest(gemm_rounds[k], ("openblas_mlp_products_whole",
                                        "openblas_mlp_products_r2"))[0]

    def torch_single(k):
        line = torch_rounds.get("mlp", {}).get(k)
        return float(line["gflops"]) if line else None

    rounds_row("`mlp`, 2 replicas, GFLOP/s vs 2-thread SGEMM roofline, median of alternating rounds",
               "≥ 90%", percent, gemm_rounds, lambda k: per_round(k, tower, roof),
               lambda x: x >= 0.9)
    rounds_row("bound: OpenBLAS, the mlp's products alone (the faster of the whole batch on 2 "
               "threads and 2 replicas a thread each) vs the roofline, median of alternating rounds",
               "(limit)", percent, gemm_rounds, lambda k: per_round(k, products, roof),
               lambda x: None)
    rounds_row("`mlp` 2 replicas vs those products alone, median of alternating rounds",
               "(reached)", percent, gemm_rounds, lambda k: per_round(k, tower, products),
               lambda x: None)
    rounds_row("bound: those products alone vs PyTorch single (best threads), GFLOP/s, median of "
               "alternating rounds", "(limit)", times, gemm_rounds,
               lambda k: per_round(k, products, torch_single), lambda x: None)

    def own_products(k):
        # Tower's own products of the 2 replicas' step alone, as the step computes them,
        # GFLOP/s in train_bench's convention (None: not run).
        return mlp_products_gflops(gemm_rounds[k].get("tower_as_step_replica_products_r2"))

    rounds_row("bound: Tower's mlp products alone, 2 replicas on 2 threads as the step computes "
               "them, vs the roofline, median of alternating rounds", "(limit)", percent,
               gemm_rounds, lambda k: per_round(k, own_products, roof), lambda x: None)
    rounds_row("`mlp` 2 replicas vs Tower's products alone, median of alternating rounds",
               "(reached)", percent, gemm_rounds, lambda k: per_round(k, tower, own_products),
               lambda x: None)
    # 2 replicas computing their rows as one batch (--batch-replica-rows, its kernels on both
    # cores, no all-reduce between replicas): the default (each replica its own shard on a
    # thread of its own, an all-reduce between them) against it in each round, and its own
    # fraction of the roofline.
    batched = r.get("batched_rounds", {})
    reference = lambda x: REFERENCE  # noqa: E731
    for w, key in (("linreg", "steps_per_s"), ("mlp", "samples_per_s")):
        u_rounds = batched.get(w, {})
        unit = key.replace("_per_s", "/s")
        rounds_row(f"reference: `{w}`, 2 replicas, the default (each replica its own shard) vs "
                   f"their rows as one batch (--batch-replica-rows), {unit}, median of "
                   "alternating rounds", "(reference)", times, u_rounds,
                   line_ratio(R.get((w, 2), {}), u_rounds, key), reference)
    mlp_batched = batched.get("mlp", {})
    rounds_row("reference: `mlp`, 2 replicas' rows as one batch "
               "(--batch-replica-rows), GFLOP/s vs 2-thread SGEMM roofline, median of "
               "alternating rounds", "(reference)", percent, gemm_rounds,
               lambda k: per_round(k, lambda j: float(mlp_batched[j]["gflops"])
                                   if j in mlp_batched else None, roof), reference)
    # Mixed precision: mixed_bfloat16 against float32, same process, windows alternating;
    # and each one's loss after its windows.
    for n in (1, 2):
        bf = get("tower_precision_mixed_bfloat16", "mlp", n, "samples_per_s")
        fp = get("tower_precision_float32", "mlp", n, "samples_per_s")
        x = ratio(bf, fp)
        if x is not None:
            rows.append((f"`mlp`, {n} replica{'s' if n > 1 else ''}, mixed_bfloat16 vs float32, "
                         "samples/s (windows alternating)",
                         f"{f(bf)} · {f(fp)} (loss {get('tower_precision_mixed_bfloat16', 'mlp', n, 'loss_last'):.4g}"
                         f" · {get('tower_precision_float32', 'mlp', n, 'loss_last'):.4g})",
                         "≥ 1.5×", x, x >= 1.5))
    # The trace: on against off (windows alternating), and a span's cost when off.
    for n in (1, 2):
        on = get("tower_trace", "mlp", n, "on_steps_per_s")
        off = get("tower_trace", "mlp", n, "off_steps_per_s")
        x = ratio(on, off)
        if x is not None:
            rows.append((f"`mlp`, {n} replica{'s' if n > 1 else ''}, trace on vs off, steps/s "
                         "(windows alternating)",
                         f"{f(on)} · {f(off)} ({get('tower_trace', 'mlp', n, 'events_per_step'):.0f} "
                         f"events/step; off: {get('tower_trace', 'mlp', n, 'off_span_ns'):.2f} ns/span)",
                         "≥ 0.97×", x, x >= 0.97))
    m1 = get("tower", "mlp", 1, "samples_per_s")
    x = ratio(m1, ms)
    rows.append(("`mlp`, 1 replica (intra-op threads) vs PyTorch single (best threads)",
                 f"Tower {f(m1)} · PyTorch {f(ms)}", "≥ 1×", x, x is not None and x >= 1))
    # all-reduce: against a memcpy of the same size on the same threads (a 16 MB buffer
    # lives in L3, a 256 MB one does not), and against the strongest peer measured, MPI
    # over shared memory (gloo's TCP figures are in the tables below).
    for n in (2, 4, 8):
        tw = AR.get(("tower", n), {})
        mp = AR.get(("mpi", n), {})
        for size in (4096, 16 * MB, 32 * MB, 64 * MB):
            row = tw.get(size)
            if not row:
                continue
            bus, mem = row["busbw_GB/s"], row.get("memcpy_size_GB/s")
            label = "4 KB" if size == 4096 else f"{size // MB} MB"
            if size >= MB:
                x = ratio(bus, mem)
                rows.append((f"in-process all-reduce, {n} replicas, {label}: busbw vs memcpy of {label}",
                             f"{f(bus, 2)} · memcpy {f(mem, 2)} GB/s ({n} threads)", "≥ 50%", x,
                             x is not None and x >= 0.5))
            m_ = mp.get(size)
            if m_:
                if size == 4096:
                    x = ratio(m_["latency_us"], row["latency_us"])
                    rows.append((f"in-process all-reduce, {n} replicas, 4 KB: latency vs MPI (shared memory)",
                                 f"{f(row['latency_us'], 2)} · MPI {f(m_['latency_us'], 2)} µs", "≥ 1×",
                                 x, x is not None and x >= 1))
                else:
                    x = ratio(bus, m_["busbw_GB/s"])
                    rows.append((f"in-process all-reduce, {n} replicas, {label}: busbw vs MPI (shared memory)",
                                 f"{f(bus, 2)} · MPI {f(m_['busbw_GB/s'], 2)} GB/s", "≥ 1×", x,
                                 x is not None and x >= 1))
        row = tw.get(4096)
        if row:
            lat = row["latency_us"]
            trip = MC.get(n, {}).get("round_trip_ns")
            floor = (f" = {f(lat * 1000 / trip, 1)} cross-core round trips of {f(trip, 0)} ns"
                     if trip else "")
            rows.append((f"in-process all-reduce, {n} replicas, 4 KB latency", f"{f(lat, 2)} µs{floor}",
                         "≤ 2 µs", None, lat <= 2))
    # Deterministic mode against today's path in the same process, timed windows
    # alternating: one virtual shard per replica (the job's own topology), and 8
    # (reproducible on 1 to 8 replicas).
    for w in ("mlp", "linreg"):
        for n in (1, 2):
            for v in sorted({n, 8}):
                plain = get(f"tower_beside_v{v}", w, n, "steps_per_s")
                det = get(f"tower_deterministic_v{v}", w, n, "steps_per_s")
                x = ratio(det, plain)
                rows.append((f"`{w}`, {n} replica{'s' if n > 1 else ''}, deterministic with {v} "
                             f"virtual shard{'s' if v > 1 else ''}: steps/s vs today's path",
                             f"{f(det)} · {f(plain)}", "≥ 90%", x, x is not None and x >= 0.9))
    mr = get("tower", "mlp", 2, "mem_ratio")
    line = T.get(("tower", "mlp", 2), {})
    if mr is not None:
        rows.append(("peak memory, `mlp`, 2 replicas (per replica) vs params+grads+activations+state",
                     f"{int(line['peak_mem_bytes']) / MB:.2f} MiB · {int(line['needed_bytes']) / MB:.2f} MiB",
                     "≤ 1.5×", mr, mr <= 1.5))

    m = r["machine"]
    out = []
    out.append(f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores; {m.get('date', '?')}; "
               f"PyTorch {m.get('torch', '?')}, OpenBLAS {m.get('openblas', '?')} "
               f"(OPENBLAS_CORETYPE={m.get('openblas_coretype') or 'auto'}, "
               f"OPENBLAS_L2_SIZE {m.get('openblas_l2_size', 'as the environment set it')}; "
               f"malloc {m.get('malloc', 'glibc defaults')}); "
               f"commit {m.get('commit', '?')}")
    out.append("")
    out.append("| figure | measured | target | ratio | verdict |")
    out.append("|---|---|---|---|---|")
    for fig, meas, target, x, ok in rows:
        rt = "—" if x is None else (f"{x * 100:.0f}%" if "%" in target else f"{x:.2f}×")
        out.append(f"| {fig} | {meas} | {target} | {rt} | {verdict(ok)} |")
    out.append("")
    out.append("Training throughput (median of 3 windows of equal duration; the loss after the "
               "last window shows the weights each figure was taken on):")
    out.append("")
    out.append("| run | workload | replicas | steps/s | samples/s | GFLOP/s | window s | loss after |")
    out.append("|---|---|---|---|---|---|---|---|")
    for key in sorted(T, key=lambda k: (k[1], k[0], k[2])):
        kind, w, n = key
        if kind == "tower_trace":
            continue  # the trace's A/B has its own rows above: on and off, not one rate
        line = T[key]
        label = kind
        if kind == "torch_single":
            label = f"torch_single best ({line.get('threads')} torch × {line.get('blas_threads')} BLAS threads)"
        elif kind.startswith("tower_beside_v"):
            label = f"tower, windows alternating with deterministic V={kind[len('tower_beside_v'):]}"
        elif kind.startswith("tower_deterministic_v"):
            label = f"tower --deterministic, {kind[len('tower_deterministic_v'):]} virtual shards"
        elif kind.startswith("torch_single_"):
            label = f"torch_single {line.get('threads')} torch × {line.get('blas_threads')} BLAS threads"
        out.append(f"| {label} | {w} | {n} | {f(float(line['steps_per_s']))} | "
                   f"{f(float(line['samples_per_s']))} | {f(float(line['gflops']), 2)} | "
                   f"{line.get('window_s', '—')} | {line.get('loss_last', '—')} |")
    out.append("")
    out.append("SGEMM 1024³ (GFLOP/s): " + ", ".join(
        f"{k} {v if not isinstance(v, list) else '/'.join(str(x) for x in v)}" for k, v in sorted(G.items())))
    out.append("")
    for n in sorted({k[1] for k in AR}):
        tw, gl, mp = AR.get(("tower", n), {}), AR.get(("gloo", n), {}), AR.get(("mpi", n), {})
        if not tw:
            continue
        mc = MC.get(n, {})
        out.append(f"All-reduce, {n} replicas (busbw GB/s; latency µs). Roofline: memcpy of "
                   f"{mc.get('mb', '?')} MB, {n} threads {f(mc.get('tn'), 2)} GB/s "
                   f"(1 thread {f(mc.get('t1'), 2)} GB/s):")
        out.append("")
        out.append("| bytes | Tower latency | Tower busbw | busbw / memcpy | memcpy of this size (same threads) | gloo latency | gloo busbw | MPI latency | MPI busbw |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for size in sorted(tw):
            t, g, mm = tw[size], gl.get(size, {}), mp.get(size, {})
            out.append(f"| {size} | {f(t['latency_us'], 2)} | {f(t['busbw_GB/s'], 2)} | "
                       f"{f(t.get('bus/memcpy'), 2)} | {f(t.get('memcpy_size_GB/s'), 2)} | "
                       f"{f(g.get('latency_us'), 1)} | {f(g.get('busbw_GB/s'), 3)} | "
                       f"{f(mm.get('latency_us'), 1)} | {f(mm.get('busbw_GB/s'), 3)} |")
        out.append("")
    for kind, lines in sorted(r["sweep"].items()):
        out.append(f"Sweep `{kind}` (2 replicas):")
        out.append("")
        out.append("| params | global batch | µs/step | ns per (param × sample) | GFLOP/s |")
        out.append("|---|---|---|---|---|")
        for line in sorted(lines, key=lambda l: (int(l["params"]), int(l["global_batch"]))):
            us = 1e6 / float(line["steps_per_s"])
            per = us * 1e3 / (int(line["params"]) * int(line["global_batch"]))
            out.append(f"| {int(line['params']):,} | {line['global_batch']} | {us:.1f} | {per:.4f} | "
                       f"{float(line['gflops']):.1f} |")
        out.append("")
    text = "\n".join(out)
    print(text)
    with open(os.path.join(a.dir, "report.md"), "w") as fh:
        fh.write(text + "\n")
    with open(os.path.join(a.dir, "results.json"), "w") as fh:
        json.dump({"machine": m, "gemm": G,
                   "train": {"/".join(map(str, k)): v for k, v in T.items()},
                   "allreduce": {f"{k[0]}/{k[1]}": v for k, v in AR.items()},
                   "targets": [dict(figure=fg, measured=me, target=tg, ratio=x, met=ok)
                               for fg, me, tg, x, ok in rows]}, fh, indent=1)
    if a.plots:
        plot(r, a.plots, a.plot_format)


def plot(r, d, fmt="svg"):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing: no plots (apt-get install python3-matplotlib)", file=sys.stderr)
        return
    os.makedirs(d, exist_ok=True)
    T, AR = r["train"], r["allreduce"]
    date = r["machine"].get("date", "")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (w, key, label) in zip(axes, [("linreg", "steps_per_s", "steps/s"),
                                          ("mlp", "samples_per_s", "samples/s")]):
        tower = sorted((n, float(v[key])) for (k, ww, n), v in T.items() if k == "tower" and ww == w)
        ddp = sorted((n, float(v[key])) for (k, ww, n), v in T.items() if k == "torch_ddp" and ww == w)
        single = T.get(("torch_single", w, 1))
        if tower:
            ax.plot(*zip(*tower), "o-", label="Tower (logical CPU replicas)")
        if ddp:
            ax.plot(*zip(*ddp), "s-", label="PyTorch DDP gloo (processes)")
        if single:
            ax.axhline(float(single[key]), color="gray", ls="--",
                       label=f"PyTorch single process (best threads)")
        ax.set_xticks([1, 2, 4])
        ax.set_xlabel("replicas / processes")
        ax.set_ylabel(label)
        if w == "linreg":
            ax.set_yscale("log")
        ax.set_title(f"{w}: global batch {'64' if w == 'linreg' else '256'}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Training throughput vs replicas ({date}, 2 cores)")
    fig.tight_layout()
    fig.savefig(os.path.join(d, "throughput_vs_replicas." + fmt))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 5))
    styles = {"tower": "o-", "gloo": "s-", "mpi": "^-"}
    names = {"tower": "Tower in-process", "gloo": "PyTorch gloo", "mpi": "MPI_Allreduce (Open MPI)"}
    for (kind, n), rows in sorted(AR.items()):
        if not rows:
            continue
        xs = sorted(rows)
        ax.plot(xs, [rows[x]["busbw_GB/s"] for x in xs], styles[kind], label=f"{names[kind]}, {n} replicas",
                alpha=1.0 if n == 2 else 0.6)
        mc = r["memcpy"].get(n)
        if kind == "tower" and mc:
            ax.axhline(mc["tn"], ls=":", color=ax.lines[-1].get_color(),
                       label=f"memcpy {mc['mb']} MB, {n} threads (roofline)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per replica")
    ax.set_ylabel("busbw, GB/s (algbw · 2(n−1)/n)")
    ax.set_title(f"All-reduce bandwidth vs size ({date}, 2 cores)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "allreduce_bandwidth." + fmt))
    plt.close(fig)

    S = r["sweep"]
    if S:
        fig, axes = plt.subplots(1, len(S), figsize=(5 * len(S), 4))
        if len(S) == 1:
            axes = [axes]
        for ax, (kind, lines) in zip(axes, sorted(S.items())):
            xkey = "params" if "hidden" in kind else "global_batch"
            pts = sorted((int(l[xkey]), 1e6 / float(l["steps_per_s"])) for l in lines)
            ax.plot(*zip(*pts), "o-", label="measured")
            # Least-squares line a + b·x on linear axes: per-step cost grows linearly when
            # the points follow it (a: the fixed cost of a step, b: the cost per unit).
            xs, ys = zip(*pts)
            mx, my = statistics.mean(xs), statistics.mean(ys)
            b = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x in xs)
            a0 = my - b * mx
            ax.plot(xs, [a0 + b * x for x in xs], "--", color="gray",
                    label=f"least squares: {a0:.1f} µs + {b:.3g} µs·x")
            ax.set_xlabel("parameters" if xkey == "params" else "global batch")
            ax.set_ylabel("µs per step")
            ax.set_title(f"sweep: {kind} (2 replicas)")
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(d, "step_cost_sweep." + fmt))
        plt.close(fig)


if __name__ == "__main__":
    main()
