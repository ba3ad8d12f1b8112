#!/usr/bin/env bash
# On a GPU machine without Bazel or a network: unpacks gpu_carry/bundle.tar.xz (made by
# tools/gpu_bundle.sh) and validates Tower's CUDA code on the GPU, in this order:
#   1. every GPU test with TOWER_REQUIRE_GPU=1 (a test that would skip for want of a GPU fails
#      instead; cases that need more cards than the machine has still skip, and say so, as do
#      those that need the CUDA emulation's fault injection or counters: each row names its
#      skipped cases with their reasons);
#   2. the virtual-GPU and linear-regression examples;
#   3. 2 workers under mpirun sharing the card (MPI between them, then one NCCL communicator
#      with NCCL_MULTI_RANK_GPU_ENABLE=1) against one GPU; with 2 or 3 cards, 2 workers on a
#      card each, and with 4 or more, 2 workers on 2 cards each (NCCL across processes), with
#      and without --deterministic, against one GPU; and with several cards `tower train`
#      with one replica per card (NCCL);
#   4. timed workloads: train_bench on one GPU and on 4 virtual GPUs of it, and the PyTorch
#      peer (bench/peers/torch_train.py --device=cuda) where python3 has torch;
#   5. where the large mlp step's time goes: Tower's kernel trace and PyTorch's profiler.
# Prints a table last (one row per check, with gtest's counts); full output goes to
# $OUT/gpu_run.log when OUT is set. Exits non-zero if a check failed.
#
#   tools/gpu_bundle_run.sh [--budget-s=S]   # S: seconds for the tests before the rest
#                                            # is skipped (default 300)
#   tools/gpu_bundle_run.sh --sweep          # only this: Tower against PyTorch (batches on
#                                            # the card, and copied from pinned host memory
#                                            # each step) over mlp widths and batch sizes
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

budget_s=300
sweep=0
for arg in "$@"; do
  case "$arg" in
    --budget-s=*) budget_s="${arg#*=}" ;;
    --sweep) sweep=1 ;;
    *) echo "gpu_bundle_run: unknown argument '$arg'; usage: $0 [--budget-s=S] [--sweep]" >&2
       exit 2 ;;
  esac
done
[[ "$budget_s" =~ ^[0-9]+$ ]] || {
  echo "gpu_bundle_run: --budget-s=$budget_s: give whole seconds" >&2
  exit 2
}
[[ -f gpu_carry/bundle.tar.xz ]] || {
  echo "gpu_bundle_run: gpu_carry/bundle.tar.xz is missing: run tools/gpu_bundle.sh first" >&2
  exit 2
}
log="${OUT:-$(mktemp -d)}/gpu_run.log"
mkdir -p "$(dirname "$log")" || exit 2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf gpu_carry/bundle.tar.xz || exit 2

# CUDA's libraries: those the bundle was linked against (cuda_sonames.txt, written by
# tools/gpu_bundle.sh; the major version is in each soname), from this machine's toolkit or
# Python's wheels (tools/cuda_libraries.sh says where it looks). One missing stops the run:
# every GPU program would fail to load.
# shellcheck source=tools/cuda_libraries.sh
source tools/cuda_libraries.sh
sonames="libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2"  # bundles before the list
[[ -f "$work/cuda_sonames.txt" ]] && sonames="$(tr '\n' ' ' <"$work/cuda_sonames.txt")"
built_with="$(cat "$work/cuda_version.txt" 2>/dev/null || echo "CUDA 13")"
libdirs="$work/lib"
for lib in $sonames; do
  path="$(find_cuda_library "$lib")" || {
    echo "gpu_bundle_run: $lib NOT FOUND: the bundle was built with $built_with and needs it;" \
      "looked in $(cuda_library_dirs | tr '\n' ' ')and under ${CUDA_LIBRARY_FALLBACK_ROOTS:-/usr /opt}." \
      "Install that CUDA major version's runtime (or set TOWER_CUDA_PATH to a toolkit that has it)," \
      "or build the bundle against this machine's CUDA (12 or newer)" | tee -a "$log" >&2
    exit 2
  }
  version=""
  [[ "$lib" == libnccl.so.* ]] &&
    version=" ($(strings "$path" 2>/dev/null | grep -m1 -o 'NCCL version [0-9.+a-z]*'))"
  echo "gpu_bundle_run: $lib: $path$version" | tee -a "$log"
  libdirs="$libdirs:$(dirname "$path")"
done
# A library this machine has itself (the same soname) is used instead of the carried copy:
# Open MPI's, above all, must match this machine's mpirun and its plugins.
# (The cache is read once: `ldconfig -p | grep -q` under pipefail fails when grep stops early.)
system_libs="$(ldconfig -p)"
for lib in "$work"/lib/*; do
  if grep -q "^[[:space:]]*$(basename "$lib") " <<<"$system_libs"; then rm "$lib"; fi
done
echo "gpu_bundle_run: carried libraries used: $(find "$work/lib" -mindepth 1 -printf '%f ')" |
  tee -a "$log"
export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
       head -1)"
[[ -n "$gpu" ]] || gpu="none that nvidia-smi lists"
echo "gpu_bundle_run: $(date -u '+%Y-%m-%d %H:%M UTC'), GPU: $gpu, CPU: $(nproc) cores" |
  tee -a "$log"

if ((sweep)); then
  python3 -c 'import torch; assert torch.cuda.is_available()' || {
    echo "gpu_bundle_run: --sweep needs python3 with torch and a GPU" >&2
    exit 2
  }
  quick=(--window-s=0.5 --warmup-s=1 --repeats=3)
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'; }
  steps_per_s() { sed -n 's/.* steps_per_s=\([0-9.]*\).*/\1/p'; }
  echo "| hidden | batch | Tower steps/s | PyTorch, batches on the card | ratio | PyTorch, batches copied from pinned host memory | ratio |"
  echo "|---|---|---|---|---|---|---|"
  # shellcheck disable=SC2094  # the log: appended to, never read
  for hidden in 1024 2048 4096; do
    for batch in 1024 4096; do
      shape=(--workload=mlp "--hidden=$hidden" "--global-batch=$batch")
      tower_sps="$("$work/bin/train_bench" "${shape[@]}" --replicas=1 "${quick[@]}" 2>>"$log" |
                   tee -a "$log" | steps_per_s)"
      torch_sps="$(python3 bench/peers/torch_train.py "${shape[@]}" --device=cuda --threads=1 \
                   --blas-threads=1 "${quick[@]}" 2>>"$log" | tee -a "$log" |
                   steps_per_s)"
      host_sps="$(python3 bench/peers/torch_train.py "${shape[@]}" --device=cuda --threads=1 \
                  --blas-threads=1 --host-batches "${quick[@]}" 2>>"$log" | tee -a "$log" |
                  steps_per_s)"
      echo "| $hidden | $batch | $tower_sps | $torch_sps | $(ratio "$tower_sps" "$torch_sps") |" \
           "$host_sps | $(ratio "$tower_sps" "$host_sps") |" | tee -a "$log"
    done
  done
  exit 0
fi

rows=()
failed=0
start_all=$SECONDS
# The cases gtest skipped in a test's output, each with the first line of its reason
# ("needs cudaemu's fault injection ...", "needs 4 cards; this machine has 1"), as
# "N skipped: Suite.Case (reason); ...", or nothing.
skipped_cases() {
  awk '
    /^\[ RUN      \] / { want = 0; reason = "" }
    / Skipped$/ { want = 1; next }
    want { reason = $0; want = 0; sub(/; runs under --config=cudaemu$/, "", reason) }
    /^\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)$/ {
      if (length(reason) > 110) reason = substr(reason, 1, 110) "..."
      list = list sep $4 " (" (reason == "" ? "no reason given" : reason) ")"
      sep = "; "
      n++
    }
    END { if (n) printf "%d skipped: %s", n, list }' "$1"
}

# check <name> <deadline_s> <command...>: runs it with a deadline, appends its output to the
# log, and records a row: pass/FAIL, seconds, and gtest's counts (with the skipped cases and
# why) or the output's last line.
check() {
  local name="$1" deadline="$2"
  shift 2
  local part="$work/part.log" start=$SECONDS rc
  echo "===== $name: $*" >>"$log"
  timeout -k 5 "$deadline" "$@" >"$part" 2>&1
  rc=$?
  cat "$part" >>"$log"
  local summary
  summary="$(grep -E '^\[  (PASSED|FAILED|SKIPPED) \] [0-9]+ test' "$part" | sed 's/, listed below://' |
             tr -s ' ' | tr '\n' ' ')"
  [[ -n "$summary" ]] || summary="$(grep -v '^\s*$' "$part" | tail -1 | cut -c1-150)"
  local skipped
  skipped="$(skipped_cases "$part")"
  [[ -n "$skipped" ]] && summary="$summary; $skipped"
  [[ $rc -eq 124 || $rc -eq 137 ]] && summary="deadline of ${deadline} s passed; $summary"
  if [[ $rc -eq 0 ]]; then
    rows+=("| $name | pass | $((SECONDS - start)) s | ${summary//|//} |")
  else
    rows+=("| $name | **FAIL** (rc $rc) | $((SECONDS - start)) s | ${summary//|//} |")
    failed=1
    grep -E '^\[  FAILED  \] [A-Za-z_./0-9]+$' "$part" | sort -u | sed 's/^/    /' >>"$work/failures"
  fi
  echo "${rows[-1]}"
}

export TOWER_REQUIRE_GPU=1 TEST_SRCDIR="$work/runfiles"
declare -A ran  # tests already run: the list names the basic ones first, then all
# The cheapest and most basic first: kernels, the device, then strategies and whole programs.
for test in ops_gpu_test cuda_device_test gpu_strategy_test tree_all_reduce_test \
            gpu_trace_test train_on_gpus_test deterministic_on_gpus_test \
            $(cd "$work/bin" && ls -- *_test); do
  [[ -e "$work/bin/$test" && -z "${ran[$test]:-}" ]] || continue
  ran[$test]=1
  if ((SECONDS - start_all > budget_s)); then
    rows+=("| $test | not run | 0 s | the ${budget_s} s budget was spent |")
    failed=1
    continue
  fi
  export TEST_TMPDIR="$work/tmp_$test"
  mkdir -p "$TEST_TMPDIR"
  check "$test" 150 "$work/bin/$test" --gtest_color=no
done
unset TOWER_REQUIRE_GPU

# The rest times and compares on the card: without one it means nothing.
cards="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
if ((cards == 0)); then
  rows+=("| examples, mpirun, timings, profiles | not run | 0 s | nvidia-smi lists no GPU |")
  failed=1
else
  check "example virtual_gpus --memory-limit=1024" 60 "$work/bin/virtual_gpus" --memory-limit=1024
  check "example linear_regression --replicas=2" 60 "$work/bin/linear_regression" --replicas=2

  # Several processes under mpirun (as tests/strategy/mpi/cuda/mpi_gpu_test on emulated
  # cards): 2 workers, each with 2 virtual GPUs of the one card, reduce on the card inside each
  # worker and over MPI between them; on a machine with several cards, each worker on cards of
  # its own, one NCCL communicator across both. With --deterministic they must save one GPU's
  # bytes; without it, the same weights to float32 rounding.
  export tower="$work/runfiles/tower/tools/tower" work
  export train="train --data=synthetic:mlp:rows=600 --layers=32:tanh,16:relu,1 --steps=20
                --global-batch=32 --verbose=1"
  # own_cards.sh N PROGRAM...: runs PROGRAM seeing only the N cards of its local rank under
  # mpirun (rank r: cards r*N .. r*N+N-1 of those this machine shows it).
  cat >"$work/own_cards.sh" <<'SH'
#!/usr/bin/env bash
set -euo pipefail
per="$1"
shift
rank="${OMPI_COMM_WORLD_LOCAL_RANK:?own_cards.sh: not started by Open MPI mpirun}"
if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then
  IFS=, read -r -a cards <<<"$CUDA_VISIBLE_DEVICES"
else
  mapfile -t cards < <(seq 0 $((rank * per + per - 1)))
fi
(( ${#cards[@]} >= rank * per + per )) || {
  echo "own_cards.sh: rank $rank needs cards $((rank * per))..$((rank * per + per - 1)); ${#cards[@]} visible" >&2
  exit 1
}
mine="${cards[*]:rank * per:per}"
export CUDA_VISIBLE_DEVICES="${mine// /,}"
exec "$@"
SH
  chmod +x "$work/own_cards.sh"
  # (check runs commands under `timeout`, which runs programs, not functions: hence bash -c.)
  # mpi_vs_one_gpu <layout> <extra flags...>: one GPU, then 2 workers under mpirun laid out as
  # `virtual` (2 virtual GPUs of the one card each, both workers on it), `cards1` (a card of its
  # own each) or `cards2` (2 cards of its own each), then the comparison.
  # shellcheck disable=SC2317  # called through bash -c
  mpi_vs_one_gpu() {
    local layout="$1"
    shift
    local tag="$layout$*" per_worker=(--replicas=2 --virtual-gpus=2) wrap=() expect="" rc
    tag="${tag//[^a-z0-9]/}"
    case "$layout" in
      virtual) ;;
      cards1) per_worker=(--replicas=1) wrap=("$work/own_cards.sh" 1)
              expect="one NCCL communicator over 2 GPUs" ;;
      cards2) per_worker=(--replicas=2) wrap=("$work/own_cards.sh" 2)
              expect="one NCCL communicator over 4 GPUs" ;;
      *) echo "mpi_vs_one_gpu: unknown layout $layout" >&2; return 2 ;;
    esac
    # shellcheck disable=SC2086  # $train: words
    "$tower" $train "$@" --replicas=1 --save="$work/one$tag.safetensors" || return 1
    # shellcheck disable=SC2086
    timeout 60 mpirun --allow-run-as-root --oversubscribe --bind-to none \
      ${NCCL_MULTI_RANK_GPU_ENABLE:+-x NCCL_MULTI_RANK_GPU_ENABLE} -np 2 "${wrap[@]}" "$tower" \
      $train "$@" "${per_worker[@]}" --save="$work/mpi$tag.safetensors" >"$work/mpi$tag.log" 2>&1
    rc=$?
    cat "$work/mpi$tag.log"
    ((rc == 0)) || return "$rc"
    if [[ -n "$expect" ]] && ! grep -q "Across processes: $expect" "$work/mpi$tag.log"; then
      echo "mpi_vs_one_gpu: the workers did not log 'Across processes: $expect'"
      return 1
    fi
    python3 - "$work/one$tag.safetensors" "$work/mpi$tag.safetensors" "$*" <<'PY'
import sys
import numpy as np
from safetensors.numpy import load_file
one, mpi, flags = load_file(sys.argv[1]), load_file(sys.argv[2]), sys.argv[3]
assert one.keys() == mpi.keys(), (one.keys(), mpi.keys())
if "--deterministic" in flags:
    same = all(np.array_equal(one[k], mpi[k]) for k in one)
    print("bitwise equal to one GPU:", same)
    sys.exit(0 if same else 1)
num = sum(float(np.sum((one[k].astype(np.float64) - mpi[k]) ** 2)) for k in one)
den = sum(float(np.sum(one[k].astype(np.float64) ** 2)) for k in one)
rel = (num / den) ** 0.5 if den > 0 else float("nan")
print(f"relative L2 difference to one GPU: {rel:.3g} (bound 1e-5)")
sys.exit(0 if rel <= 1e-5 else 1)
PY
  }
  if command -v mpirun >/dev/null && python3 -c 'import safetensors, numpy' 2>/dev/null; then
    export -f mpi_vs_one_gpu
    check "mpirun 2 workers x 2 virtual GPUs on one card = 1 GPU" 120 \
      bash -c 'mpi_vs_one_gpu "$@"' _ virtual
    check "... with --deterministic: one GPU's bytes" 120 \
      bash -c 'mpi_vs_one_gpu "$@"' _ virtual --deterministic
    # NCCL's own code on one card: its switch lets ranks share a GPU, so one communicator
    # spans the 4 virtual GPUs of both workers (the NCCL release must honour the switch).
    check "mpirun 2 workers x 2 virtual GPUs, one NCCL communicator on one card = 1 GPU" 120 \
      env NCCL_MULTI_RANK_GPU_ENABLE=1 bash -c 'mpi_vs_one_gpu "$@"' _ virtual \
      --cross-device-ops=nccl
    # 2 processes on cards of their own: NCCL across processes between cards (mpi_gpu_test's
    # 2 processes x 2 GPUs, on the real thing).
    if ((cards >= 4)); then
      check "mpirun 2 processes x 2 cards, one NCCL communicator over 4 = 1 GPU" 150 \
        bash -c 'mpi_vs_one_gpu "$@"' _ cards2 --cross-device-ops=nccl
      check "... with --deterministic: one GPU's bytes" 150 \
        bash -c 'mpi_vs_one_gpu "$@"' _ cards2 --cross-device-ops=nccl --deterministic
    elif ((cards >= 2)); then
      check "mpirun 2 processes x 1 card, one NCCL communicator over 2 = 1 GPU" 150 \
        bash -c 'mpi_vs_one_gpu "$@"' _ cards1 --cross-device-ops=nccl
      check "... with --deterministic: one GPU's bytes" 150 \
        bash -c 'mpi_vs_one_gpu "$@"' _ cards1 --cross-device-ops=nccl --deterministic
    fi
  fi

  # Timed: Tower on the GPU alone, on virtual GPUs of it, and the PyTorch peer on the same card.
  bench=(--window-s=1 --warmup-s=2 --repeats=3)
  for workload in mlp linreg; do
    check "train_bench $workload, 1 GPU" 60 "$work/bin/train_bench" --workload=$workload \
      --replicas=1 "${bench[@]}"
    check "train_bench $workload, 4 virtual GPUs" 60 "$work/bin/train_bench" \
      --workload=$workload --replicas=4 --virtual-gpus=4 "${bench[@]}"
    if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
      check "PyTorch $workload, 1 GPU" 90 python3 bench/peers/torch_train.py --workload=$workload \
        --device=cuda --threads=1 --blas-threads=1 "${bench[@]}"
    fi
  done
  check "train_bench mlp 4096x4096, batch 4096, 1 GPU" 60 "$work/bin/train_bench" --workload=mlp \
    --hidden=4096 --global-batch=4096 --replicas=1 "${bench[@]}"
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    check "PyTorch mlp 4096x4096, batch 4096, 1 GPU" 60 python3 bench/peers/torch_train.py \
      --workload=mlp --hidden=4096 --global-batch=4096 --device=cuda --threads=1 \
      --blas-threads=1 "${bench[@]}"
  fi

  # Several cards: one replica per card, NCCL between them (the tests above check the sums).
  if ((cards >= 2)); then
    check "tower train mlp, one replica per card over NCCL" 120 "$tower" train \
      --data=synthetic:mlp --steps=500 --replicas=2 --verbose=1
  fi

  # `tower train`'s input pipeline read ahead (the default on GPUs) against inline
  # (--prefetch=0), alternating, on the large mlp: seconds for the same steps.
  # shellcheck disable=SC2317  # called through bash -c
  prefetch_ab() {
    local round p start
    for round in 1 2; do
      for p in 0 -1; do
        start=$EPOCHREALTIME
        "$tower" train --data=synthetic:mlp --layers=4096:relu,4096:relu,1 --global-batch=4096 \
          --steps=150 --optimizer=sgd --lr=0.01 --verbose=0 --prefetch="$p" || return 1
        echo "round $round --prefetch=$p: $(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", b - a}') s for 150 steps"
      done
    done
  }
  export -f prefetch_ab
  check "tower train mlp 4096x4096 batch 4096, 150 steps: --prefetch=0 vs default" 120 \
    bash -c 'prefetch_ab 2>&1 | grep round | tr "\n" ";"'

  # Where the large step's time goes: Tower's trace of its kernels (bench/trace_kernels.py) and
  # PyTorch's profiler, same model and batch. In the log only; the table gets their last lines.
  # shellcheck disable=SC2016  # $0 and $1: bash -c's own arguments
  check "Tower's kernels, mlp 4096x4096, batch 4096 (trace)" 90 bash -c '
    "$0" train --data=synthetic:mlp:rows=49152 --layers=4096:relu,4096:relu,1 --global-batch=4096 \
      --steps=12 --optimizer=sgd --lr=0.01 --verbose=0 --trace="$1" --trace-steps=6:10 &&
    python3 bench/trace_kernels.py "$1" --top=12' "$tower" "$work/trace.json"
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    check "PyTorch's kernels, mlp 4096x4096, batch 4096 (profiler)" 90 python3 \
      bench/peers/torch_train.py --workload=mlp --hidden=4096 --global-batch=4096 --device=cuda \
      --threads=1 --blas-threads=1 --window-s=0.5 --warmup-s=2 --repeats=1 --profile-steps=5
  fi

fi

{
  echo
  echo "GPU: $gpu; $(date -u '+%Y-%m-%d %H:%M UTC'); $((SECONDS - start_all)) s"
  echo "| check | result | time | gtest's counts, or the last line of the output |"
  echo "|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  if [[ -s "$work/failures" ]]; then
    echo "failed cases:"
    cat "$work/failures"
  fi
} | tee -a "$log"
exit $failed
