#!/usr/bin/env bash
# Installs pptrain's dependencies (Debian/Ubuntu packages) and builds it into build/.
# Safe to run again. Uses sudo when not run as root.
set -euo pipefail
cd "$(dirname "$0")"

packages=(
  build-essential cmake pkg-config
  libdnnl-dev                   # CPU GEMM (oneDNN's sgemm, kernels by CPU features; OpenMP build)
  libopenblas0-openmp libblis4-openmp   # the GEMM libraries bench/bench_sgemm compares it with
  libopenmpi-dev openmpi-bin    # ranks and CPU messages
  libncurses-dev                # the console
  libsqlite3-dev sqlite3        # the run store
  libcjson-dev                  # config.json, safetensors headers, --json output
  libssl-dev                    # sha256 of checkpoint files
  libpcre2-dev                  # the Hugging Face tokenizers' regexes (Unicode properties, JIT)
  tmux                          # the console's end-to-end tests
  iproute2                      # ip and tc: tests/cli/cli_two_nodes.sh's two namespace nodes
  clang                         # libFuzzer targets of the test suite (tests/fuzz)
  fortunes                      # real English text for the demo run (/usr/share/games/fortunes)
)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# libFuzzer's runtime: in libclang-rt-N-dev on Debian 12 and Ubuntu 24.04, inside clang's own
# packages on older releases.
fuzzer_rt=$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null || true)
if [ ! -f "$fuzzer_rt" ]; then
  v=$(clang -dumpversion | cut -d. -f1)
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "libclang-rt-$v-dev" ||
    echo "setup: libFuzzer runtime not found (libclang-rt-$v-dev); the fuzz stage of tests/run-tests will fail"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo "built build/pptrain"
