#!/usr/bin/env bash
# bench/gpu_bundle.sh: carry a build to a GPU machine that has an NVIDIA driver and CUDA 13's
# libraries (cudart, cuBLAS, NCCL: a CUDA toolkit, or PyTorch's wheels) but not this project's
# packages, and no way to install them (a lent machine with no package registry). The first
# GPU run of 2026-11-26 (docs/gpu.md) carried its build this way, with the script this grew from.
#
#   here:  bench/gpu_bundle.sh pack FILE.tar.xz [BUILD_DIR]      (run from the source tree)
#          FILE holds what bench/gpu_check.sh runs (pptrain, test_cuda_kernels, bench_cuda and
#          every CTestTestfile.cmake) and the shared libraries they load that are not the C
#          and C++ runtimes' nor CUDA's (oneDNN, Open MPI, SQLite, ncurses, cJSON, PCRE2,
#          libcrypto, ...), with the sqlite3 program gpu_check reads its stores with.
#   there: eval "$(bench/gpu_bundle.sh unpack FILE.tar.xz)"      (from a checkout of the same commit)
#          unpacks the build into the tree, at the absolute path it was built at (ctest's files
#          name absolute paths: where the tree lies elsewhere, a symbolic link from that path
#          to it stands in, so the commands that follow must run at that path: the printed
#          cd does it), finds CUDA's libraries, and prints the exports to run with. Then:
#          bench/gpu_check.sh build
set -euo pipefail
bundle_dir=.gpu-bundle   # in the tree, ignored by git: the libraries and programs unpacked

usage() { echo "usage: bench/gpu_bundle.sh pack FILE.tar.xz [BUILD_DIR] | unpack FILE.tar.xz" >&2; exit 2; }

pack() {
  local out=$1 build=${2:-build}
  local bins=("$build/pptrain" "$build/tests/gpu/test_cuda_kernels" "$build/tests/gpu/bench_cuda")
  for b in "${bins[@]}"; do [ -x "$b" ] || { echo "gpu_bundle: $b is not built (cmake --build $build)" >&2; exit 2; }; done
  command -v sqlite3 > /dev/null || { echo "gpu_bundle: no sqlite3 program here to carry" >&2; exit 2; }
  stage=$(mktemp -d)   # global: the EXIT trap outlives this function
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/$bundle_dir/lib" "$stage/$bundle_dir/bin"
  # Every library the programs load, less the runtimes every Linux has and CUDA's own (those
  # must match the machine's driver, so they come from there).
  for b in "${bins[@]}" "$(command -v sqlite3)"; do ldd "$b" | awk '$3 ~ /^\// { print $3 }'; done | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libz)\.so|libcudart|libcublas|libnccl' |
    while read -r lib; do cp -L "$lib" "$stage/$bundle_dir/lib/"; done
  cp -L "$(command -v sqlite3)" "$stage/$bundle_dir/bin/"
  sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" > "$stage/$bundle_dir/built_at"   # the tree cmake saw
  git rev-parse HEAD > "$stage/$bundle_dir/commit" 2>/dev/null || echo unknown > "$stage/$bundle_dir/commit"
  local tests
  mapfile -t tests < <(find "$build" -name CTestTestfile.cmake)
  tar -cf "$stage/build.tar" "${bins[@]}" "${tests[@]}"
  tar -C "$stage" -cJf "$out" "$bundle_dir" build.tar
  echo "gpu_bundle: $out ($(du -h "$out" | cut -f1)), $(find "$stage/$bundle_dir/lib" -type f | wc -l) libraries, built at $(cat "$stage/$bundle_dir/built_at")" >&2
}

unpack() {
  local in=$1 here built dirs="" lib
  here=$(pwd)
  tar -xJf "$in"
  tar -xf build.tar && rm build.tar
  built=$(cat "$bundle_dir/built_at")
  if [ "$built" != "$here" ]; then
    if [ ! -e "$built" ]; then
      mkdir -p "$(dirname "$built")" && ln -s "$here" "$built"
    elif [ "$(cd "$built" && pwd -P)" != "$(pwd -P)" ]; then
      echo "gpu_bundle: built at $built, which is another folder here: unpack there instead" >&2
      exit 2
    fi
  fi
  [ "$(cat "$bundle_dir/commit")" = "$(git rev-parse HEAD 2>/dev/null || echo unknown)" ] ||
    echo "gpu_bundle: warning: packed at commit $(cat "$bundle_dir/commit"), this checkout is at another" >&2
  for lib in libcudart.so.13 libcublasLt.so.13 libcublas.so.13 libnccl.so.2; do
    local found
    found=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
    [ -n "$found" ] || { echo "gpu_bundle: no $lib on this machine (CUDA 13's libraries are needed)" >&2; exit 2; }
    case ":$dirs:" in *":$(dirname "$found"):"*) ;; *) dirs="$dirs:$(dirname "$found")" ;; esac
  done
  echo "cd '$built'"
  echo "export LD_LIBRARY_PATH='$here/$bundle_dir/lib$dirs'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  echo "export PATH='$here/$bundle_dir/bin':\$PATH"
}

[ $# -ge 2 ] || usage
case $1 in
  pack) pack "$2" "${3:-build}" ;;
  unpack) unpack "$2" ;;
  *) usage ;;
esac
