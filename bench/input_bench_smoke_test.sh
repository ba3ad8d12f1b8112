#!/bin/sh
# input_bench on 5 MB: it runs, and prints a line for each reader.
set -eu
out=$(bench/input_bench --mb=5 --numpy-mb=1 --dir="${TEST_TMPDIR:-/tmp}")
echo "$out"
for name in cat dd stream shards+shuffle "shards skip" rows+Shuffle "in memory" pandas numpy; do
  echo "$out" | grep -q "^$name " || { echo "no line for $name"; exit 1; }
done
