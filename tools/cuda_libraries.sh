# Where the CUDA libraries a GPU bundle was linked against are on this machine: the one owner
# of the search tools/gpu_bundle_run.sh does (sourced by it and by cuda_libraries_test.sh).
#
#   cuda_library_dirs          the folders searched, in order, one per line
#   find_cuda_library SONAME   the first SONAME (e.g. libcudart.so.13) in them, else the first
#                              under $CUDA_LIBRARY_FALLBACK_ROOTS (default "/usr /opt", where
#                              Python's nvidia-* wheels put theirs); status 1 when none
#   find_cuda_soname NAME [DIR...]
#                              the first libNAME.so.<major> (libcudart.so.12, .so.13: any
#                              major) in DIRs (default: cuda_library_dirs); status 1 when none.
#                              tools/cuda_toolkit.sh checks a toolkit with it before a build.
#
# The order: the toolkit at $TOWER_CUDA_PATH (as the build takes it), the toolkit of the
# nvcc on PATH, /usr/local/cuda, then every /usr/local/cuda-X.Y, newest first; in each its
# lib64 and targets/x86_64-linux/lib. A toolkit of another layout or version is found as
# long as one of these names it, and a library of the wrong major version never matches:
# the soname carries it.

cuda_library_dirs() {
  local roots=() root nvcc
  [[ -n "${TOWER_CUDA_PATH:-}" ]] && roots+=("$TOWER_CUDA_PATH")
  if nvcc="$(command -v nvcc 2>/dev/null)"; then
    roots+=("$(dirname "$(dirname "$(readlink -f "$nvcc")")")")
  fi
  roots+=(/usr/local/cuda)
  while read -r root; do
    [[ -n "$root" ]] && roots+=("$root")
  done < <(ls -d /usr/local/cuda-* 2>/dev/null | sort -rV)
  # Each folder once (the nvcc's toolkit is often /usr/local/cuda-X.Y itself).
  for root in "${roots[@]}"; do
    echo "$root/lib64"
    echo "$root/targets/x86_64-linux/lib"
  done | awk '!seen[$0]++'
}

find_cuda_library() {
  local soname="$1" dir found
  while read -r dir; do
    if [[ -e "$dir/$soname" ]]; then
      echo "$dir/$soname"
      return 0
    fi
  done < <(cuda_library_dirs)
  # shellcheck disable=SC2086  # a list of folders
  found="$(find ${CUDA_LIBRARY_FALLBACK_ROOTS:-/usr /opt} -name "$soname" 2>/dev/null | head -1)"
  [[ -n "$found" ]] || return 1
  echo "$found"
}

find_cuda_soname() {
  local name="$1" dir path found major
  shift
  local dirs=("$@")
  ((${#dirs[@]})) || mapfile -t dirs < <(cuda_library_dirs)
  for dir in "${dirs[@]}"; do
    # The soname (libcudart.so.12), not the file it links to (libcudart.so.12.4.127); where a
    # folder has two majors, the newest.
    found="" major=-1
    for path in "$dir/lib$name.so."*; do
      if [[ "$path" =~ /lib$name\.so\.([0-9]+)$ ]] && ((BASH_REMATCH[1] > major)); then
        found="$path" major="${BASH_REMATCH[1]}"
      fi
    done
    if [[ -n "$found" ]]; then
      echo "$found"
      return 0
    fi
  done
  return 1
}
