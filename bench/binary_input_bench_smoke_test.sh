#!/bin/sh
# binary_input_bench on 5 MB: it runs, prints a line for each reader, and removes its files.
set -eu
dir="${TEST_TMPDIR:-/tmp}/binary_input_bench_smoke"
mkdir -p "$dir"
out=$(bench/binary_input_bench --mb=5 --dir="$dir")
echo "$out"
for name in "cat .npy" "dd .npy" "npy Batch" "npy Shuffle" "numpy np.load" "cat .tfrecord" \
    "dd .tfrecord" "tfrecord open" "tfrecord Batch" "tfrecord Shuffle" \
    "npy Batch / sequential read" "cat .npy cold" "dd .npy cold" "npy Batch cold" \
    "npy Batch / sequential read, from storage"; do
  echo "$out" | grep -q "^$name[ :]" || { echo "no line for $name"; exit 1; }
done
if [ -n "$(ls -A "$dir")" ]; then echo "files left behind: $(ls "$dir")"; exit 1; fi
