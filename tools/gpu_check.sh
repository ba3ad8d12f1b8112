#!/usr/bin/env bash
# For whoever has a GPU machine with its driver, the CUDA toolkit and Bazel: validates Tower's
# CUDA code there, in place, and writes the results table of docs/GPU_VALIDATION.md (between
# its "gpu-check" markers).
#
#   tools/gpu_check.sh [--budget-s=S]   # S: seconds for the GPU tests (gpu_bundle_run.sh's)
#   tools/gpu_check.sh --build-only     # the toolkit's checks and the bundle, no card needed
#
# In this order, each step stopping the run when it fails:
#   1. the toolkit (tools/cuda_toolkit.sh, shared with tools/gpu_bundle.sh): $TOWER_CUDA_PATH
#      if set (the build reads it), else $CUDA_HOME, $CUDA_PATH, the nvcc on PATH,
#      /usr/local/cuda; one line says which and why. It must have bin/nvcc, CUDA 12 or newer,
#      NCCL 2.14 or newer, and libcudart, cuBLAS and NCCL under any major version; each
#      missing or old piece gets one line (what, what was found, what to do), then exit 2.
#      The build gets the toolkit as TOWER_CUDA_PATH.
#   2. a card: where nvidia-smi is missing or lists no GPU, one line says which checks need one
#      and that nothing was run, then exit 3; docs/GPU_VALIDATION.md is not touched.
#      --build-only skips this step and stops after step 3 (exit 0), writing nothing.
#   3. tools/gpu_bundle.sh: builds and packs the GPU tests, `tower`, the examples and
#      train_bench (--config=cuda); exit 1 if it fails.
#   4. tools/gpu_bundle_run.sh (the one owner of the checks, also run on GPU machines without
#      Bazel) runs them: every GPU test with TOWER_REQUIRE_GPU=1, the examples, mpirun
#      workers against one card, and where there are several cards NCCL between them and 2
#      processes x 2 cards; timed workloads against PyTorch where python3 has torch. It finds
#      the CUDA libraries the bundle was linked against as tools/cuda_libraries.sh says.
#   5. its table goes between the markers of docs/GPU_VALIDATION.md.
# Exits non-zero if any step or check failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

build_only=0
run_args=()
for arg in "$@"; do
  case "$arg" in
    --build-only) build_only=1 ;;
    *) run_args+=("$arg") ;;
  esac
done

doc=docs/GPU_VALIDATION.md
# shellcheck source=cuda_toolkit.sh
source tools/cuda_toolkit.sh
cuda_toolkit_select gpu_check || exit 2

if ((!build_only)); then
  # A card, before anything heavy is built.
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    no_gpu="nvidia-smi is not on PATH"
  elif ! listed="$(nvidia-smi -L 2>&1)"; then
    no_gpu="nvidia-smi -L failed: $(head -1 <<<"$listed")"
  elif ! grep -q '^GPU ' <<<"$listed"; then
    no_gpu="nvidia-smi -L lists no GPU${listed:+: $(head -1 <<<"$listed")}"
  fi
  if [[ -n "${no_gpu:-}" ]]; then
    echo "gpu_check: no GPU visible ($no_gpu): these checks need a card: the GPU tests with" \
      "TOWER_REQUIRE_GPU=1, the examples (virtual_gpus, linear_regression), mpirun workers on" \
      "one card, NCCL between cards and 2 processes x 2 cards (2 or more cards), the timings" \
      "against PyTorch and the kernel profiles; nothing was run and $doc was left as it was" \
      "(tools/gpu_check.sh --build-only builds the bundle without a card)" >&2
    exit 3
  fi
fi

tools/gpu_bundle.sh || { echo "gpu_check: tools/gpu_bundle.sh failed" >&2; exit 1; }
if ((build_only)); then
  echo "gpu_check: --build-only: gpu_carry/bundle.tar.xz built; no check was run and $doc was" \
    "left as it was"
  exit 0
fi
out="$(mktemp -d)"
OUT="$out" tools/gpu_bundle_run.sh "${run_args[@]}"
rc=$?
# The run's table: from its last "GPU: ..." line to the end of its log.
table="$(awk '/^GPU: / {table = ""} {table = table $0 "\n"} END {printf "%s", table}' \
         "$out/gpu_run.log" 2>/dev/null)"
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
