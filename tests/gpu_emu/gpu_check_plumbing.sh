#!/usr/bin/env bash
# tests/gpu_emu/gpu_check_plumbing.sh: bench/gpu_check.sh run whole on the emulator, so that the
# day a GPU is lent does not find a flag it passes refused, a line it reads reworded, or its
# time budget miscounted. GPU_CHECK's tools are stood in for on the PATH: nvidia-smi lists one
# GPU; compute-sanitizer and ncu run the program they are given (ncu's CSV is the hand-made one
# of tests/gpu_emu/ncu_kernel_table.sh). The build it is given holds pptrain_emu behind a
# wrapper that keeps every flag gpu_check passes and shrinks only the sizes (the model to a
# 4-layer config.json, seq 64, 3 steps at most, 1 of warmup), a bench_cuda
# that prints bench_cuda.c's lines, and one ctest test labelled gpu.
# usage: gpu_check_plumbing.sh PPTRAIN_EMU SOURCE_DIR
source "$(dirname "$0")/../cli/lib_cli.sh" "$@"
emu=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

mkdir -p tools build/tests/gpu
cat > tools/nvidia-smi << 'EOF'
#!/bin/sh
case "$*" in -L) echo "GPU 0: Emulated GPU (UUID: GPU-0)" ;; *) echo "Emulated GPU" ;; esac
EOF
cat > tools/compute-sanitizer << 'EOF'
#!/bin/sh
# compute-sanitizer --tool TOOL --error-exitcode N PROGRAM ARGS...
shift 4
"$@"
EOF
cat > tools/ncu << EOF
#!/bin/sh
# ncu OPTIONS... --log-file FILE PROGRAM ARGS...: the program runs; FILE gets the fixture's CSV
while [ "\$1" != "--log-file" ]; do shift; done
cp "$src/tests/fixtures/ncu/step.csv" "\$2"
shift 2
"\$@"
EOF
# 125m's stand-in takes the llama2 tokenizer's ids, tiny's and small's the bytes of the text.
plain=$src/tests/fixtures/hf_variants/plain/config.json
sed -e 's/"num_hidden_layers": *[0-9]*/"num_hidden_layers": 4/' "$plain" > bytes.json
sed -e 's/"vocab_size": *[0-9]*/"vocab_size": 32000/' bytes.json > llama2.json
cat > build/pptrain << EOF
#!/usr/bin/env bash
# pptrain_emu with gpu_check's flags, its sizes shrunk
args=()
while [ \$# -gt 0 ]; do
  case \$1 in
    --model) args+=(--model "$work/\$([ "\$2" = 125m ] && echo llama2 || echo bytes).json"); shift ;;
    --seq) args+=(--seq 64); shift ;;
    --steps) args+=(--steps \$((\$2 < 3 ? \$2 : 3))); shift ;;
    --warmup) args+=(--warmup 1); shift ;;
    *) args+=("\$1") ;;
  esac
  shift
done
exec "$emu" "\${args[@]}"
EOF
cat > build/tests/gpu/bench_cuda << 'EOF'
#!/bin/sh
# tests/gpu/bench_cuda.c's lines, as its printf formats make them
printf 'device copy %d MiB:        %8.3f ms  %7.1f GB/s (read + write)\n' 1024 0.597 3597.3
printf 'GEMM %dx%dx%d bf16 -> fp32:  %8.3f ms  %7.1f TFLOP/s\n' 4096 3072 768 0.037 517.2
printf '  forward + backward: %8.3f ms  %7.1f TFLOP/s  (%.0f tokens/s per layer)\n' 0.812 240.6 5044335
printf '  attention fwd+bwd fp32 (CUDA cores):   %8.3f ms  %7.1f TFLOP/s\n' 2.640 11.2
printf '  attention fwd+bwd bf16 (tensor cores): %8.3f ms  %7.1f TFLOP/s\n' 0.150 197.0
EOF
printf 'add_test(fake_gpu_test "true")\nset_tests_properties(fake_gpu_test PROPERTIES LABELS "gpu")\n' \
  > build/CTestTestfile.cmake
chmod +x tools/* build/pptrain build/tests/gpu/bench_cuda

gpu_check() { (cd "$src" && PATH="$work/tools:$PATH" GPU_CHECK_LOGS="$work/logs-$1" GPU_CHECK_BUDGET=$1 \
  bash bench/gpu_check.sh "$work/build") > "out-$1.txt" 2>&1; }
# A base build for the A/B row: the same wrapper, its median read from a copy's own "done:" line.
cp build/pptrain base-pptrain
row_of() {   # row_of BUDGET WHAT: that row's result, from the table at the end
  sed -n '/^pptrain gpu_check/,$p' "out-$1.txt" | grep -F "$2" | cut -c46-
}
has() { grep -q -E "$2" <<< "$1" || { echo "  got: '$1'"; false; }; }

# The whole check, in a budget every part fits, with a base build to measure against.
GPU_CHECK_BASE=$work/base-pptrain gpu_check 2000
check "it exits 0" [ $? -eq 0 ]
check "the table's heading names the GPU" grep -q -E '^pptrain gpu_check, [0-9-]+, Emulated GPU x 1$' out-2000.txt
check "ctest -L gpu: pass" has "$(row_of 2000 'ctest -L gpu')" '^pass$'
check "the layer's time and rate" has "$(row_of 2000 'one 125m layer')" '^0\.812 ms, 240\.6 TFLOP/s$'
check "the GEMM rate" has "$(row_of 2000 'bf16 GEMM')" '^517\.2 TFLOP/s$'
check "the memory's rate" has "$(row_of 2000 'device memory')" '^3597\.3 GB/s$'
check "attention in bf16" has "$(row_of 2000 'bf16 tensor cores')" '^0\.150 ms, 197\.0 TFLOP/s$'
mfu='^[0-9]+ tok/s, [0-9.]+ TFLOP/s, MFU [0-9.]+%$'
check "MFU, 1 stage: pptrain ran and its median was read" has "$(row_of 2000 'MFU 125m, 1 stage')" "$mfu"
check "MFU, 4 stages: pptrain ran and its median was read" has "$(row_of 2000 'MFU 125m, 4 stages')" "$mfu"
check "MFU against the base: both builds' medians of 3 and their difference" has "$(row_of 2000 'against the base')" \
  '^this [0-9]+ tok/s, MFU [0-9.]+%, base [0-9]+ tok/s, MFU [0-9.]+%: [+-][0-9.]+%$'
check "MFU against the base: 3 runs of each" [ "$(ls logs-2000/ab-this-*.txt logs-2000/ab-base-*.txt | wc -l)" -eq 6 ]
check "MFU over nccl: skipped with one GPU" has "$(row_of 2000 'over nccl')" '^skipped: one GPU$'
check "racecheck ran 1 step" has "$(row_of 2000 'tool racecheck')" '^clean \(1 steps\)$'
for tool in memcheck synccheck initcheck; do
  check "$tool ran 3 steps" has "$(row_of 2000 "tool $tool")" '^clean \(3 steps\)$'
done
check "ncu: the step's kernels summed" has "$(row_of 2000 'kernels of one')" '^7 launches, 3\.54 ms; flash_mma_forward'
check "ncu: the top kernels after the table" grep -q -E '^ +84\.7% +3\.000 +2 +1500\.0 +flash_mma_forward_kernel$' out-2000.txt
check "bf16 vs fp32: both curves read from their stores" \
  has "$(row_of 2000 'bf16 vs fp32')" '^largest rel gap [0-9.]+e[-+][0-9]+ \(step [1-3]\), last [0-9.]+e[-+][0-9]+$'
check "every part has its row" [ "$(sed -n '/^pptrain gpu_check/,/^$/p' out-2000.txt | grep -c .)" -eq 17 ]

# A budget of 100 s: parts whose cap would pass it are skipped, each with a row, and the rest
# still run; the most telling part that fits (the layer) comes first.
gpu_check 100
check "a tight budget still exits 0" [ $? -eq 0 ]
check "ctest (cap 240 s) skipped, saying why" has "$(row_of 100 'ctest -L gpu')" '^skipped: (99|100) s of the 100 s budget left, it may take 240 s$'
check "the layer (cap 60 s) still ran" has "$(row_of 100 'one 125m layer')" '^0\.812 ms'
check "the MFU rows (cap 120 s) skipped" [ "$(sed -n '/^pptrain gpu_check/,$p' out-100.txt | grep -c '^MFU.*skipped: [0-9]* s of the 100 s budget')" -eq 2 ]
check "the sanitizers skipped" [ "$(grep -c '^compute-sanitizer.*skipped:.*it may take 150 s$' out-100.txt)" -eq 8 ]
check "no A/B row without a base" [ -z "$(row_of 100 'against the base')" ]
check "no pptrain ran under a tight budget" [ ! -e logs-100/mfu.txt -a ! -e logs-100/memcheck.txt ]
cli_finish
