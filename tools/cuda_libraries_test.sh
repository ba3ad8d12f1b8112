#!/bin/bash
# tools/cuda_libraries.sh on made-up toolkits: the order of the search ($TOWER_CUDA_PATH,
# then the nvcc on PATH, then the fallback roots), both library layouts, and a library that
# is nowhere (status 1, nothing printed). Sonames no real toolkit has (.so.97 to .so.99), so
# that this machine's own CUDA cannot answer.
set -euo pipefail
lib="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-tower}/tools/cuda_libraries.sh"
[[ -f "$lib" ]] || lib="$(dirname "$0")/cuda_libraries.sh"
# shellcheck source=cuda_libraries.sh
source "$lib"
t="$(mktemp -d)"
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/env/targets/x86_64-linux/lib" "$t/nvcc_kit/bin" "$t/nvcc_kit/lib64" "$t/wheels/nvidia/lib"
touch "$t/env/targets/x86_64-linux/lib/libcudart.so.99" "$t/nvcc_kit/lib64/libcudart.so.99" \
      "$t/nvcc_kit/lib64/libcublas.so.99" "$t/wheels/nvidia/lib/libnccl.so.98"
printf '#!/bin/sh\n' > "$t/nvcc_kit/bin/nvcc"
chmod +x "$t/nvcc_kit/bin/nvcc"
export PATH="$t/nvcc_kit/bin:$PATH" TOWER_CUDA_PATH="$t/env" CUDA_LIBRARY_FALLBACK_ROOTS="$t/wheels"
expect() {  # expect SONAME WANTED: find_cuda_library's answer
  local got
  got="$(find_cuda_library "$1")" || got="(none)"
  [[ "$got" == "$2" ]] || { echo "FAIL: $1: got '$got', want '$2'" >&2; exit 1; }
}
# $TOWER_CUDA_PATH first (its targets/ layout), though the nvcc's toolkit has it too.
expect libcudart.so.99 "$t/env/targets/x86_64-linux/lib/libcudart.so.99"
# Then the toolkit of the nvcc on PATH (lib64).
expect libcublas.so.99 "$t/nvcc_kit/lib64/libcublas.so.99"
# Then the fallback roots.
expect libnccl.so.98 "$t/wheels/nvidia/lib/libnccl.so.98"
# Nowhere: status 1 and nothing printed.
if out="$(find_cuda_library libcudart.so.97)"; then
  echo "FAIL: libcudart.so.97 found at '$out'" >&2
  exit 1
fi
[[ -z "$out" ]]
# The folders searched start with $TOWER_CUDA_PATH's, then the nvcc's toolkit's.
[[ "$(cuda_library_dirs | head -3 | tr '\n' ' ')" == "$t/env/lib64 $t/env/targets/x86_64-linux/lib $t/nvcc_kit/lib64 " ]]
echo PASS
