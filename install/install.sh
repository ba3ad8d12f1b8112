#!/usr/bin/env bash
# Installs Tower for C++ projects outside this repository (most use CMake):
#
#   install/install.sh --prefix=DIR
#
#   DIR/include/tower/...              the headers ("model/sequential.h", ...)
#   DIR/lib/libtower.a                 every public library's objects
#   DIR/lib/cmake/Tower/               find_package(Tower) -> the imported target Tower::tower
#   DIR/lib/pkgconfig/tower.pc         pkg-config --cflags --libs tower
#
# Built as `./bazelw build` builds (optimised for this machine's CPU; --config=portable for
# another). The library needs Open MPI's libmpi (libopenmpi-dev), oneDNN (libdnnl-dev),
# libprotobuf (libprotobuf-dev: TensorBoard's event files), Intel ISA-L (libisal-dev: their
# CRC-32C) and C++17. CPU only: a CUDA build of the library is not packaged (yet).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

prefix=""
bazel_args=()
for arg in "$@"; do
  case "$arg" in
    --prefix=*) prefix="${arg#--prefix=}" ;;
    --config=*) bazel_args+=("$arg") ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "install: unknown argument '$arg' (use --prefix=DIR)" >&2; exit 2 ;;
  esac
done
if [[ -z "$prefix" ]]; then
  echo "install: give --prefix=DIR (where include/, lib/ go)" >&2
  exit 2
fi
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"

./bazelw build "${bazel_args[@]}" //install:api_objects >&2
execroot="$(./bazelw info "${bazel_args[@]}" execution_root 2>/dev/null)"
# The link's object files: every public library's, not this program's own main.
mapfile -t objects < <(./bazelw aquery "${bazel_args[@]}" 'mnemonic("CppLink", //install:api_objects)' \
                         --output=text 2>/dev/null |
                       grep -o 'Inputs: \[[^]]*\]' | tr ',[]' '\n\n\n' | sed 's/^ *//' |
                       grep '\.o$' | grep -v '/install/_objs/' || true)
if [[ ${#objects[@]} -eq 0 ]]; then
  echo "install: found no object files to archive (bazel aquery gave none)" >&2
  exit 1
fi

# Everything is staged, then moved into place: an interrupted install leaves the previous one.
stage="$(mktemp -d "$prefix/.tower-install.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/include/tower" "$stage/lib/cmake/Tower" "$stage/lib/pkgconfig"
# `q`: objects with the same file name in different libraries are all kept.
(cd "$execroot" && ar qc "$stage/lib/libtower.a" "${objects[@]}")
ranlib "$stage/lib/libtower.a"
# The headers of the layers (not the CUDA-only ones, nor the tests' fakes).
for layer in util device ops data model strategy; do
  while IFS= read -r header; do
    mkdir -p "$stage/include/tower/$(dirname "$header")"
    cp "$header" "$stage/include/tower/$header"
  done < <(find "$layer" -name '*.h' -not -path '*/cuda/*' -not -path '*/testing/*' \
               -not -path '*/layering_check/*' | sort)
done

version="0.1.0"
libs="-L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi -ldnnl -lprotobuf -lisal -lgomp -lm -pthread"
cat > "$stage/lib/cmake/Tower/TowerConfig.cmake" <<CMAKE
# Tower's CMake package: find_package(Tower) gives the imported target Tower::tower
# (the headers, libtower.a, C++17, Open MPI, oneDNN, libprotobuf, ISA-L and threads).
include(CMakeFindDependencyMacro)
find_dependency(Threads)
get_filename_component(_tower_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET Tower::tower)
  add_library(Tower::tower STATIC IMPORTED)
  set_target_properties(Tower::tower PROPERTIES
    IMPORTED_LOCATION "\${_tower_prefix}/lib/libtower.a"
    INTERFACE_INCLUDE_DIRECTORIES "\${_tower_prefix}/include/tower"
    INTERFACE_COMPILE_FEATURES cxx_std_17
    INTERFACE_LINK_LIBRARIES "-L/usr/lib/x86_64-linux-gnu/openmpi/lib;mpi;dnnl;protobuf;isal;gomp;m;Threads::Threads")
endif()
unset(_tower_prefix)
CMAKE
cat > "$stage/lib/cmake/Tower/TowerConfigVersion.cmake" <<CMAKE
set(PACKAGE_VERSION "$version")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
CMAKE
cat > "$stage/lib/pkgconfig/tower.pc" <<PC
prefix=$prefix
includedir=\${prefix}/include/tower
libdir=\${prefix}/lib

Name: tower
Description: data-parallel training in C++
Version: $version
Cflags: -I\${includedir} -std=c++17
Libs: -L\${libdir} -ltower $libs
PC

for part in include/tower lib/libtower.a lib/cmake/Tower lib/pkgconfig/tower.pc; do
  mkdir -p "$prefix/$(dirname "$part")"
  rm -rf "${prefix:?}/$part"
  mv "$stage/$part" "$prefix/$part"
done
echo "install: Tower $version in $prefix (${#objects[@]} objects, $(find "$prefix/include/tower" -name '*.h' | wc -l) headers)"
