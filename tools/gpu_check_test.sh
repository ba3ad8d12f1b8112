#!/bin/bash
# tools/gpu_check.sh (and tools/cuda_toolkit.sh, which finds and checks the toolkit for it and
# for gpu_bundle.sh) on made-up toolkits, without a GPU and without Bazel: each case runs a
# copy of the scripts in a tree of its own under $TEST_TMPDIR, whose gpu_bundle.sh and
# gpu_bundle_run.sh are stubs that leave a mark, with a PATH of only the tools the scripts use
# (so this machine's nvcc and nvidia-smi never answer) and an empty stand-in for /usr.
set -euo pipefail
src="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-tower}/tools"
[[ -f "$src/gpu_check.sh" ]] || src="$(cd "$(dirname "$0")" && pwd)"
t="${TEST_TMPDIR:-$(mktemp -d)}/gpu_check"
rm -rf "$t"
mkdir -p "$t"

# The tools on PATH: links to this machine's, nothing else.
mkdir -p "$t/path" "$t/sys"
for tool in bash env dirname readlink sed head tail ls grep sort basename mktemp awk python3 \
            cat rm touch mkdir tr cut cp; do
  ln -s "$(command -v "$tool")" "$t/path/$tool"
done

# The tree: gpu_check.sh and its helpers as they are, stubs for the build and the run.
tree="$t/tree"
mkdir -p "$tree/tools" "$tree/docs"
cp "$src/gpu_check.sh" "$src/cuda_toolkit.sh" "$src/cuda_libraries.sh" "$tree/tools/"
cat >"$tree/tools/gpu_bundle.sh" <<'EOF'
#!/bin/bash
echo "TOWER_CUDA_PATH=${TOWER_CUDA_PATH:-}" >"$(dirname "$0")/../bundle_built"
EOF
cat >"$tree/tools/gpu_bundle_run.sh" <<'EOF'
#!/bin/bash
{ echo "earlier output"; echo "GPU: Fake GPU; now; 1 s"; echo "| check | result |"
  echo "| stub | pass |"; } >"$OUT/gpu_run.log"
EOF
chmod +x "$tree/tools/"*.sh
doc_text='# GPU validation
<!-- gpu-check: begin (written by tools/gpu_check.sh) -->
No run yet.
<!-- gpu-check: end -->
the rest'
printf '%s\n' "$doc_text" >"$tree/docs/GPU_VALIDATION.md"
cp "$tree/docs/GPU_VALIDATION.md" "$t/doc_before"
# A second tree with the real gpu_bundle.sh: it must stop at the toolkit, before Bazel (which
# this tree does not have).
mkdir -p "$t/bundle_tree/tools"
cp "$src/gpu_bundle.sh" "$src/cuda_toolkit.sh" "$src/cuda_libraries.sh" "$t/bundle_tree/tools/"

# make_kit DIR CUDA_VERSION NCCL_VERSION(a.b.c or "none") SONAME_MAJOR [LIBS...]: a toolkit
# with a stub bin/nvcc, include/cuda.h, include/nccl.h and lib64/lib<LIB>.so.<major>
# (default: cudart cublas cublasLt, and nccl as .so.2).
make_kit() {
  local dir="$1" version="$2" nccl="$3" major="$4" lib
  shift 4
  mkdir -p "$dir/bin" "$dir/include" "$dir/lib64"
  printf '#!/bin/sh\necho stub nvcc\n' >"$dir/bin/nvcc"
  chmod +x "$dir/bin/nvcc"
  printf '#ifndef CUDA_H\n#define CUDA_H\n#define CUDA_VERSION %s\n#endif\n' "$version" \
    >"$dir/include/cuda.h"
  if [[ "$nccl" != none ]]; then
    IFS=. read -r a b c <<<"$nccl"
    printf '#define NCCL_MAJOR %s\n#define NCCL_MINOR %s\n#define NCCL_PATCH %s\n' "$a" "$b" "$c" \
      >"$dir/include/nccl.h"
    touch "$dir/lib64/libnccl.so.2" "$dir/lib64/libnccl.so.2.$b.$c"
  fi
  (($#)) || set -- cudart cublas cublasLt
  for lib in "$@"; do
    touch "$dir/lib64/lib$lib.so" "$dir/lib64/lib$lib.so.$major" "$dir/lib64/lib$lib.so.$major.4.1"
  done
}
make_kit "$t/kit124" 12040 2.21.5 12
make_kit "$t/kit13" 13000 2.28.9 13
touch "$t/kit13/lib64/libcudart.so.9"  # two majors: the newest (not the first by name)
make_kit "$t/kit118" 11080 2.21.5 11
make_kit "$t/kit124_old_nccl" 12040 2.12.12 12
make_kit "$t/kit124_no_nccl" 12040 none 12
make_kit "$t/kit124_no_cublas" 12040 2.21.5 12 cudart
mkdir -p "$t/nokit/include" "$t/gpu/bin" "$t/nogpu/bin" "$t/failing_smi/bin"
printf '#!/bin/sh\necho "GPU 0: Fake GPU (UUID: GPU-0)"\n' >"$t/gpu/bin/nvidia-smi"
printf '#!/bin/sh\n' >"$t/nogpu/bin/nvidia-smi"
printf '#!/bin/sh\necho "No devices were found"\nexit 6\n' >"$t/failing_smi/bin/nvidia-smi"
chmod +x "$t"/*/bin/nvidia-smi

failures=0
fail() { echo "FAIL: $current: $*" >&2; echo "  its output: $(cat "$t/out")" >&2; failures=$((failures + 1)); }
# run CASE RC [VAR=VALUE...] -- [ARGS...]: tools/gpu_check.sh of the tree in a clean
# environment; its output (both streams) in $t/out; fails the case when the status is not RC.
run() {
  current="$1"
  local want="$2" vars=()
  shift 2
  while (($#)) && [[ "$1" != -- ]]; do vars+=("$1"); shift; done
  (($#)) && shift
  rm -f "$tree/bundle_built"
  cp "$t/doc_before" "$tree/docs/GPU_VALIDATION.md"
  local rc=0
  env -i HOME="$t" PATH="$t/path" CUDA_TOOLKIT_SYSTEM_ROOT="$t/sys" "${vars[@]}" \
    "$t/path/bash" "${script:-$tree/tools/gpu_check.sh}" "$@" >"$t/out" 2>&1 || rc=$?
  [[ "$rc" == "$want" ]] || fail "exit status $rc, want $want"
}
has() {  # has TEXT...: the last run's output holds every TEXT
  local text
  for text in "$@"; do grep -qF -- "$text" "$t/out" || fail "no '$text' in its output"; done
}
doc_unchanged() { cmp -s "$t/doc_before" "$tree/docs/GPU_VALIDATION.md" || fail "the doc changed"; }
not_built() { [[ ! -e "$tree/bundle_built" ]] || fail "gpu_bundle.sh ran"; }

# (a) CUDA_HOME without bin/nvcc: exit 2 naming CUDA_HOME and nvcc, before anything else.
run cuda_home_without_nvcc 2 CUDA_HOME="$t/nokit" PATH="$t/gpu/bin:$t/path"
has "gpu_check: CUDA_HOME=$t/nokit has no bin/nvcc: point CUDA_HOME at a CUDA toolkit (12 or newer) or unset it"
not_built; doc_unchanged
run cuda_home_missing 2 CUDA_HOME="$t/not_there"
has "CUDA_HOME=$t/not_there does not exist (no bin/nvcc)"
run cuda_path_without_nvcc 2 CUDA_PATH="$t/nokit"
has "CUDA_PATH=$t/nokit has no bin/nvcc"
# (b) CUDA 11.8: exit 2 naming 11.8 and 12.
run cuda_11_8 2 CUDA_HOME="$t/kit118" PATH="$t/gpu/bin:$t/path"
has "$t/kit118 (from CUDA_HOME) is CUDA 11.8; Tower needs CUDA 12 or newer"
not_built; doc_unchanged
# ... or no CUDA_VERSION at all.
make_kit "$t/kit_no_cuda_h" 12040 2.21.5 12
rm "$t/kit_no_cuda_h/include/cuda.h"
run no_cuda_h 2 CUDA_HOME="$t/kit_no_cuda_h"
has "$t/kit_no_cuda_h (from CUDA_HOME) has bin/nvcc but no include/cuda.h giving CUDA_VERSION"
# (c) CUDA 12.4 with NCCL 2.12: exit 2 naming NCCL, its version and the minimum.
run old_nccl 2 CUDA_HOME="$t/kit124_old_nccl" PATH="$t/gpu/bin:$t/path"
has "gpu_check: NCCL 2.12.12 ($t/kit124_old_nccl/include/nccl.h) is too old; Tower needs NCCL 2.14 or newer"
not_built
# ... without NCCL where the build looks; NCCL_HOME's is named, and said to be unread.
mkdir -p "$t/nccl_home/include"
cp "$t/kit124/include/nccl.h" "$t/nccl_home/include/"
run no_nccl 2 CUDA_HOME="$t/kit124_no_nccl" NCCL_HOME="$t/nccl_home"
has "gpu_check: NCCL: no nccl.h in $t/kit124_no_nccl/include or $t/sys/include" \
  "NCCL_HOME=$t/nccl_home has one, but the build does not read NCCL_HOME"
# ... which the compiler's own include folder may hold instead (as Debian's libnccl-dev does).
mkdir -p "$t/sys_nccl/include" "$t/sys_nccl/lib/x86_64-linux-gnu"
cp "$t/kit124/include/nccl.h" "$t/sys_nccl/include/"
touch "$t/sys_nccl/lib/x86_64-linux-gnu/libnccl.so.2"
run system_nccl 3 CUDA_HOME="$t/kit124_no_nccl" CUDA_TOOLKIT_SYSTEM_ROOT="$t/sys_nccl"
has "CUDA 12.4, NCCL 2.21.5 (libcudart.so.12 libcublas.so.12 libcublasLt.so.12 libnccl.so.2)"
# ... and a library missing: named, with where it was looked for.
run no_cublas 2 CUDA_HOME="$t/kit124_no_cublas"
has "gpu_check: libraries: no libcublas libcublasLt (lib<name>.so.<major>, any major) in $t/kit124_no_cublas/lib64"
# (d) a good toolkit, no nvidia-smi on PATH: exit 3, the checks that need a card listed,
# nothing built, the doc as it was.
run no_nvidia_smi 3 CUDA_HOME="$t/kit124"
has "gpu_check: CUDA toolkit $t/kit124 (from CUDA_HOME), CUDA 12.4, NCCL 2.21.5 (libcudart.so.12 libcublas.so.12 libcublasLt.so.12 libnccl.so.2)" \
  "gpu_check: no GPU visible (nvidia-smi is not on PATH): these checks need a card: the GPU tests" \
  "the examples" "mpirun workers on one card" "NCCL between cards" "2 processes x 2 cards" \
  "the timings" "nothing was run and docs/GPU_VALIDATION.md was left as it was"
not_built; doc_unchanged
# ... nvidia-smi listing nothing, or failing.
run nvidia_smi_lists_nothing 3 CUDA_HOME="$t/kit124" PATH="$t/nogpu/bin:$t/path"
has "no GPU visible (nvidia-smi -L lists no GPU)" "these checks need a card"
not_built; doc_unchanged
run nvidia_smi_fails 3 CUDA_HOME="$t/kit124" PATH="$t/failing_smi/bin:$t/path"
has "no GPU visible (nvidia-smi -L failed: No devices were found)"
not_built; doc_unchanged
# ... unless only the bundle is asked for: built, the doc as it was.
run build_only 0 CUDA_HOME="$t/kit124" -- --build-only
has "--build-only: gpu_carry/bundle.tar.xz built"
[[ -e "$tree/bundle_built" ]] || fail "gpu_bundle.sh did not run"
doc_unchanged
# (e) CUDA_HOME unset, nvcc on PATH: its toolkit (of CUDA 13, libraries .so.13).
run nvcc_on_path 3 PATH="$t/kit13/bin:$t/path"
has "gpu_check: CUDA toolkit $t/kit13 (from the nvcc on PATH, $t/kit13/bin/nvcc), CUDA 13.0, NCCL 2.28.9 (libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2)"
# TOWER_CUDA_PATH, which the build reads, wins over CUDA_HOME and the nvcc on PATH.
run tower_cuda_path_wins 3 TOWER_CUDA_PATH="$t/kit124" CUDA_HOME="$t/kit118" PATH="$t/kit13/bin:$t/path"
has "CUDA toolkit $t/kit124 (from TOWER_CUDA_PATH, which the build reads; CUDA_HOME=$t/kit118 not used)"
# A card: the bundle is built with TOWER_CUDA_PATH set to the toolkit found, and the runner's
# table (from its last "GPU: " line) goes between the doc's markers.
run with_a_card 0 CUDA_HOME="$t/kit13" PATH="$t/gpu/bin:$t/path"
[[ "$(cat "$tree/bundle_built" 2>/dev/null)" == "TOWER_CUDA_PATH=$t/kit13" ]] ||
  fail "gpu_bundle.sh ran with '$(cat "$tree/bundle_built" 2>/dev/null)'"
want_doc='# GPU validation
<!-- gpu-check: begin (written by tools/gpu_check.sh) -->
GPU: Fake GPU; now; 1 s
| check | result |
| stub | pass |
<!-- gpu-check: end -->
the rest'
[[ "$(cat "$tree/docs/GPU_VALIDATION.md")" == "$want_doc" ]] ||
  fail "the doc is '$(cat "$tree/docs/GPU_VALIDATION.md")'"
# gpu_bundle.sh finds and checks the toolkit the same way, and stops before Bazel.
script="$t/bundle_tree/tools/gpu_bundle.sh" run bundle_cuda_11_8 2 CUDA_HOME="$t/kit118"
has "gpu_bundle: $t/kit118 (from CUDA_HOME) is CUDA 11.8; Tower needs CUDA 12 or newer"
script="$t/bundle_tree/tools/gpu_bundle.sh" run bundle_without_nvcc 2 CUDA_HOME="$t/nokit"
has "gpu_bundle: CUDA_HOME=$t/nokit has no bin/nvcc"

if ((failures)); then
  echo "$failures failures" >&2
  exit 1
fi
echo PASS
