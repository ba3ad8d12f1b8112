#!/bin/sh
# The mlp step's cost of reading its input from files, issue 57's "the input pipeline never
# the bottleneck of the mlp step: the step's wait for data <= 5 % of its time with prefetch":
# the seconds of `tower train --steps=N` for two N, whose difference per step leaves out
# start-up and loading, for the mlp workload's shape (256 features, layers
# 1024:relu,1024:relu,1, global batch 256, --prefetch=2) fed from
#   synthetic:mlp     generated as batches ask (the workload's own input: the baseline)
#   npy               .npy files of the same rows, read as batches ask (data/npy.h)
#   tfrecord          a TFRecord file of the same rows (data/tfrecord_source.h)
#   csv --stream      the CSV streamed (data/csv_stream.h)
# and each one's ms per step over synthetic:mlp's (the input's cost, in % of the step), then the
# long run's own count of its steps' wait for their batches (tower train's "input: the steps
# waited ... (P %)" line: the time in the pipeline's Next(), here the wait on the prefetch
# queue) and the verdict against the 5 % target. Not an
# in-memory CSV: loading one takes seconds and varies more than the steps it is compared with.
# The files come from binary_input_bench --features=256 --csv --keep and are removed after.
#   bench/binary_input_bench_step.sh [bazel-bin] [short steps] [long steps]
set -eu
bin=${1:-bazel-bin}
short=${2:-20}
long=${3:-220}
dir=$(mktemp -d "${TMPDIR:-/tmp}/binary_input_bench_step.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# Rows for the long run (global batch 256), so that no run wraps into a second epoch.
mb=$(( (long + 2) * 256 * 257 * 4 / 1000000 + 1 ))
"$bin/bench/binary_input_bench" --mb=$mb --features=256 --csv --keep --dir="$dir" | head -1 |
  sed 's|/[^ ]*/||g'
stem=$(ls "$dir"/*_x.npy); stem=${stem%_x.npy}
# --verbose=1 for the input line (no per-step output when not on a terminal).
common="--layers=1024:relu,1024:relu,1 --lr=0.002 --global-batch=256 --prefetch=2 --verbose=1"
seconds() {  # the wall seconds of tower train "$@" --steps=$1 (after the first argument)
  n=$1; shift
  start=$(date +%s.%N)
  "$bin/tools/tower" train "$@" --steps="$n" $common >"$dir/out.txt"
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}
base=""
run() {  # name, then tower train's data flags
  name=$1; shift
  a=$(seconds "$short" "$@")
  b=$(seconds "$long" "$@")
  ms=$(echo "($b - $a) * 1000 / ($long - $short)" | bc -l)
  [ -n "$base" ] || base=$ms
  # The long run's "input: the steps waited W s of T s for their batches (P %)": W T P.
  f='\([0-9.]*\)'
  waited=$(sed -n "s/^input: the steps waited $f s of $f s .*($f %)\$/\\1 \\2 \\3/p" "$dir/out.txt")
  [ -n "$waited" ] || { echo "$name: no input line in tower train's output" >&2; exit 1; }
  set -- $waited
  verdict="within the 5 % target"
  [ "$(echo "$3 <= 5" | bc -l)" = 1 ] || verdict="OVER the 5 % target"
  printf '%-16s %6.2f s for %d steps, %6.2f s for %d: %6.2f ms/step %+6.1f %% of synthetic:mlp; ' \
    "$name" "$a" "$short" "$b" "$long" "$ms" "$(echo "($ms - $base) * 100 / $base" | bc -l)"
  printf 'input wait %.2f s of %.2f s (%s %%): %s\n' "$1" "$2" "$3" "$verdict"
}
run "synthetic:mlp" --data=synthetic:mlp
run "npy" --data="${stem}_x.npy" --target="${stem}_y.npy"
run "tfrecord" --data="$stem.tfrecord" --target=y --features=x
run "csv --stream" --data="$stem.csv" --target=y --stream
