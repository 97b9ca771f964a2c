#!/usr/bin/env bash
# The GPU benchmark of docs/gpu.md ("Benchmark"): the 125m preset at sequence length 1024,
# bf16, on one GPU,
#   1 stage                                   -> tokens/s, TFLOP/s, MFU against 989 TFLOP/s
#   4 stages as threads on the same GPU, 1f1b, M = 16 -> tokens/s, and its share of the 1-stage's
# Both runs train the same global batch (B sequences of 1024 tokens), so their tokens/s
# compare. Medians over the run's steps (pptrain's own "done:" line). Not run by ctest.
# usage: tests/gpu/bench_mfu.sh [PPTRAIN] [STEPS] [BATCH]      (defaults: build/pptrain 30 32)
set -u
bin=${1:-build/pptrain}
steps=${2:-30}
batch=${3:-32}
src=$(cd "$(dirname "$0")/../.." && pwd)
peak_tflops=989   # H100 SXM dense bf16 (the issue's MFU denominator)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A few MB of text, packed: every position is a real target. 125m has Llama 2's 32000-word
# vocabulary, so the text goes through the llama2 tokenizer of the fixtures (the byte
# tokenizer's 259 ids would be refused: the run's first try on an H200 was).
for _ in $(seq 200); do cat "$src"/tests/fixtures/text/*.txt; done > "$work/corpus.txt"

common=(train --data "$work/corpus.txt" --batching pack --model 125m --seq 1024 --batch "$batch" --steps "$steps"
        --device cuda --db '' --lr 3e-4 --warmup 5 --tokenizer "$src/tests/fixtures/tokenizers/llama2/tokenizer.json")
median_of() {   # the "done:" line's median tok/s and GFLOP/s
  sed -n 's/.*median \([0-9.]*\) tok\/s, \([0-9.]*\) GFLOP\/s.*/\1 \2/p' "$1"
}

echo "pptrain GPU benchmark, $(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
echo "125m preset (127.0 M parameters), seq 1024, batch $batch, $steps steps, bf16"

"$bin" "${common[@]}" --stages 1 --microbatches 2 > "$work/one.txt" 2>&1 || { tail -5 "$work/one.txt"; exit 1; }
read -r tok1 gf1 < <(median_of "$work/one.txt")
"$bin" "${common[@]}" --stages 4 --schedule 1f1b --microbatches 16 > "$work/four.txt" 2>&1 || {
  tail -5 "$work/four.txt"; exit 1; }
read -r tok4 gf4 < <(median_of "$work/four.txt")

awk -v t1="$tok1" -v g1="$gf1" -v t4="$tok4" -v g4="$gf4" -v peak="$peak_tflops" 'BEGIN {
  printf "%-34s %12s %10s %8s\n", "layout", "tokens/s", "TFLOP/s", "MFU"
  printf "%-34s %12.0f %10.1f %7.1f%%\n", "1 stage, M=2", t1, g1 / 1e3, 100 * g1 / 1e3 / peak
  printf "%-34s %12.0f %10.1f %7.1f%%\n", "4 stages on 1 GPU, 1f1b, M=16", t4, g4 / 1e3, 100 * g4 / 1e3 / peak
  printf "4-stage / 1-stage tokens/s: %.1f%%\n", 100 * t4 / t1 }'
