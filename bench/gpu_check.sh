#!/usr/bin/env bash
# bench/gpu_check.sh: the one command for the day a GPU is lent (issue 30, item 8). A lent
# machine runs a command for at most 10 minutes, so the parts run most telling first, each
# under its own time cap, and a part whose cap would pass the budget (GPU_CHECK_BUDGET, 540 s
# by default) is skipped with a row that says so. Prints one table, in this order:
#   ctest -L gpu                the GPU tests (test_cuda_kernels: flash attention at T 1 and 1024,
#                               HD 24/64/128, GQA 32/8; the fused classifier at V 32000 and 50257;
#                               cli_gpu: the engine on the GPU against the CPU engine)
#   one layer                   bench_cuda: a 125m decoder layer forward + backward, TFLOP/s; the
#                               device's GEMM rate and its memory's (a 1 GiB copy), which the
#                               estimates of docs/gpu.md scale by
#   MFU                         125m at seq 1024 (the llama2 tokenizer of tests/fixtures): 1 stage;
#                               4 stages on one GPU; with GPU_CHECK_BASE=PPTRAIN, 1 stage again
#                               for this build and that one, alternating, 3 rounds (their medians
#                               and the difference); 2 GPUs over nccl where there are 2
#   compute-sanitizer           racecheck (1 step: the attention kernels' shared tiles), then
#                               memcheck, synccheck, initcheck (3 steps), on 2 stages
#   kernels of one step         where a 125m step's GPU time goes, by kernel (Nsight Compute, where
#                               ncu is on the PATH): one line in the table, the top 12 after it
#   bf16 vs fp32                200 steps of the small preset, the largest loss gap and the last
# usage: bench/gpu_check.sh [BUILD_DIR]          (default: build; run from the source tree)
# GPU_CHECK_LOGS=DIR keeps every part's output there; GPU_CHECK_BASE=PPTRAIN adds the A/B row (above).
set -u
build=${1:-build}
bin="$build/pptrain"
src=$(cd "$(dirname "$0")/.." && pwd)
peak_tflops=989   # H100 SXM dense bf16, the MFU denominator of docs/gpu.md
work=${GPU_CHECK_LOGS:-$(mktemp -d)}
mkdir -p "$work"
[ -n "${GPU_CHECK_LOGS:-}" ] || trap 'rm -rf "$work"' EXIT
table="$work/table"
row() { printf '%-44s %s\n' "$1" "$2" | tee -a "$table"; }   # row WHAT RESULT: now, and in the table at the end
budget=${GPU_CHECK_BUDGET:-540}
# part WHAT CAP COMMAND...: runs COMMAND (which writes WHAT's rows) when its cap of CAP seconds
# ends within the budget, else one row saying why it did not run.
part() {
  local what=$1 cap=$2 left=$((budget - SECONDS))
  shift 2
  if [ "$cap" -le "$left" ]; then "$@"
  else row "$what" "skipped: ${left} s of the ${budget} s budget left, it may take $cap s"; fi
}

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$gpus" -ge 1 ] || { echo "gpu_check: no GPU visible (nvidia-smi -L lists none)"; exit 2; }
[ -x "$bin" ] || { echo "gpu_check: $bin is not built (cmake --build $build)"; exit 2; }
for _ in $(seq 200); do cat "$src"/tests/fixtures/text/*.txt; done > "$work/corpus.txt"
tiny=(train --data "$src/tests/fixtures/text" --model tiny --batch 8 --seq 64 --microbatches 4 --device cuda --db '')

# 1. The GPU tests, whole (each test under ctest's cap of 200 s).
gpu_tests() {
  if (cd "$build" && timeout 240 ctest -L gpu --timeout 200 --output-on-failure > "$work/ctest.txt" 2>&1); then
    row "ctest -L gpu" "pass"
  else
    row "ctest -L gpu" "FAIL (see below)"
    tail -20 "$work/ctest.txt"
  fi
}

# 2. One decoder layer of 125m (bf16 GEMMs, flash attention), and the device's GEMM and memory rates.
layer() {
  if timeout 60 "$build/tests/gpu/bench_cuda" > "$work/bench_cuda.txt" 2>&1; then
    row "one 125m layer fwd+bwd (B 4, T 1024)" "$(sed -n 's/.*forward + backward: *\([0-9.]*\) ms *\([0-9.]*\) TFLOP.*/\1 ms, \2 TFLOP\/s/p' "$work/bench_cuda.txt")"
    row "bf16 GEMM 4096x3072x768" "$(sed -n 's/.*bf16 -> fp32: *[0-9.]* ms *\([0-9.]*\) TFLOP.*/\1 TFLOP\/s/p' "$work/bench_cuda.txt")"
    row "device memory, 1 GiB copy (read + write)" "$(sed -n 's/.*device copy[^:]*: *[0-9.]* ms *\([0-9.]*\) GB.*/\1 GB\/s/p' "$work/bench_cuda.txt")"
    row "attention fwd+bwd, fp32 CUDA cores" "$(sed -n 's/.*attention fwd+bwd fp32[^:]*: *\([0-9.]*\) ms *\([0-9.]*\) TFLOP.*/\1 ms, \2 TFLOP\/s/p' "$work/bench_cuda.txt")"
    row "attention fwd+bwd, bf16 tensor cores" "$(sed -n 's/.*attention fwd+bwd bf16[^:]*: *\([0-9.]*\) ms *\([0-9.]*\) TFLOP.*/\1 ms, \2 TFLOP\/s/p' "$work/bench_cuda.txt")"
  else
    row "one 125m layer fwd+bwd" "FAIL: $(tail -1 "$work/bench_cuda.txt")"
  fi
}

# 3. MFU of 125m at seq 1024 (medians of pptrain's own "done:" line; model FLOPs: 6 per
# parameter and token, and the attention's).
mfu_run() {   # mfu_run OUT args...: trains with args; OUT gets its output; prints "tok/s GFLOP/s"
  local out=$1
  shift
  timeout 120 "$@" --data "$work/corpus.txt" --batching pack --model 125m --seq 1024 --batch 32 --steps 20 \
    --warmup 5 --lr 3e-4 --device cuda --db '' --tokenizer "$src/tests/fixtures/tokenizers/llama2/tokenizer.json" \
    > "$out" 2>&1 && sed -n 's/.*median \([0-9.]*\) tok\/s, \([0-9.]*\) GFLOP\/s.*/\1 \2/p' "$out"
}
mfu_words() {   # "TOK GFLOP" -> "N tok/s, X TFLOP/s, MFU Y%"
  awk -v peak="$peak_tflops" '{ printf "%.0f tok/s, %.1f TFLOP/s, MFU %.1f%%", $1, $2 / 1e3, 100 * $2 / 1e3 / peak }'
}
mfu() {   # mfu WHAT args...: a row with tokens/s, TFLOP/s and MFU
  local what=$1 got
  shift
  if got=$(mfu_run "$work/mfu.txt" "$@") && [ -n "$got" ]; then
    row "$what" "$(mfu_words <<< "$got")"
  else
    row "$what" "FAIL: $(tail -1 "$work/mfu.txt")"
  fi
  cp "$work/mfu.txt" "$work/mfu-${what//[^A-Za-z0-9]/_}.txt"
}
# With GPU_CHECK_BASE=PPTRAIN (the parent commit's build, say), the 1-stage row again for this
# build and that one, alternating over 3 rounds on this machine in this lease, so a change's
# speed is measured against its parent where clocks and machine are the same; the medians.
mfu_against_base() {
  local what=$1 i this=() base=() got
  for i in 1 2 3; do
    got=$(mfu_run "$work/ab-base-$i.txt" "$GPU_CHECK_BASE" train --stages 1 --microbatches 2) || got=""
    [ -n "$got" ] && base+=("$got")
    got=$(mfu_run "$work/ab-this-$i.txt" "$bin" train --stages 1 --microbatches 2) || got=""
    [ -n "$got" ] && this+=("$got")
  done
  if [ ${#this[@]} -eq 3 ] && [ ${#base[@]} -eq 3 ]; then
    local t b
    t=$(printf '%s\n' "${this[@]}" | sort -n | sed -n 2p)
    b=$(printf '%s\n' "${base[@]}" | sort -n | sed -n 2p)
    row "$what" "this $(mfu_words <<< "$t" | cut -d, -f1,3), base $(mfu_words <<< "$b" | cut -d, -f1,3):$(
      awk -v t="${t%% *}" -v b="${b%% *}" 'BEGIN { printf " %+.1f%%", 100 * (t / b - 1) }')"
  else
    local why="$((3 - ${#this[@]})) of this build's runs and $((3 - ${#base[@]})) of the base's stopped"
    row "$what" "FAIL: $why (logs: ab-*.txt)"
  fi
}

# 4. compute-sanitizer on 2 stages as threads on GPU 0 (events between their streams). racecheck
# takes 1 step (on an H200 it took 56 s for a first step, 33 s a second), the others 3. A tool
# stopped at its cap reports the steps it finished and whether it saw any hazard.
sanitizer() {   # sanitizer TOOL STEPS
  local tool=$1 steps=$2 code done_steps
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$bin" "${tiny[@]}" --steps "$steps" --warmup 1 \
    --stages 2 > "$work/$tool.txt" 2>&1
  code=$?
  done_steps=$(grep -c '^step ' "$work/$tool.txt")
  if [ $code -eq 0 ]; then
    row "compute-sanitizer --tool $tool" "clean ($done_steps steps)"
  elif [ $code -eq 124 ] && ! grep -q -E '^========= (Error|ERROR|Program hit|Race|Invalid|Uninitialized|Barrier)' \
    "$work/$tool.txt"; then
    row "compute-sanitizer --tool $tool" "nothing reported in $done_steps steps, stopped at the 150 s cap"
  else
    row "compute-sanitizer --tool $tool" "FAIL: $(grep -m1 -E '^========= (Error|ERROR|Program hit|Race|Invalid|Uninitialized|Barrier)' \
      "$work/$tool.txt" || tail -1 "$work/$tool.txt")"
  fi
}

# 5. Where a 125m step's GPU time goes: each kernel of one training step (one microbatch of 16
# sequences, the MFU rows' microbatch) timed by Nsight Compute, summed by kernel name
# (bench/ncu_kernel_table.awk). Caches and clocks are left as the run has them, so the times are
# those of the kernels in their place; ncu runs them one at a time, so no two overlap.
kernels() {
  local why="" f
  rm -f "$work/ncu.csv" "$work/kernels.txt"
  if timeout 180 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    --print-kernel-base function --log-file "$work/ncu.csv" "$bin" train --data "$work/corpus.txt" --batching pack \
    --model 125m --seq 1024 --batch 16 --microbatches 1 --steps 1 --lr 3e-4 --device cuda --db '' \
    --tokenizer "$src/tests/fixtures/tokenizers/llama2/tokenizer.json" > "$work/ncu_run.txt" 2>&1 &&
    awk -f "$src/bench/ncu_kernel_table.awk" "$work/ncu.csv" > "$work/kernels.txt"; then
    row "kernels of one 125m step (ncu, B 16 x 1024)" "$(awk -v summary=1 -f "$src/bench/ncu_kernel_table.awk" "$work/ncu.csv")"
  else
    # awk's one line, else ncu's last words (its log file), else the run's
    for f in "$work/kernels.txt" "$work/ncu.csv" "$work/ncu_run.txt"; do
      [ -s "$f" ] && { why=$(tail -1 "$f"); break; }
    done
    row "kernels of one 125m step (ncu, B 16 x 1024)" "FAIL: ${why:-ncu printed nothing} (logs: GPU_CHECK_LOGS)"
    rm -f "$work/kernels.txt"
  fi
}

# 6. bf16 against fp32: 200 steps of the small preset, same seed and data.
curve() {   # curve NAME PRECISION: losses by step in NAME.losses
  timeout 90 "$bin" train --data "$work/corpus.txt" --batching pack --model small --seq 256 --batch 16 --microbatches 2 \
    --steps 200 --warmup 20 --lr 1e-3 --device cuda --precision "$2" --db "$work/$1.db" > "$work/$1.txt" 2>&1 &&
    sqlite3 "$work/$1.db" "SELECT step, loss FROM steps ORDER BY step" > "$work/$1.losses"
}
curves() {
  if curve fp32 fp32 && curve bf16 bf16; then
    row "bf16 vs fp32, small, 200 steps" "$(paste -d'|' "$work/fp32.losses" "$work/bf16.losses" | awk -F'|' '
      { d = $4 - $2; if (d < 0) d = -d; r = d / $2; if (r > m) { m = r; at = $1 } ; last = r }
      END { printf "largest rel gap %.2e (step %d), last %.2e", m, at, last }')"
  else
    row "bf16 vs fp32, small, 200 steps" "FAIL: a run stopped"
  fi
}

# Most telling first: is it right, how fast is it, is anything racing, where does the time go.
part "ctest -L gpu" 240 gpu_tests
part "one 125m layer fwd+bwd" 60 layer
part "MFU 125m, 1 stage, M=2" 120 mfu "MFU 125m, 1 stage, M=2" "$bin" train --stages 1 --microbatches 2
part "MFU 125m, 4 stages on 1 GPU, 1f1b, M=16" 120 \
  mfu "MFU 125m, 4 stages on 1 GPU, 1f1b, M=16" "$bin" train --stages 4 --schedule 1f1b --microbatches 16
if [ -n "${GPU_CHECK_BASE:-}" ]; then
  part "MFU 125m, 1 stage, M=2, against the base" 300 mfu_against_base "MFU 1 stage, medians of 3, against the base"
fi
if [ "$gpus" -ge 2 ]; then
  part "MFU 125m, 2 GPUs over nccl, 1f1b, M=8" 120 mfu "MFU 125m, 2 GPUs over nccl, 1f1b, M=8" \
    mpirun --allow-run-as-root -np 2 "$bin" train --stages 2 --schedule 1f1b --microbatches 8 --transport nccl
else
  row "MFU 125m, 2 GPUs over nccl" "skipped: one GPU"
fi
part "compute-sanitizer --tool racecheck" 150 sanitizer racecheck 1
if command -v ncu > /dev/null; then
  part "kernels of one 125m step (ncu, B 16 x 1024)" 180 kernels
else
  row "kernels of one 125m step" "skipped: no ncu (Nsight Compute) on the PATH"
fi
for tool in memcheck synccheck initcheck; do part "compute-sanitizer --tool $tool" 150 sanitizer $tool 3; done
part "bf16 vs fp32, small, 200 steps" 180 curves

echo "pptrain gpu_check, $(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $gpus"
cat "$table"
if [ -s "$work/kernels.txt" ]; then
  echo
  echo "Where one 125m step's GPU time goes (ncu, one microbatch of 16 x 1024, kernels one at a time):"
  cat "$work/kernels.txt"
fi
