#!/bin/bash
# Runs allreduce_bench on three small sizes; fails unless it prints its header and a row per
# size, and unless bad flags (its own --replicas check, and the strategy flags it shares with
# `tower train`, strategy/strategy_flags.h) give one error line. Not a timing. On the CPU
# (--visible-gpus=none): its replicas are logical CPUs.
set -euo pipefail
bench="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-tower}/bench/allreduce_bench"
[[ -x "$bench" ]] || bench="$(dirname "$0")/allreduce_bench"
small=(--min-bytes=4096 --max-bytes=16384 --repeats=1 --target-ms=1 --memcpy-mb=1
       --visible-gpus=none)
for check in "2 in-process|" "3 in-process|--replicas=3" "2 to-cpu|--cross-device-ops=to-cpu"; do
  read -r replicas ops <<<"${check%%|*}"
  args="${check#*|}"
  out="$("$bench" $args "${small[@]}")"
  echo "$out"
  grep -q "^# allreduce_bench: $replicas replicas, cross-device ops $ops; " <<<"$out"
  [[ "$(grep -cE '^ +(4096|8192|16384) +[0-9]+ ' <<<"$out")" == 3 ]]
done
# Bad flags: one error line, a non-zero exit, nothing on stdout.
err="${TEST_TMPDIR:-/tmp}/allreduce_bench_err.$$"
for args in "--replicas=1" "--replicas=x" "--cross-device-ops=bogus" "--bucket-mb=0" \
            "--replicas=3 --devices=/CPU:0,/CPU:1" "--devices=/CPU:0"; do
  if out="$("$bench" $args "${small[@]}" 2>"$err")"; then
    echo "allreduce_bench $args should have failed"; exit 1
  fi
  [[ -z "$out" && "$(wc -l <"$err")" -eq 1 ]] || {
    echo "allreduce_bench $args: expected one error line:"; cat "$err"; exit 1; }
done
rm -f "$err"
