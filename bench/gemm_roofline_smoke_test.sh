#!/bin/bash
# Runs gemm_roofline once with small sizes; fails unless it prints every figure, each a
# positive finite number (a NaN, an inf or a zero rate fails). Not a timing.
set -euo pipefail
bench="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-tower}/bench/gemm_roofline"
[[ -x "$bench" ]] || bench="$(dirname "$0")/gemm_roofline"
out="$("$bench" --size=128 --repeats=1 --iters=1 --batch=32)"
echo "$out"
positive='(0\.[0-9]*[1-9][0-9]*|[1-9][0-9]*\.[0-9]+)'  # > 0 and finite: not 0.0, nan or inf
[[ "$(grep -Ec "^eigen_sgemm size=128 threads=[12] gflops=$positive" <<<"$out")" == 3 ]]
grep -Eq "^eigen_sgemm mlp_shapes batch=32 threads=1 forward=$positive weight_grad=$positive input_grad=$positive gflops$" <<<"$out"
grep -Eq "^tower_products mlp_shapes batch=32 threads=1 weight_packed_per=8 forward=$positive weight_grad=$positive input_grad=$positive gflops$" <<<"$out"
for kind in eigen onednn_packed_once tower_as_step; do
  for replicas in 2 4 8; do
    grep -Eq "^mlp_replica_products kind=$kind replicas=$replicas threads=2 rows=$((256 / replicas)) steps_per_s=$positive vs_2_replicas=$positive$" <<<"$out"
  done
done
# Without the step's products: the per-batch runs of compare.sh.
out="$("$bench" --size=128 --repeats=1 --iters=1 --batch=32 --replica_products=false)"
if grep -q mlp_replica_products <<<"$out"; then
  echo "FAIL: --replica_products=false still timed the step's products" >&2
  exit 1
fi
# The roofline alone (compare.sh's rounds): the three square figures and nothing else.
out="$("$bench" --size=128 --repeats=1 --iters=1 --square_only)"
[[ "$(grep -Ec "^eigen_sgemm size=128 threads=[12] gflops=$positive" <<<"$out")" == 3 ]]
if grep -q -e mlp_shapes -e mlp_replica_products <<<"$out"; then
  echo "FAIL: --square_only still timed the mlp's products" >&2
  exit 1
fi
# With --as_step_products: then the 2 replicas' products as the step computes them, only.
out="$("$bench" --size=128 --repeats=1 --iters=1 --square_only --as_step_products)"
[[ "$(grep -Ec "^eigen_sgemm size=128 threads=[12] gflops=$positive" <<<"$out")" == 3 ]]
[[ "$(grep -c mlp_replica_products <<<"$out")" == 1 ]]
grep -Eq "^mlp_replica_products kind=tower_as_step replicas=2 threads=2 rows=128 steps_per_s=$positive vs_2_replicas=1.000$" <<<"$out"
# A count below 1 is refused with the flag's name and exit code 2, before any work.
for flag in --size=0 --threads=0 --repeats=0 --iters=-1 --batch=0; do
  rc=0
  err="$("$bench" "$flag" 2>&1 >/dev/null)" || rc=$?
  [[ "$rc" == 2 && "$err" == *"${flag%%=*}="*"must be at least 1"* ]] || {
    echo "FAIL: $flag gave exit code $rc and: $err" >&2
    exit 1
  }
done
echo PASS
