#!/usr/bin/env bash
# For whoever has a real GPU: validates Tower's CUDA code on it and writes the results table of
# docs/GPU_VALIDATION.md (between its "gpu-check" markers).
#
#   tools/gpu_check.sh            # on a machine with an NVIDIA GPU, its driver and the toolkit
#
# 1. builds --config=cuda (nvcc, cudart, cuBLAS, NCCL from /usr/local/cuda);
# 2. runs every GPU test (tag `gpu`, not the emulation-only ones) with TOWER_REQUIRE_GPU=1: a
#    test that would skip for want of a GPU fails instead, naming the platform's status;
# 3. runs the examples on virtual GPUs and `tower train` on the GPUs as a timed workload;
# 4. writes one table row per check, with the date and the GPU, into docs/GPU_VALIDATION.md.
# Exits non-zero if any check failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

doc=docs/GPU_VALIDATION.md
rows=()
failed=0
log_dir="$(mktemp -d)"

check() {  # check <name> <command...>: runs it, records pass/fail and its last line
  local name="$1"
  shift
  local log="$log_dir/$(echo "$name" | tr -c 'a-zA-Z0-9' '_').log"
  local start=$SECONDS
  if "$@" >"$log" 2>&1; then
    rows+=("| $name | pass | $((SECONDS - start)) s | $(tail -1 "$log" | tr '|' '/' | cut -c1-120) |")
  else
    rows+=("| $name | **FAIL** | $((SECONDS - start)) s | $(tail -1 "$log" | tr '|' '/' | cut -c1-120) (log: $log) |")
    failed=1
  fi
  echo "gpu_check: $name: ${rows[-1]}"
}

gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
       head -1)"
if [[ -z "$gpu" ]]; then
  echo "gpu_check: nvidia-smi finds no GPU; continuing (the tests will say why the platform has none)"
  gpu="none found by nvidia-smi"
fi

check "build --config=cuda" ./bazelw build --config=cuda //...
check "GPU tests (TOWER_REQUIRE_GPU=1)" ./bazelw test --config=cuda --build_tests_only \
  --test_tag_filters=gpu,-cudaemu --test_env=TOWER_REQUIRE_GPU=1 --test_output=errors //tests/...
check "example virtual_gpus" ./bazelw run --config=cuda //examples:virtual_gpus -- --memory-limit=1024
check "example linear_regression, 2 GPUs or virtual GPUs" \
  ./bazelw run --config=cuda //tools:tower -- train --data=synthetic:linreg --steps=200 \
  --replicas=2 --virtual-gpus=2 --verbose=1
check "tower train mlp, 4 virtual GPUs of one card (timed)" \
  ./bazelw run --config=cuda //tools:tower -- train --data=synthetic:mlp --steps=500 \
  --replicas=4 --virtual-gpus=4 --verbose=1
if [[ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]]; then
  check "tower train mlp, one replica per card over NCCL (timed)" \
    ./bazelw run --config=cuda //tools:tower -- train --data=synthetic:mlp --steps=500 \
    --replicas=2 --verbose=1
fi

table="$(
  echo "<!-- gpu-check: begin (written by tools/gpu_check.sh) -->"
  echo "Run on $(date -u +%Y-%m-%d), GPU: $gpu."
  echo
  echo "| check | result | time | last line of its output |"
  echo "|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo "<!-- gpu-check: end -->"
)"
python3 - "$doc" "$table" <<'PY'
import re, sys
path, table = sys.argv[1], sys.argv[2]
text = open(path).read()
new = re.sub(r"<!-- gpu-check: begin.*?<!-- gpu-check: end -->", lambda m: table, text, flags=re.S)
open(path, "w").write(new)
PY
echo "gpu_check: wrote the results table of $doc"
exit $failed
