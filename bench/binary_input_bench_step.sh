#!/bin/sh
# The mlp step's cost of reading its input from files, issue 57's "the input pipeline never
# the bottleneck of the mlp step" (tower train has no counter of the time a step waits for
# its batch): the seconds of `tower train --steps=N` for two N, whose difference per step
# leaves out start-up and loading, for the mlp workload's shape (256 features, layers
# 1024:relu,1024:relu,1, global batch 256, --prefetch=2) fed from
#   synthetic:mlp     generated as batches ask (the workload's own input: the baseline)
#   npy               .npy files of the same rows, read as batches ask (data/npy.h)
#   tfrecord          a TFRecord file of the same rows (data/tfrecord_source.h)
#   csv --stream      the CSV streamed (data/csv_stream.h)
# and each one's ms per step over synthetic:mlp's (the input's cost, in % of the step). Not an
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
common="--layers=1024:relu,1024:relu,1 --lr=0.002 --global-batch=256 --prefetch=2 --verbose=0"
seconds() {  # the wall seconds of tower train "$@" --steps=$1 (after the first argument)
  n=$1; shift
  start=$(date +%s.%N)
  "$bin/tools/tower" train "$@" --steps="$n" $common >/dev/null
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
  printf '%-16s %6.2f s for %d steps, %6.2f s for %d: %6.2f ms/step %+6.1f %% of synthetic:mlp\n' \
    "$name" "$a" "$short" "$b" "$long" "$ms" "$(echo "($ms - $base) * 100 / $base" | bc -l)"
}
run "synthetic:mlp" --data=synthetic:mlp
run "npy" --data="${stem}_x.npy" --target="${stem}_y.npy"
run "tfrecord" --data="$stem.tfrecord" --target=y --features=x
run "csv --stream" --data="$stem.csv" --target=y --stream
