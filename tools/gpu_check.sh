#!/usr/bin/env bash
# For whoever has a GPU machine with its driver, the CUDA toolkit and Bazel: validates Tower's
# CUDA code there, in place, and writes the results table of docs/GPU_VALIDATION.md (between
# its "gpu-check" markers).
#
#   tools/gpu_check.sh [--budget-s=S]
#
# The same path as a GPU machine without Bazel (one owner for the checks): tools/gpu_bundle.sh
# builds and packs the GPU tests, `tower`, the examples and train_bench (--config=cuda), and
# tools/gpu_bundle_run.sh runs them — every GPU test with TOWER_REQUIRE_GPU=1, the examples,
# mpirun workers against one GPU, NCCL over the cards when there are several, timed workloads
# against PyTorch where python3 has torch — and prints the table copied here.
# The toolkit: /usr/local/cuda or $TOWER_CUDA_PATH, CUDA 12 or newer (an older or missing one
# stops the build with one line saying so); on the GPU machine, the CUDA libraries the bundle
# was linked against are looked for as tools/cuda_libraries.sh says, and one missing stops
# the run naming it.
# Exits non-zero if the build or any check failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

doc=docs/GPU_VALIDATION.md
tools/gpu_bundle.sh || { echo "gpu_check: tools/gpu_bundle.sh failed" >&2; exit 1; }
out="$(mktemp -d)"
OUT="$out" tools/gpu_bundle_run.sh "$@"
rc=$?
# The run's table: from its last "GPU: ..." line to the end of its log.
table="$(awk '/^GPU: / {table = ""} {table = table $0 "\n"} END {printf "%s", table}' \
         "$out/gpu_run.log")"
if [[ -z "$table" ]]; then
  echo "gpu_check: $out/gpu_run.log has no results table; $doc left as it was" >&2
  exit 1
fi
python3 - "$doc" "$table" <<'PY'
import re, sys
path, table = sys.argv[1], sys.argv[2]
text = open(path).read()
block = ("<!-- gpu-check: begin (written by tools/gpu_check.sh) -->\n" + table.rstrip("\n") +
         "\n<!-- gpu-check: end -->")
new = re.sub(r"<!-- gpu-check: begin.*?<!-- gpu-check: end -->", lambda m: block, text, flags=re.S)
open(path, "w").write(new)
PY
echo "gpu_check: wrote the results table of $doc (full log: $out/gpu_run.log)"
exit $rc
