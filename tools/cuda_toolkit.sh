# shellcheck shell=bash
# Which CUDA toolkit Tower's GPU build (--config=cuda) uses, and whether it can: the one owner
# of the toolkit's discovery and version checks, sourced by tools/gpu_check.sh and
# tools/gpu_bundle.sh (and tools/gpu_check_test.sh through gpu_check.sh).
#
#   cuda_toolkit_select WHO   finds the toolkit, checks it, exports TOWER_CUDA_PATH=<it> (what
#                             third_party/cuda/toolkit_repository.bzl reads; it is in the rule's
#                             `environ`, so Bazel re-reads @cuda when it changes) and prints
#                             one line, "WHO: CUDA toolkit DIR (from WHY), CUDA X.Y, NCCL A.B.C
#                             (sonames)"; status 2 with one line per problem on stderr, each
#                             naming what is missing or old, what was found and what to do.
#
# Afterwards: CUDA_TOOLKIT_DIR, CUDA_TOOLKIT_FROM (why it was chosen), CUDA_TOOLKIT_VERSION
# ("12.4"), NCCL_TOOLKIT_VERSION ("2.21.5"), CUDA_TOOLKIT_SONAMES ("libcudart.so.12 ...").
#
# The order: $TOWER_CUDA_PATH (it wins: it is what the build reads), $CUDA_HOME, $CUDA_PATH,
# the toolkit of the nvcc on PATH (its parent's parent), /usr/local/cuda.
# The checks, all before anything is built:
#   - bin/nvcc (cuda_library runs it: third_party/cuda/cuda.bzl);
#   - CUDA_VERSION of include/cuda.h >= 12000, as toolkit_repository.bzl requires: Tower calls
#     cuBLAS's 64-bit (`_64`) entry points and cudaGetDriverEntryPointByVersion, new in 12.0;
#   - nccl.h where the build finds it: the toolkit's include/ (third_party/cuda.BUILD), else the
#     compiler's own /usr/include; NCCL >= NCCL_MIN_MAJOR.NCCL_MIN_MINOR (below);
#   - libcudart, libcublas, libcublasLt and libnccl under any major version (libcudart.so.12,
#     .so.13, ...) where the link finds them: the toolkit's lib64 (the -L of
#     third_party/cuda.BUILD), else the system's library folders.
# CUDA_TOOLKIT_SYSTEM_ROOT (default /usr) stands for the system's folders, for tests.

# NCCL 2.14 or newer: strategy/collectives/cuda/nccl_all_reduce.cc makes its cross-process
# communicators
# with ncclCommInitRankConfig and an ncclConfig_t with `blocking = 0` (non-blocking
# communicators, so that setup has a deadline and can be aborted), and ends them with
# ncclCommFinalize, all new in NCCL 2.14; the rest it calls is older (ncclGetLastError 2.13;
# ncclCommGetAsyncError, ncclCommAbort 2.4; ncclCommInitAll, ncclAllGather, ncclAllReduce,
# ncclBroadcast, group calls). It sets no other ncclConfig_t field and does not call
# ncclCommSplit.
# (NCCL_MULTI_RANK_GPU_ENABLE, read by newer releases, is a runtime switch that only one-card
# NCCL checks use; without it they are refused, naming it: not a build requirement.)
NCCL_MIN_MAJOR=2
NCCL_MIN_MINOR=14

# shellcheck source=cuda_libraries.sh
source "$(dirname "${BASH_SOURCE[0]}")/cuda_libraries.sh"

# _cuda_toolkit_find: sets CUDA_TOOLKIT_DIR, CUDA_TOOLKIT_FROM and CUDA_TOOLKIT_VAR (the
# variable that named it, or empty).
_cuda_toolkit_find() {
  local var nvcc dir
  CUDA_TOOLKIT_DIR="" CUDA_TOOLKIT_FROM="" CUDA_TOOLKIT_VAR=""
  for var in TOWER_CUDA_PATH CUDA_HOME CUDA_PATH; do
    if [[ -n "${!var:-}" ]]; then
      CUDA_TOOLKIT_DIR="${!var%/}" CUDA_TOOLKIT_VAR="$var" CUDA_TOOLKIT_FROM="from $var"
      break
    fi
  done
  if [[ "$CUDA_TOOLKIT_VAR" == TOWER_CUDA_PATH ]]; then
    CUDA_TOOLKIT_FROM="from TOWER_CUDA_PATH, which the build reads"
    for var in CUDA_HOME CUDA_PATH; do
      if [[ -n "${!var:-}" && "${!var%/}" != "$CUDA_TOOLKIT_DIR" ]]; then
        CUDA_TOOLKIT_FROM+="; $var=${!var} not used"
      fi
    done
  fi
  [[ -n "$CUDA_TOOLKIT_DIR" ]] && return 0
  if nvcc="$(command -v nvcc 2>/dev/null)"; then
    # As PATH names it (/usr/local/cuda, not the /usr/local/cuda-X.Y it links to, so that the
    # build's toolkit path outlives an upgrade), unless only the link's target is a toolkit.
    dir="$(dirname "$(dirname "$nvcc")")"
    [[ -f "$dir/include/cuda.h" ]] || dir="$(dirname "$(dirname "$(readlink -f "$nvcc")")")"
    CUDA_TOOLKIT_DIR="$dir" CUDA_TOOLKIT_FROM="from the nvcc on PATH, $nvcc"
    return 0
  fi
  CUDA_TOOLKIT_DIR=/usr/local/cuda
  CUDA_TOOLKIT_FROM="the default: TOWER_CUDA_PATH, CUDA_HOME and CUDA_PATH are unset and no nvcc is on PATH"
}

# _cuda_header_define FILE NAME: the number NAME is #defined to in FILE, else nothing.
_cuda_header_define() {
  sed -n "/^[[:space:]]*#[[:space:]]*define[[:space:]]\{1,\}$2[[:space:]]\{1,\}\([0-9]\{1,\}\).*/{s//\1/p;q;}" \
    "$1" 2>/dev/null
}

cuda_toolkit_select() {
  local who="$1" dir problems=() cuda_version nccl_h="" nccl_major nccl_minor nccl_patch
  local system="${CUDA_TOOLKIT_SYSTEM_ROOT:-/usr}" name soname sonames=() missing=()
  _cuda_toolkit_find
  dir="$CUDA_TOOLKIT_DIR"

  # No nvcc: the folder is not a toolkit, and nothing else in it is worth checking.
  if [[ ! -x "$dir/bin/nvcc" ]]; then
    local what="has no bin/nvcc"
    [[ -d "$dir" ]] || what="does not exist (no bin/nvcc)"
    if [[ -n "$CUDA_TOOLKIT_VAR" ]]; then
      echo "$who: $CUDA_TOOLKIT_VAR=$dir $what: point $CUDA_TOOLKIT_VAR at a CUDA toolkit" \
        "(12 or newer) or unset it" >&2
    elif [[ "$CUDA_TOOLKIT_FROM" == "from the nvcc on PATH"* ]]; then
      echo "$who: the nvcc on PATH ($(command -v nvcc)) is not in a toolkit's bin/ ($dir $what):" \
        "point CUDA_HOME at a CUDA toolkit (12 or newer)" >&2
    else
      echo "$who: no CUDA toolkit: $dir $what, no nvcc is on PATH, and TOWER_CUDA_PATH," \
        "CUDA_HOME and CUDA_PATH are unset: install CUDA 12 or newer (with cuBLAS and NCCL)" \
        "there, or point CUDA_HOME at one" >&2
    fi
    return 2
  fi
  local var="${CUDA_TOOLKIT_VAR:-CUDA_HOME}"

  # CUDA 12 or newer, read as third_party/cuda/toolkit_repository.bzl reads it.
  cuda_version="$(_cuda_header_define "$dir/include/cuda.h" CUDA_VERSION)"
  if [[ -z "$cuda_version" ]]; then
    problems+=("$dir ($CUDA_TOOLKIT_FROM) has bin/nvcc but no include/cuda.h giving CUDA_VERSION: point $var at a complete CUDA toolkit (12 or newer)")
  else
    CUDA_TOOLKIT_VERSION="$((cuda_version / 1000)).$((cuda_version % 1000 / 10))"
    if ((cuda_version < 12000)); then
      problems+=("$dir ($CUDA_TOOLKIT_FROM) is CUDA $CUDA_TOOLKIT_VERSION; Tower needs CUDA 12 or newer (it calls cuBLAS's _64 entry points and cudaGetDriverEntryPointByVersion, new in 12.0): install CUDA 12 or newer and point $var at it")
    fi
  fi

  # NCCL: nccl.h where the build's compiler finds it.
  for nccl_h in "$dir/include/nccl.h" "$system/include/nccl.h" ""; do
    [[ -z "$nccl_h" || -f "$nccl_h" ]] && break
  done
  NCCL_TOOLKIT_VERSION=""
  if [[ -z "$nccl_h" ]]; then
    local elsewhere=""
    if [[ -n "${NCCL_HOME:-}" && -f "$NCCL_HOME/include/nccl.h" ]]; then
      elsewhere="; NCCL_HOME=$NCCL_HOME has one, but the build does not read NCCL_HOME: link its include/nccl.h and lib/libnccl.so* into $dir/include and $dir/lib64"
    fi
    problems+=("NCCL: no nccl.h in $dir/include or $system/include, where the build looks (third_party/cuda.BUILD): install NCCL $NCCL_MIN_MAJOR.$NCCL_MIN_MINOR or newer into the toolkit (or its dev package under $system)$elsewhere")
  else
    nccl_major="$(_cuda_header_define "$nccl_h" NCCL_MAJOR)"
    nccl_minor="$(_cuda_header_define "$nccl_h" NCCL_MINOR)"
    nccl_patch="$(_cuda_header_define "$nccl_h" NCCL_PATCH)"
    if [[ -z "$nccl_major" || -z "$nccl_minor" ]]; then
      problems+=("NCCL: $nccl_h gives no NCCL_MAJOR and NCCL_MINOR: install NCCL $NCCL_MIN_MAJOR.$NCCL_MIN_MINOR or newer there")
    else
      NCCL_TOOLKIT_VERSION="$nccl_major.$nccl_minor.${nccl_patch:-0}"
      if ((nccl_major < NCCL_MIN_MAJOR ||
           (nccl_major == NCCL_MIN_MAJOR && nccl_minor < NCCL_MIN_MINOR))); then
        problems+=("NCCL $NCCL_TOOLKIT_VERSION ($nccl_h) is too old; Tower needs NCCL $NCCL_MIN_MAJOR.$NCCL_MIN_MINOR or newer (ncclCommInitRankConfig with a non-blocking ncclConfig_t): install a newer NCCL there")
      fi
    fi
  fi

  # The libraries the programs link, under whatever major version the toolkit has.
  local libdirs=("$dir/lib64" "$system/lib/x86_64-linux-gnu" "$system/lib64")
  for name in cudart cublas cublasLt nccl; do
    if soname="$(find_cuda_soname "$name" "${libdirs[@]}")"; then
      sonames+=("$(basename "$soname")")
    else
      missing+=("lib$name")
    fi
  done
  CUDA_TOOLKIT_SONAMES="${sonames[*]}"
  if ((${#missing[@]})); then
    problems+=("libraries: no ${missing[*]} (lib<name>.so.<major>, any major) in ${libdirs[*]}, where the build links them from: install the toolkit's runtime, cuBLAS and NCCL there, or point $var at a toolkit that has them")
  fi

  if ((${#problems[@]})); then
    local problem
    for problem in "${problems[@]}"; do echo "$who: $problem" >&2; done
    return 2
  fi
  export TOWER_CUDA_PATH="$dir"
  # Once per toolkit: gpu_check.sh's line says why; gpu_bundle.sh, run by it, stays quiet.
  if [[ "${TOWER_CUDA_ANNOUNCED:-}" != "$dir" ]]; then
    echo "$who: CUDA toolkit $dir ($CUDA_TOOLKIT_FROM), CUDA $CUDA_TOOLKIT_VERSION," \
      "NCCL $NCCL_TOOLKIT_VERSION ($CUDA_TOOLKIT_SONAMES)"
    export TOWER_CUDA_ANNOUNCED="$dir"
  fi
  return 0
}
