#!/usr/bin/env bash
# Packs what a GPU machine without Bazel or a network needs to validate Tower's CUDA code:
# every GPU test (tag `gpu`, not the emulation-only ones), `tower`, the virtual-GPU and
# linear-regression examples and train_bench, built here with --config=cuda for any x86-64-v3
# CPU, and the shared libraries they use other than the C and C++ runtimes and CUDA's own
# (cudart, cuBLAS, NCCL: the GPU machine's driver must match them, so its own copies are
# used). The result is gpu_carry/bundle.tar.xz (ignored by git); tools/gpu_bundle_run.sh runs
# it there.
#
#   tools/gpu_bundle.sh          # here, where a CUDA toolkit is (BUILDING in README.md)
#   tools/gpu_bundle_run.sh      # there, in a copy of the repository that holds gpu_carry/
#
# The toolkit is found and checked before anything is built, as tools/gpu_check.sh does (one
# owner: tools/cuda_toolkit.sh): $TOWER_CUDA_PATH, $CUDA_HOME, $CUDA_PATH, the nvcc on PATH or
# /usr/local/cuda, with bin/nvcc, CUDA 12 or newer, NCCL 2.14 or newer and its libraries; one
# missing or old stops it (exit 2) with one line saying which. The build gets it as
# TOWER_CUDA_PATH, and the bundle records its version (cuda_version.txt).
# Where the GPU machine has Bazel and the toolkit, tools/gpu_check.sh does the same in place.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=cuda_toolkit.sh
source tools/cuda_toolkit.sh
cuda_toolkit_select gpu_bundle || exit 2

# Its own output directory: the default build's outputs stay.
config=(--config=cuda --config=portable --dynamic_mode=off --platform_suffix=-cudaport)
mapfile -t tests < <(./bazelw query --noshow_progress \
  'attr(tags, "\bgpu\b", tests(//tests/...)) except attr(tags, "\bcudaemu\b", tests(//tests/...))' \
  2>/dev/null)
[[ ${#tests[@]} -gt 0 ]] || { echo "gpu_bundle: bazel query found no GPU tests" >&2; exit 1; }
programs=(//tools:tower //examples:virtual_gpus //examples:linear_regression //bench:train_bench)
./bazelw build "${config[@]}" "${tests[@]}" "${programs[@]}"
bin="$(./bazelw info "${config[@]}" bazel-bin 2>/dev/null)"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/runfiles/tower/tools"
for target in "${tests[@]}" "${programs[@]}"; do
  path="${target#//}"
  path="${path/://}"
  cp "$bin/$path" "$stage/bin/"
done
# The tests that run `tower` find it as a runfile (tests/testing/run_program.h: TEST_SRCDIR);
# so does the runner.
mv "$stage/bin/tower" "$stage/runfiles/tower/tools/tower"
chmod u+w "$stage"/bin/* "$stage/runfiles/tower/tools/tower"
strip --strip-debug "$stage"/bin/* "$stage/runfiles/tower/tools/tower"

# The CUDA libraries the programs were linked against (their sonames carry the major version)
# and the toolkit's version: gpu_bundle_run.sh looks for exactly these on the GPU machine, and
# says which when one is missing.
for f in "$stage"/bin/* "$stage/runfiles/tower/tools/tower"; do readelf -d "$f"; done |
  sed -n 's/.*(NEEDED).*\[\(lib\(cudart\|cublas\|cublasLt\|nccl\)\.so[^]]*\)\]/\1/p' |
  sort -u > "$stage/cuda_sonames.txt"
[[ -s "$stage/cuda_sonames.txt" ]] || { echo "gpu_bundle: no CUDA library among the programs' needs" >&2; exit 1; }
echo "CUDA $CUDA_TOOLKIT_VERSION" > "$stage/cuda_version.txt"

# Libraries from this machine's system folders, except glibc's and the C++ runtime (the GPU
# machine's are as new or newer) and CUDA's (the toolkit's, or a system NCCL: the GPU
# machine's own).
runtime='/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so'
cuda='/lib(cuda|cudart|cublas|cublasLt|nccl)\.so'
for f in "$stage"/bin/* "$stage/runfiles/tower/tools/tower"; do ldd "$f"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
  sort -u | grep -v "^$TOWER_CUDA_PATH/" | grep -Ev "$runtime|$cuda" |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done

mkdir -p gpu_carry
tar -C "$stage" -cf - . | xz -T2 -6 > gpu_carry/bundle.tar.xz.part
mv gpu_carry/bundle.tar.xz.part gpu_carry/bundle.tar.xz
echo "gpu_bundle: gpu_carry/bundle.tar.xz, $(du -h gpu_carry/bundle.tar.xz | cut -f1):" \
  "${#tests[@]} tests, ${#programs[@]} programs, $(ls "$stage/lib" | wc -l) libraries"
