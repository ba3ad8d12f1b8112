#!/bin/bash
# Feeds bench/report.py the raw outputs of a made-up run and checks the ratios it takes from
# alternating rounds: each round's `mlp` 2 replicas against the fastest 2-thread SGEMM of
# that round (Eigen's independent products, Eigen's split product or OpenBLAS), then the
# median over rounds; a NaN figure or a zero denominator in any round fails the target. And
# the bounds of the same rounds: the step's products alone (the faster of OpenBLAS's two ways)
# against the roofline and against PyTorch single, and the step against them; and 2 replicas
# on one replica thread, an option measured beside the default; Tower's own products alone, in
# the rounds and, for 8 vs 2 replicas, in gemm_roofline's three designs. Not a timing.
set -euo pipefail
report="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-tower}/bench/report.py"
[[ -f "$report" ]] || report="$(dirname "$0")/report.py"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

square() {  # square FILE T2 T2_SPLIT: gemm_roofline --square_only's three lines
  printf 'eigen_sgemm size=1024 threads=1 gflops=110.0\n' > "$1"
  printf 'eigen_sgemm size=1024 threads=2 gflops=%s (independent products)\n' "$2" >> "$1"
  printf 'eigen_sgemm size=1024 threads=2 gflops=%s (one product split by columns)\n' "$3" >> "$1"
}
mlp() {  # mlp FILE GFLOPS: a train_bench line of the mlp's 2 replicas
  echo "workload=mlp replicas=2 steps_per_s=90.0 samples_per_s=23040 gflops=$1" > "$2"
}
# The single windows, minutes away from each other: 190 of the fastest, OpenBLAS's 220.
square "$dir/gemm_tower.txt" 200.0 210.0
echo "torch_sgemm size=1024 threads=2 gflops=220.0" > "$dir/gemm_torch_t2.txt"
mlp 190.0 "$dir/train_tower_mlp_2.txt"
# Round 1: OpenBLAS is the fastest (220): 200 / 220. Round 2: Eigen's split product (200, and
# OpenBLAS 150): 190 / 200. Round 3: Eigen's independent products (250): 150 / 250.
square "$dir/gemm_rounds_tower_r1.txt" 200.0 210.0
echo "torch_sgemm size=1024 threads=2 gflops=220.0" > "$dir/gemm_rounds_torch_r1.txt"
mlp 200.0 "$dir/train_rounds_mlp_2_r1.txt"
square "$dir/gemm_rounds_tower_r2.txt" 180.0 200.0
echo "torch_sgemm size=1024 threads=2 gflops=150.0" > "$dir/gemm_rounds_torch_r2.txt"
mlp 190.0 "$dir/train_rounds_mlp_2_r2.txt"
square "$dir/gemm_rounds_tower_r3.txt" 250.0 240.0
echo "torch_sgemm size=1024 threads=2 gflops=230.0" > "$dir/gemm_rounds_torch_r3.txt"
mlp 150.0 "$dir/train_rounds_mlp_2_r3.txt"

# The step's products alone in the same rounds (OpenBLAS: the whole batch on 2 threads, and 2
# replicas a thread each; the faster counts) and PyTorch single, GFLOP/s:
#   round 1: products 190 and 210, PyTorch 180; round 2: 150 and 190, PyTorch 170;
#   round 3: 240 and 230, PyTorch 160.
products() {  # products ROUND WHOLE TWO TORCH
  echo "torch_mlp_products replicas=1 rows=256 steps_per_s=1 gflops=$2" \
    > "$dir/gemm_rounds_torch_mlp_whole_r$1.txt"
  echo "torch_mlp_products replicas=2 rows=128 steps_per_s=1 gflops=$3" \
    > "$dir/gemm_rounds_torch_mlp_r$1.txt"
  echo "torch_single workload=mlp replicas=1 steps_per_s=1 samples_per_s=20000 gflops=$4" \
    > "$dir/torch_rounds_mlp_r$1.txt"
}
products 1 190.0 210.0 180.0
products 2 150.0 190.0 170.0
products 3 240.0 230.0 160.0

target() {  # target DIR NEEDLE: "ratio met" of the one target whose figure contains NEEDLE
  python3 - "$1/results.json" "$2" <<'PY'
import json, sys
rows = [t for t in json.load(open(sys.argv[1]))["targets"] if sys.argv[2] in t["figure"]]
assert len(rows) == 1, f"{len(rows)} targets contain {sys.argv[2]!r}"
print(f"{rows[0]['ratio']:.6f} {rows[0]['met']}")
PY
}
printf 'malloc=heap kept (GLIBC_TUNABLES=x)\nopenblas_l2_size=unset\n' > "$dir/machine.txt"
python3 "$report" "$dir" > "$dir/out.txt"
# The header names the peers' settings: the allocator's too (compare.sh picks it).
head -1 "$dir/out.txt" | grep -q "OPENBLAS_L2_SIZE unset; malloc heap kept (GLIBC_TUNABLES=x))" || {
  echo "FAIL: the header does not name the allocator's setting: $(head -1 "$dir/out.txt")" >&2; exit 1; }
rounds="2 replicas, GFLOP/s vs 2-thread SGEMM roofline, median"
got="$(target "$dir" "$rounds")"
want="$(python3 -c 'print(f"{200 / 220:.6f} True")')"  # the median of 0.909, 0.95, 0.6
[[ "$got" == "$want" ]] || { echo "FAIL: rounds: got '$got', want '$want'" >&2; exit 1; }
got="$(python3 - "$dir/results.json" <<'PY'
import json, sys
rows = [t for t in json.load(open(sys.argv[1]))["targets"]
        if t["figure"].startswith("`mlp`, 2 replicas, GFLOP/s vs 2-thread SGEMM roofline")
        and "rounds" not in t["figure"]]
print(f"{rows[0]['ratio']:.6f} {rows[0]['met']}")
PY
)"
want="$(python3 -c 'print(f"{190 / 220:.6f} False")')"
[[ "$got" == "$want" ]] || { echo "FAIL: single windows: got '$got', want '$want'" >&2; exit 1; }
grep -q "3 rounds: 60.0%, 90.9%, 95.0%" "$dir/out.txt" || {
  echo "FAIL: the rounds' ratios are not listed" >&2; exit 1; }
# The products alone against the roofline: 210/220, 190/200, 240/250 (median 210/220); the
# step against them: 200/210, 190/190, 150/240; them against PyTorch: 210/180, 190/170,
# 240/160.
for pair in "products alone (the faster:$(python3 -c 'print(f"{210 / 220:.6f}")')" \
            "vs those products alone, median:$(python3 -c 'print(f"{200 / 210:.6f}")')" \
            "those products alone vs PyTorch:$(python3 -c 'print(f"{210 / 180:.6f}")')"; do
  got="$(target "$dir" "${pair%%:*}")"
  [[ "$got" == "${pair#*:} None" ]] || {
    echo "FAIL: '${pair%%:*}': got '$got', want '${pair#*:} None'" >&2; exit 1; }
done
# Tower's own products of the 2 replicas' step alone, as the step computes them, in the same
# rounds: 110, 100 and 120 steps/s, GFLOP/s at 256 × 7,346,176 FLOPs a step; against the
# roofline (220, 200, 250) and the step against them.
own() {  # own ROUND STEPS_PER_S: gemm_roofline --as_step_products's line, after the square's
  printf 'mlp_replica_products kind=tower_as_step replicas=2 threads=2 rows=128 steps_per_s=%s vs_2_replicas=1.000\n' \
    "$2" >> "$dir/gemm_rounds_tower_r$1.txt"
}
own 1 110.0
own 2 100.0
own 3 120.0
python3 "$report" "$dir" > "$dir/out.txt"
flops=1.880621056  # GFLOP a step
for pair in "Tower's mlp products alone, 2 replicas on 2 threads as the step computes them, vs the roofline, median:$(python3 -c "print(f'{110 * $flops / 220:.6f}')")" \
            "2 replicas vs Tower's products alone, median:$(python3 -c "print(f'{200 / (110 * $flops):.6f}')")"; do
  got="$(target "$dir" "${pair%%:*}")"
  [[ "$got" == "${pair#*:} None" ]] || {
    echo "FAIL: '${pair%%:*}': got '$got', want '${pair#*:} None'" >&2; exit 1; }
done
# The products alone of 8 vs 2 replicas in gemm_roofline's three designs (single window): as
# the step 125 / 160; the fastest design at each count, oneDNN's 130 at 8 against the step's
# 160 at 2.
for kind_rates in eigen:150:120 onednn_packed_once:100:130 tower_as_step:160:125; do
  IFS=: read -r kind two eight <<<"$kind_rates"
  for n_rate in "2:$two" "8:$eight"; do
    echo "mlp_replica_products kind=$kind replicas=${n_rate%%:*} threads=2 rows=1 steps_per_s=${n_rate#*:} vs_2_replicas=1.000" \
      >> "$dir/gemm_tower.txt"
  done
done
python3 "$report" "$dir" > "$dir/out.txt"
for pair in "products alone of 8 vs 2 replicas on 2 threads, as the step computes them:0.781250" \
            "products alone of 8 vs 2 replicas on 2 threads, the fastest:0.812500"; do
  got="$(target "$dir" "${pair%%:*}")"
  [[ "$got" == "${pair#*:} None" ]] || {
    echo "FAIL: '${pair%%:*}': got '$got', want '${pair#*:} None'" >&2; exit 1; }
done

# One way of the products broken (0 GFLOP/s) in one round is no bound, even beside the other.
products 1 0.0 210.0 180.0
python3 "$report" "$dir" > /dev/null
got="$(target "$dir" "products alone (the faster")"
[[ "$got" == "nan None" ]] || { echo "FAIL: a products figure of 0 gave '$got'" >&2; exit 1; }
products 1 190.0 210.0 180.0

# 2 replicas' rows as one batch (--batch-replica-rows), a reference beside the
# default, in the same rounds: GFLOP/s 210, 200, 240 against the roofline (220, 200, 250);
# the default's 23040 samples/s is 1.2×, 1× and 1.125× its 19200, 23040 and 20480.
batched() {  # batched ROUND SAMPLES GFLOPS
  echo "workload=mlp replicas=2 steps_per_s=90.0 samples_per_s=$2 gflops=$3" \
    > "$dir/train_batched_rounds_mlp_2_r$1.txt"
}
batched 1 19200 210.0
batched 2 23040 200.0
batched 3 20480 240.0
python3 "$report" "$dir" > "$dir/out.txt"
for pair in "rows as one batch (--batch-replica-rows), GFLOP/s vs 2-thread:$(python3 -c 'print(f"{240 / 250:.6f}")')" \
            "the default (each replica its own shard) vs their rows as one batch (--batch-replica-rows), samples/s:1.125000"; do
  got="$(target "$dir" "${pair%%:*}")"
  [[ "$got" == "${pair#*:} reference" ]] || {
    echo "FAIL: '${pair%%:*}': got '$got', want '${pair#*:} reference'" >&2; exit 1; }
done
grep -q "(a reference, not the default)" "$dir/out.txt" || {
  echo "FAIL: a reference's row is not marked as one" >&2; exit 1; }
batched 2 23040 nan
python3 "$report" "$dir" > /dev/null
got="$(target "$dir" "rows as one batch (--batch-replica-rows), GFLOP/s vs 2-thread")"
[[ "$got" == "nan reference" ]] || { echo "FAIL: a NaN batched round gave '$got'" >&2; exit 1; }
batched 2 nan 200.0
python3 "$report" "$dir" > /dev/null
got="$(target "$dir" "the default (each replica its own shard) vs their rows as one batch (--batch-replica-rows), samples/s")"
[[ "$got" == "nan reference" ]] || { echo "FAIL: a NaN batched samples/s gave '$got'" >&2; exit 1; }
batched 2 23040 200.0

# A NaN in one round (the mlp's, then a roofline's) fails the target, whatever the others.
mlp nan "$dir/train_rounds_mlp_2_r3.txt"
python3 "$report" "$dir" > /dev/null
got="$(target "$dir" "$rounds")"
[[ "$got" == "nan False" ]] || { echo "FAIL: a NaN mlp round gave '$got'" >&2; exit 1; }
mlp 150.0 "$dir/train_rounds_mlp_2_r3.txt"
square "$dir/gemm_rounds_tower_r2.txt" nan 200.0
python3 "$report" "$dir" > /dev/null
got="$(target "$dir" "$rounds")"
[[ "$got" == "nan False" ]] || { echo "FAIL: a NaN roofline round gave '$got'" >&2; exit 1; }
# So does a zero denominator: PyTorch's figure of 0 samples/s in one round.
[[ "$(target "$dir" "mlp\`, 2 replicas vs PyTorch single")" == "1.152000 False" ]] || {
  echo "FAIL: before the zero, 2 replicas vs PyTorch single" >&2; exit 1; }
echo "torch_single workload=mlp replicas=1 steps_per_s=1 samples_per_s=0 gflops=160.0" \
  > "$dir/torch_rounds_mlp_r3.txt"
python3 "$report" "$dir" > /dev/null
got="$(target "$dir" "mlp\`, 2 replicas vs PyTorch single")"
[[ "$got" == "nan False" ]] || { echo "FAIL: a round with PyTorch at 0 gave '$got'" >&2; exit 1; }
echo PASS
