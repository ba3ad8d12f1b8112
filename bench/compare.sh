#!/bin/bash
# Runs Tower's benchmarks and their PyTorch / OpenBLAS / MPI peers side by side on this
# machine, then prints the table of ratios for every target of docs/BENCHMARKS.md.
#
#   bench/compare.sh                      # everything, about 22-27 minutes on 2 cores
#   bench/compare.sh --sweep              # plus the parameter / batch sweep of the step cost
#   bench/compare.sh --plots=docs         # and write the plots (SVG) there
#   bench/compare.sh --out=/tmp/run1      # where the raw outputs go (default: a new temp dir)
#   bench/compare.sh --report-only --out=/tmp/run1 --plots=docs   # re-analyse a run
#   bench/compare.sh --rounds=5           # alternating rounds of Tower's replica counts (default 5)
#
# The ratios between replica counts, against PyTorch single, and of the mlp's 2 replicas
# against the 2-thread SGEMM roofline and against its products alone are also taken from
# ROUNDS alternating rounds (every replica count, the roofline, the products alone and PyTorch
# once per round, windows of 1 s or less;
# the median over rounds of each round's ratio): this 2-core guest runs two busy threads at
# two speeds about 2x apart, switching every few minutes, and figures taken minutes apart
# can fall in different phases.
#
# Each program takes the median of 3 timed windows after warm-up. Before each measurement
# the script waits (up to WAIT_MAX seconds, default 600) until the other processes on the
# machine use less than BUSY_MAX percent of the CPUs (default 20) over 2 seconds: figures
# taken while someone compiles are worthless on 2 cores.
#
# Installs python3-torch and libopenblas0-pthread with apt-get when PyTorch is missing (as
# root; otherwise prints the command). The PyTorch peers get their best configuration: the
# OpenBLAS core type that gives the fastest SGEMM here (the environment may force a slower
# one), glibc's malloc keeping freed memory where that makes PyTorch's step faster (every
# program then runs so), and for the single-process peer the fastest of PyTorch × OpenBLAS
# thread counts.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=""
PLOTS=""
SWEEP=0
REPORT_ONLY=0
REPLICAS="1 2 4 8"
ROUNDS=5
for arg in "$@"; do
  case "$arg" in
    --out=*) OUT="${arg#--out=}" ;;
    --plots=*) PLOTS="${arg#--plots=}" ;;
    --sweep) SWEEP=1 ;;
    --report-only) REPORT_ONLY=1 ;;
    --replicas=*) REPLICAS="${arg#--replicas=}" ;;
    --rounds=*) ROUNDS="${arg#--rounds=}" ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done
PY=/usr/bin/python3
[[ -n "$OUT" ]] || OUT="$(mktemp -d /tmp/tower-bench.XXXXXX)"
mkdir -p "$OUT"
REPORT_ARGS=("$OUT")
[[ -n "$PLOTS" ]] && REPORT_ARGS+=(--plots="$PLOTS")

if [[ "$REPORT_ONLY" == 1 ]]; then
  exec "$PY" bench/report.py "${REPORT_ARGS[@]}"
fi

# ---- Peers' packages.
if ! "$PY" -c "import torch" 2>/dev/null || ! ls /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas*.so* >/dev/null 2>&1; then
  if [[ "$(id -u)" == 0 ]]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch libopenblas0-pthread >/dev/null
  else
    echo "PyTorch is missing: sudo apt-get install -y python3-torch libopenblas0-pthread" >&2
    exit 1
  fi
fi

# ---- Tower's programs, copied out of bazel-bin so that a concurrent build cannot swap them.
# (`bazel info bazel-bin`, not the bazel-bin link: another build with other flags, e.g.
# --config=fuzz, may have repointed the link.)
./bazelw build //bench:train_bench //bench:allreduce_bench //bench:gemm_roofline >&2
BAZEL_BIN="$(./bazelw info bazel-bin 2>/dev/null)"
BIN="$OUT/bin"
mkdir -p "$BIN"
for b in train_bench allreduce_bench gemm_roofline; do cp -f "$BAZEL_BIN/bench/$b" "$BIN/"; done
HAVE_MPI=0
if command -v mpicc >/dev/null && mpicc -O2 -o "$BIN/mpi_allreduce" bench/peers/mpi_allreduce.c 2>/dev/null; then
  HAVE_MPI=1
fi

# ---- Waiting for a quiet machine.
source bench/quiet.sh
run() {  # run FILE CMD...: waits for quiet, runs CMD, output to $OUT/FILE and the terminal
  local file="$1"; shift
  # Bounded: a peer whose worker hangs at teardown (seen once with DDP, 4 processes) must not
  # stall the run; a program cut off prints no figure, and the report shows "—".
  { wait_quiet; timeout --kill-after=10 600 "$@" 2>/dev/null; } | tee "$OUT/$file" |
    grep -v '^# busy' >&2 || true
}

{
  echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu=$(lscpu | sed -n 's/^Model name: *//p')"
  echo "cores=$(nproc)"
  echo "kernel=$(uname -r)"
  echo "torch=$("$PY" -c 'import torch; print(torch.__version__)')"
  echo "openblas=$(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null || echo none)"
  echo "compiler=$(clang --version | head -1)"
  echo "commit=$(git rev-parse --short HEAD)$(git diff --quiet -- bench ops strategy device model || echo +dirty)"
} > "$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

# ---- The peer at its best. The environment may set OPENBLAS_L2_SIZE and OPENBLAS_CORETYPE
# for old OpenBLAS builds: the L2 size alone cost Debian's OpenBLAS about 40 % of its SGEMM
# rate on a Zen 5 host (one thread, 1024^3: 110 against 190 GFLOP/s), and a forced Haswell
# halves it on an AVX-512 machine. Every peer runs without the L2 size, and with the best
# core type of: none (OpenBLAS's own detection), the environment's, SkylakeX, Zen, Haswell.
unset OPENBLAS_L2_SIZE
env_core="${OPENBLAS_CORETYPE:-}"
best_core="none"; best_rate=0
for core in none "$env_core" SkylakeX Zen Haswell; do
  [[ -z "$core" ]] && continue
  if [[ "$core" == none ]]; then set_core=(env -u OPENBLAS_CORETYPE); else set_core=(env "OPENBLAS_CORETYPE=$core"); fi
  rate=$("${set_core[@]}" OPENBLAS_NUM_THREADS=1 "$PY" bench/peers/torch_gemm.py --threads=1 --iters=10 2>/dev/null |
         sed -n 's/^torch_sgemm .*gflops=\([0-9.]*\).*/\1/p')
  echo "# OPENBLAS_CORETYPE=${core}: ${rate:-?} GFLOP/s (1 thread, OPENBLAS_L2_SIZE unset)" >&2
  if [[ -n "$rate" ]] && "$PY" -c "import sys; sys.exit(0 if $rate > $best_rate else 1)"; then
    best_core="$core"; best_rate="$rate"
  fi
done
if [[ "$best_core" == none ]]; then unset OPENBLAS_CORETYPE; else export OPENBLAS_CORETYPE="$best_core"; fi
echo "openblas_coretype=${best_core}" >> "$OUT/machine.txt"
echo "openblas_l2_size=unset" >> "$OUT/machine.txt"

# ---- The peer's allocator. PyTorch's CPU tensors come from glibc's malloc, which hands a
# block above its mmap threshold back to the kernel when it is freed: every step's new
# gradient of the mlp's 1024 x 1024 layer (4 MiB) then takes fresh pages and faults them in.
# On the paravirtualised host of 2026-11-29 that made one product 10.8 ms instead of 3.1
# (the same product into a kept output) and PyTorch's mlp step 2x slower. glibc's documented
# tunables keep freed memory in the heap (the allocator advice of PyTorch's CPU tuning guide,
# there with jemalloc or tcmalloc); both settings are tried on PyTorch's mlp step, two
# alternating pairs, and every program (Tower's too) runs with the faster.
KEEP_HEAP="glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296"
torch_mlp_rate() {  # torch_mlp_rate ENV...: PyTorch's mlp steps/s (1 torch x 2 BLAS threads)
  env "$@" "$PY" bench/peers/torch_train.py --workload=mlp --threads=1 --blas-threads=2 \
    --window-s=1 --warmup-s=0.5 2>/dev/null | sed -n 's/^torch_single .*steps_per_s=\([0-9.]*\).*/\1/p' | head -1
}
plain_total=0; kept_total=0
for pair in 1 2; do
  plain=$(torch_mlp_rate -u GLIBC_TUNABLES); kept=$(torch_mlp_rate GLIBC_TUNABLES="$KEEP_HEAP")
  echo "# malloc: glibc defaults ${plain:-?}, heap kept ${kept:-?} steps/s (PyTorch mlp)" >&2
  plain_total=$("$PY" -c "print($plain_total + ${plain:-0})"); kept_total=$("$PY" -c "print($kept_total + ${kept:-0})")
done
if "$PY" -c "import sys; sys.exit(0 if $kept_total > $plain_total else 1)"; then
  export GLIBC_TUNABLES="$KEEP_HEAP"
  echo "malloc=heap kept (GLIBC_TUNABLES=$KEEP_HEAP)" >> "$OUT/machine.txt"
else
  unset GLIBC_TUNABLES
  echo "malloc=glibc defaults" >> "$OUT/machine.txt"
fi

echo "== SGEMM rooflines" >&2
run gemm_tower.txt "$BIN/gemm_roofline"
# The mlp's products at the rows one replica gets with 4 and 8 replicas: what bounds
# those replica counts on this machine.
for b in 64 32; do
  run "gemm_tower_b$b.txt" "$BIN/gemm_roofline" --batch=$b --replica_products=false
done
for t in 1 2; do
  run "gemm_torch_t$t.txt" env OPENBLAS_NUM_THREADS=$t "$PY" bench/peers/torch_gemm.py --threads=$t
done
# OpenBLAS's ceiling on an mlp step: its products alone, as 2, 4 and 8 replicas would run them
# (a process per replica, one OpenBLAS thread each), and, for comparison, the whole batch's
# products on both cores at once (one replica's step with 2 threads).
run gemm_torch_mlp.txt env OPENBLAS_NUM_THREADS=1 "$PY" bench/peers/torch_mlp_products.py \
  --replicas=2,4,8
run gemm_torch_mlp_whole.txt env OPENBLAS_NUM_THREADS=2 "$PY" bench/peers/torch_mlp_products.py \
  --replicas=1 --blas-threads=2

echo "== Training throughput" >&2
for w in linreg mlp; do
  for n in $REPLICAS; do
    run "train_tower_${w}_$n.txt" "$BIN/train_bench" --workload=$w --replicas=$n
    # Deterministic mode against today's path in one process, timed windows alternating:
    # one virtual shard per replica, then 8 (what a job reproducible on 1 to 8 replicas
    # pays on this replica count).
    [[ "$n" -gt 4 ]] && continue  # deterministic mode: 1, 2 and 4 replicas are enough
    for v in $n 8; do
      run "train_ab${v}_${w}_$n.txt" "$BIN/train_bench" --workload=$w --replicas=$n \
        --ab-deterministic --virtual-shards=$v
    done
  done
  run "train_torch_$w.txt" "$PY" bench/peers/torch_train.py --workload=$w
  for n in $REPLICAS; do
    [[ "$n" == 1 || "$n" -gt 4 ]] && continue  # 8 gloo processes on 2 cores: not a peer
    run "train_ddp_${w}_$n.txt" "$PY" bench/peers/torch_ddp.py --workload=$w --replicas=$n
  done
done

echo "== Mixed precision: float32 and mixed_bfloat16 in one process, windows alternating" >&2
for n in 1 2; do
  run "train_precision_mlp_$n.txt" "$BIN/train_bench" --workload=mlp --replicas=$n \
    --ab-precision --precision=mixed_bfloat16
done

echo "== The trace's cost: off and on, windows alternating" >&2
for n in 1 2; do
  run "train_trace_mlp_$n.txt" "$BIN/train_bench" --workload=mlp --replicas=$n --ab-trace \
    --repeats=6
done

# PyTorch single process at the thread setting that won above, once per round beside
# Tower's replica counts: the ratios against it then share the host's phase as well (its
# figure above is taken minutes away from Tower's, and moved 2x between runs).
torch_best_setting() {  # <workload> -> "--threads=T --blas-threads=B", or nothing
  sed -n 's/^torch_single_best .* threads=\([0-9]*\) blas_threads=\([0-9]*\).*/--threads=\1 --blas-threads=\2/p' \
    "$OUT/train_torch_$1.txt" 2>/dev/null | head -1
}
echo "== Tower's replica counts and PyTorch single in $ROUNDS alternating rounds" >&2
for k in $(seq 1 "$ROUNDS"); do
  # The replica counts in order in odd rounds and in reverse in even ones: a drift of the
  # host within a round (seen in run AC: every later count slower in 3 rounds of 5) then
  # falls on every count alike, instead of always on the last.
  order="$REPLICAS"
  if ((k % 2 == 0)); then order="$(printf '%s\n' $REPLICAS | tac | tr '\n' ' ')"; fi
  for w in linreg mlp; do
    for n in $order; do
      run "train_rounds_${w}_${n}_r$k.txt" "$BIN/train_bench" --workload=$w --replicas=$n \
        --window-s=1
    done
    # 2 replicas computing their rows as one batch (--batch-replica-rows: the default from run
    # AH to 2026-11-29; its kernels on both cores, no all-reduce between the replicas): a
    # reference beside the default (each replica its own shard) in every round, so that each
    # host shows what simulating the devices costs there (docs/BENCHMARKS.md).
    run "train_batched_rounds_${w}_2_r$k.txt" "$BIN/train_bench" --workload=$w --replicas=2 \
      --batch-replica-rows --window-s=1
    if [[ "$w" == mlp ]]; then
      # The 2-thread SGEMM roofline right after the mlp's replica counts: the mlp's fraction
      # of it then compares one state of the host (the figure above is minutes away).
      # With Tower's own products of the 2 replicas' step alone, as the step computes them.
      run "gemm_rounds_tower_r$k.txt" "$BIN/gemm_roofline" --square_only --as_step_products
      run "gemm_rounds_torch_r$k.txt" env OPENBLAS_NUM_THREADS=2 "$PY" bench/peers/torch_gemm.py \
        --threads=2
      # And what the step's products alone reach in this state (OpenBLAS, the whole batch on
      # 2 threads, and 2 replicas a process and a thread each): the most any step could.
      run "gemm_rounds_torch_mlp_whole_r$k.txt" env OPENBLAS_NUM_THREADS=2 "$PY" \
        bench/peers/torch_mlp_products.py --replicas=1 --blas-threads=2 --window-s=1
      run "gemm_rounds_torch_mlp_r$k.txt" env OPENBLAS_NUM_THREADS=1 "$PY" \
        bench/peers/torch_mlp_products.py --replicas=2 --window-s=1
    fi
    setting="$(torch_best_setting $w)"
    if [[ -n "$setting" ]]; then
      # shellcheck disable=SC2086  # two flags
      run "torch_rounds_${w}_r$k.txt" "$PY" bench/peers/torch_train.py --workload=$w $setting \
        --window-s=1
    fi
  done
  # What bounds linreg's 2 vs 1 replica in this round: each core's rate at one replica's
  # share of a 2-replica step (32 of the 64 rows), the process pinned to that core. The
  # host's two cores run at different speeds in some phases (docs/BENCHMARKS.md).
  for ((c = 0; c < $(nproc); c++)); do
    run "core_rounds_linreg_c${c}_r$k.txt" taskset -c "$c" "$BIN/train_bench" \
      --workload=linreg --replicas=1 --global-batch=32 --window-s=1
  done
done

echo "== All-reduce" >&2
for n in $REPLICAS; do
  [[ "$n" == 1 ]] && continue
  run "allreduce_tower_$n.txt" "$BIN/allreduce_bench" --replicas=$n
  run "allreduce_gloo_$n.txt" "$PY" bench/peers/torch_allreduce.py --replicas=$n
  if [[ "$HAVE_MPI" == 1 ]]; then
    run "allreduce_mpi_$n.txt" mpirun --allow-run-as-root --oversubscribe --bind-to none -np $n "$BIN/mpi_allreduce"
  fi
done

if [[ "$SWEEP" == 1 ]]; then
  echo "== Step cost sweep (mlp, 2 replicas)" >&2
  for h in 128 256 512 1024 2048; do
    run "sweep_hidden_$h.txt" "$BIN/train_bench" --workload=mlp --replicas=2 --hidden=$h --steps=100
  done
  for b in 64 128 256 512 1024 2048; do
    run "sweep_batch_$b.txt" "$BIN/train_bench" --workload=mlp --replicas=2 --global-batch=$b --steps=60
  done
  for b in 16 64 256 1024 4096 16384; do
    run "sweep_linreg_batch_$b.txt" "$BIN/train_bench" --workload=linreg --replicas=2 --global-batch=$b --steps=5000
  done
fi

echo "== Report (raw outputs in $OUT)" >&2
"$PY" bench/report.py "${REPORT_ARGS[@]}"
