#!/bin/bash
# Runs train_bench for a few steps of each workload; fails unless it prints its line and
# the loss falls. Not a timing: the figures of a test run mean nothing. Where GPUs are (the
# emulated ones of --config=cudaemu too) they are the default device; the cases about host
# replicas (variables shared, packings shared, mixed precision: CPU only in this version) keep to the CPU with --visible-gpus=none.
set -euo pipefail
bench="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-tower}/bench/train_bench"
[[ -x "$bench" ]] || bench="$(dirname "$0")/train_bench"
for args in "--workload=linreg --replicas=1 --steps=50 --batches=1" \
            "--workload=linreg --replicas=2 --steps=50 --batches=1" \
            "--workload=linreg --replicas=2 --steps=50 --batches=1 --round-trip" \
            "--workload=mlp --replicas=2 --steps=3 --lr=0.001 --batches=1" \
            "--workload=linreg --replicas=2 --steps=50 --batches=1 --deterministic" \
            "--workload=linreg --replicas=1 --steps=50 --batches=1 --deterministic --virtual-shards=1" \
            "--workload=linreg --replicas=2 --steps=50 --batches=1 --ab-deterministic" \
            "--workload=mlp --replicas=2 --steps=3 --lr=0.001 --batches=1 --hidden=64 --ab-share-variables --visible-gpus=none" \
            "--workload=mlp --replicas=2 --steps=3 --lr=0.001 --batches=1 --hidden=64 --ab-precision --precision=mixed_bfloat16 --visible-gpus=none" \
            "--workload=mlp --replicas=4 --inter-op-threads=2 --steps=3 --lr=0.001 --batches=1 --ab-share-packing --visible-gpus=none"; do
  out="$("$bench" $args --repeats=1 --warmup-s=0.01 --check-loss)"
  echo "$out"
  grep -q '^workload=.* replicas=.* steps_per_s=.* samples_per_s=.* gflops=' <<<"$out"
  if [[ "$args" == *--round-trip* ]]; then
    # Two round trips in ns, before and after the windows (0 on a single CPU).
    grep -Eq ' round_trip_ns=[0-9]+,[0-9]+$' <<<"$out"
  elif [[ "$args" == *--ab-deterministic* ]]; then
    # Two lines: today's path, then deterministic mode.
    [[ "$(grep -c '^workload=' <<<"$out")" == 2 ]]
    grep -q ' virtual_shards=0 ' <<<"$out"
    grep -q ' virtual_shards=8 ' <<<"$out"
  elif [[ "$args" == *--ab-share-variables* ]]; then
    # Two lines: a copy of the variables per replica, then one shared copy.
    [[ "$(grep -c '^workload=' <<<"$out")" == 2 ]]
    grep -q ' shared_variables=0 ' <<<"$out"
    grep -q ' shared_variables=1 ' <<<"$out"
  elif [[ "$args" == *--ab-precision* ]]; then
    # Two lines: float32, then the mixed policy.
    [[ "$(grep -c '^workload=' <<<"$out")" == 2 ]]
    grep -q ' precision=float32$' <<<"$out"
    grep -q ' precision=mixed_bfloat16$' <<<"$out"
  elif [[ "$args" == *--ab-share-packing* ]]; then
    # Two lines: each replica packing its weights, then one packing per thread (4 replicas
    # on 2 threads share them).
    [[ "$(grep -c '^workload=' <<<"$out")" == 2 ]]
    grep -q ' shared_packing=0 ' <<<"$out"
    grep -q ' shared_packing=1 ' <<<"$out"
  elif [[ "$args" == *--deterministic* ]]; then
    grep -q ' virtual_shards=[18] ' <<<"$out"
  else
    grep -q ' virtual_shards=0 ' <<<"$out"
  fi
  # Several logical CPU replicas share their variables by default; GPU replicas (the default
  # device where GPUs are, emulated ones included) each keep a copy on their device; one
  # replica has no one to share with.
  if [[ "$args" == *--replicas=2* && "$args" != *--ab-* ]]; then
    if grep -q ' cross_device_ops=in-process ' <<<"$out"; then
      grep -q ' shared_variables=1 ' <<<"$out"
    else
      grep -q ' shared_variables=0 ' <<<"$out"
    fi
  elif [[ "$args" == *--replicas=1* ]]; then
    grep -q ' shared_variables=0 ' <<<"$out"
  fi
done
# The FLOPs counted are those the step performs (docs/BENCHMARKS.md, "FLOPs"): for the mlp
# (256 -> 1024 -> 1024 -> 1), 2·(2·256·1024 + 3·1024·1024 + 3·1024) = 7346176 a sample, not
# 6 × its 1313793 parameters; for linreg (1 -> 1), 4.
for check in "mlp 7346176" "linreg 4"; do
  read -r workload flops <<<"$check"
  out="$("$bench" --workload=$workload --replicas=1 --steps=3 --batches=1 --repeats=1 --warmup-s=0.01)"
  echo "$out"
  python3 - "$out" "$flops" <<'PY'
import re, sys
line, flops = sys.argv[1], int(sys.argv[2])
samples = float(re.search(r" samples_per_s=([0-9.]+) ", line).group(1))
gflops = float(re.search(r" gflops=([0-9.]+) ", line).group(1))
want = samples * flops / 1e9
# gflops is printed to 0.01 (half of it: 0.005) and samples/s to the unit (half a sample).
if not abs(gflops - want) <= 0.005 + 0.5 * flops / 1e9 + 1e-9 * want:
    sys.exit(f"gflops={gflops} but {samples} samples/s x {flops} FLOPs = {want:.3f} GFLOP/s")
PY
done
# The trace's cost: one line with both rates and the events each traced step recorded.
out="$("$bench" --workload=mlp --replicas=2 --steps=3 --lr=0.001 --batches=1 --hidden=64 \
        --ab-trace --repeats=2 --warmup-s=0.01)"
echo "$out"
grep -q '^trace_overhead workload=mlp replicas=2 .*off_steps_per_s=.* on_steps_per_s=.* events_per_step=[1-9]' <<<"$out"
# Bad flags: one error line, a non-zero exit, nothing on stdout.
err="${TEST_TMPDIR:-/tmp}/train_bench_err.$$"
for args in "--workload=cnn" "--bucket-mb=0" "--replicas=x" "--window-s=0" \
            "--replicas=4 --deterministic --virtual-shards=2" "--deterministic --ab-deterministic" \
            "--ab-deterministic --ab-share-variables" "--precision=mixed_float32" \
            "--ab-trace --ab-precision" "--ab-share-packing --ab-fold-gradients"; do
  # (On the CPU: where GPUs are, creating them logs a line each before the flags' checks.)
  if out="$("$bench" $args --visible-gpus=none 2>"$err")"; then
    echo "train_bench $args should have failed"; exit 1
  fi
  [[ -z "$out" && "$(wc -l <"$err")" -eq 1 ]] || {
    echo "train_bench $args: expected one error line:"; cat "$err"; exit 1; }
done
rm -f "$err"
