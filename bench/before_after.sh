#!/bin/bash
# Tower's rows of bench/compare.sh, before and after a change, in alternating rounds: the
# same train_bench runs compare.sh times (linreg and mlp on 1, 2, 4 and 8 replicas, 2 batched
# replicas, deterministic mode on 4), each run by the old and the new binary back to back,
# in an order that alternates every round. Prints each row's median over rounds of new / old
# steps per second. The peers' columns of compare.sh do not change with Tower's code, so a
# row's ratio to its peer moves by exactly this factor.
#
#   bench/before_after.sh OLD_DIR NEW_DIR [--rounds=5] [--out=DIR] [--rows=0,4]
#
# --rows: only these rows (0-based, in the order of ROWS below).
#
# OLD_DIR and NEW_DIR each hold a train_bench binary (copy bazel-bin/bench/train_bench of
# each commit there). Every run waits for a quiet machine first (bench/quiet.sh). Runs with
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, as compare.sh runs every program.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 2 ]] || { sed -n '2,15p' "$0"; exit 2; }
OLD="$1"; NEW="$2"; shift 2
ROUNDS=5
OUT=""
ONLY=""
for arg in "$@"; do
  case "$arg" in
    --rounds=*) ROUNDS="${arg#--rounds=}" ;;
    --out=*) OUT="${arg#--out=}" ;;
    --rows=*) ONLY=",${arg#--rows=}," ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done
for dir in "$OLD" "$NEW"; do
  [[ -x "$dir/train_bench" ]] || { echo "$dir/train_bench: no such program" >&2; exit 2; }
done
[[ -n "$OUT" ]] || OUT="$(mktemp -d /tmp/tower-before-after.XXXXXX)"
mkdir -p "$OUT"
source bench/quiet.sh

ROWS=(
  "--workload=linreg --replicas=1" "--workload=linreg --replicas=2"
  "--workload=linreg --replicas=4" "--workload=linreg --replicas=8"
  "--workload=mlp --replicas=1" "--workload=mlp --replicas=2"
  "--workload=mlp --replicas=4" "--workload=mlp --replicas=8"
  "--workload=linreg --replicas=2 --batch-replica-rows"
  "--workload=mlp --replicas=2 --batch-replica-rows"
  "--workload=mlp --replicas=4 --deterministic"
)
steps_per_s() {  # steps_per_s DIR ARGS...: the median window's steps per second
  local dir="$1"; shift
  wait_quiet >&2
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$dir/train_bench" "$@" --window-s=1 \
    --warmup-s=0.5 2>/dev/null | sed -n 's/.* steps_per_s=\([0-9.]*\).*/\1/p' | head -1
}
for k in $(seq 1 "$ROUNDS"); do
  for i in "${!ROWS[@]}"; do
    [[ -z "$ONLY" || "$ONLY" == *",$i,"* ]] || continue
    # Old first in odd rounds, new first in even ones: a drift of the host within a pair
    # falls on both alike over the rounds.
    if ((k % 2 == 1)); then order=(old new); else order=(new old); fi
    for side in "${order[@]}"; do
      dir="$OLD"; [[ "$side" == new ]] && dir="$NEW"
      rate="$(steps_per_s "$dir" ${ROWS[$i]})"
      echo "round=$k row=$i side=$side steps_per_s=${rate:-nan}" | tee -a "$OUT/runs.txt" >&2
    done
  done
done
/usr/bin/python3 - "$OUT/runs.txt" "${ROWS[@]}" <<'PY'
import re, statistics, sys
runs, rows = sys.argv[1], sys.argv[2:]
rates = {}
for line in open(runs):
    f = dict(kv.split("=") for kv in line.split())
    rates.setdefault((int(f["round"]), int(f["row"])), {})[f["side"]] = float(f["steps_per_s"])
print(f"{'row':<50} {'old steps/s':>12} {'new steps/s':>12} {'new/old':>8}")
worst = None
for i, row in enumerate(rows):
    pairs = [v for (k, r), v in sorted(rates.items()) if r == i and "old" in v and "new" in v]
    ratios = [p["new"] / p["old"] for p in pairs if p["old"] > 0 and p["new"] == p["new"]]
    if not ratios:
        continue
    ratio = statistics.median(ratios)
    worst = ratio if worst is None else min(worst, ratio)
    old = statistics.median(p["old"] for p in pairs)
    new = statistics.median(p["new"] for p in pairs)
    print(f"{row:<50} {old:>12.1f} {new:>12.1f} {ratio:>7.3f}x")
print(f"worst row: {worst:.3f}x (median over rounds of each round's new/old)" if worst else
      "no figures")
PY
