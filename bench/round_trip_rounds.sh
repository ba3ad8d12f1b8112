#!/bin/bash
# linreg 2 vs 1 replica against the cores' cache-line round trip, in rounds.
#
# The 2-core host moves between states whose cross-core round trips differ about 3x within
# seconds (docs/BENCHMARKS.md). Each round runs `train_bench --workload=linreg` with 2
# replicas (measuring the round trip right before and right after its windows), 1 replica,
# and 1 replica at 32 rows (one replica's share of the 2-replica step); the summary groups
# the rounds by the state their 2-replica run saw and fits how many round trips the
# 2-replica step spends (the slope of its step time against the round trip).
#
#   bench/round_trip_rounds.sh [--rounds=24] [--window-s=0.3]
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=24
WINDOW_S=0.3
for arg in "$@"; do
  case "$arg" in
    --rounds=*) ROUNDS="${arg#*=}" ;;
    --window-s=*) WINDOW_S="${arg#*=}" ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "error: unknown argument '$arg' (--rounds=N, --window-s=S)" >&2; exit 2 ;;
  esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "error: --rounds must be a positive integer, got '$ROUNDS'" >&2; exit 2; }
[[ "$WINDOW_S" =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ && ! "$WINDOW_S" =~ ^[0.]+$ ]] ||
  { echo "error: --window-s must be a positive number of seconds, got '$WINDOW_S'" >&2; exit 2; }

# The program copied out of bazel-bin, so that a concurrent build cannot swap it.
./bazelw build //bench:train_bench >&2
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cp "$(./bazelw info bazel-bin 2>/dev/null)/bench/train_bench" "$TMP/train_bench"

field() { grep -o " $1=[^ ]*" | head -1 | cut -d= -f2; }
# train_bench's log lines (the strategy's devices) go to a file, shown only if it fails.
run() {
  "$TMP/train_bench" --workload=linreg --window-s="$WINDOW_S" "$@" 2>"$TMP/stderr" || {
    echo "error: train_bench $* failed:" >&2; cat "$TMP/stderr" >&2; exit 1; }
}

echo "round two_steps_per_s round_trip_ns_before,after one_steps_per_s one_32_rows_steps_per_s"
for ((i = 1; i <= ROUNDS; ++i)); do
  two_line="$(run --replicas=2 --round-trip)"
  two="$(field steps_per_s <<<"$two_line")"
  rtt="$(field round_trip_ns <<<"$two_line")"
  one="$(run --replicas=1 | field steps_per_s)"
  half="$(run --replicas=1 --global-batch=32 | field steps_per_s)"
  echo "$i $two $rtt $one $half"
done | tee "$TMP/rounds.txt"

python3 - "$TMP/rounds.txt" <<'EOF'
import statistics, sys

rows = []
for line in open(sys.argv[1]):
    if not line.strip() or line.startswith("round"):
        continue
    _, two, rtt, one, half = line.split()
    before, after = (float(x) for x in rtt.split(","))
    rows.append((float(two), before, after, float(one), float(half)))
if not rows:
    sys.exit("no rounds")
low = min(min(r[1], r[2]) for r in rows)
groups = {"fast": [], "slow": [], "mixed": []}
for r in rows:
    lo, hi = min(r[1], r[2]), max(r[1], r[2])
    groups["fast" if hi <= 1.5 * low else "slow" if lo >= 2 * low else "mixed"].append(r)
print(f"\nstates (fast: both round trips <= 1.5x the lowest, {low:.0f} ns; slow: both >= 2x)")
print("state rounds round_trip_ns two_steps_per_s one_steps_per_s one_32_rows two_vs_one (range)")
for name, g in groups.items():
    if not g:
        continue
    med = lambda k: statistics.median(k(r) for r in g)
    ratios = [r[0] / r[3] for r in g]
    print(f"{name} {len(g)} {med(lambda r: (r[1] + r[2]) / 2):.0f} {med(lambda r: r[0]):.0f} "
          f"{med(lambda r: r[3]):.0f} {med(lambda r: r[4]):.0f} {statistics.median(ratios):.3f} "
          f"({min(ratios):.3f}-{max(ratios):.3f})")
if groups["fast"] and groups["slow"]:
    step = lambda g: statistics.median(1e9 / r[0] for r in g)
    trip = lambda g: statistics.median((r[1] + r[2]) / 2 for r in g)
    slope = (step(groups["slow"]) - step(groups["fast"])) / (trip(groups["slow"]) - trip(groups["fast"]))
    print(f"2-replica step: {step(groups['fast']):.0f} ns (fast), {step(groups['slow']):.0f} ns "
          f"(slow): {slope:.1f} round trips on its critical path")
EOF
