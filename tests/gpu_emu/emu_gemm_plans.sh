#!/usr/bin/env bash
# tests/gpu_emu/emu_gemm_plans.sh: each distinct GEMM of a GPU stage is planned once (its cuBLASLt
# descriptors and heuristic query: kernels/cuda/gemm_plans.h), in the first step; later steps
# only look their plans up. The emulator keeps the same per-context cache over the same keys and
# counts its misses (PPTRAIN_EMU_COUNT_SYNCS=1: "N GEMM plans built", tests/gpu_emu/cuda_emu.c):
# a 5-step run builds exactly as many as a 1-step run, and some (the count is not vacuous), in
# bf16 and fp32, on 1 stage and on 2 stages of one process (two contexts).
# usage: emu_gemm_plans.sh PPTRAIN_EMU SOURCE_DIR
source "$(dirname "$0")/../cli/lib_cli.sh" "$@"

data="$src/tests/fixtures/text"
base=(train --data "$data" --model tiny --batch 8 --seq 64 --microbatches 4 --lr 3e-3 --warmup 1 --device cuda --db '')
plans() {   # plans STEPS args...: the GEMM plans a run of STEPS steps built
  PPTRAIN_EMU_COUNT_SYNCS=1 timeout 120 "$bin" "${base[@]}" --steps "$@" 2>&1 >/dev/null |
    awk '/GEMM plans built/ { s += $4; n++ } END { if (n) print s }'
}
# same_after_first STEPS args...: a STEPS-step run builds as many plans as a 1-step run, and > 0
same_after_first() {
  local one many what=${*:2}
  what=${what:-(bf16, 1 stage)}
  one=$(plans 1 "${@:2}")
  many=$(plans "$1" "${@:2}")
  if [ -z "$one" ] || [ -z "$many" ] || [ "$one" -eq 0 ] || [ "$one" -ne "$many" ]; then
    echo "  $what: ${one:-?} GEMM plans built in 1 step, ${many:-?} in $1: not the same, or none"
    return 1
  fi
  echo "  $what: $one GEMM plans built in 1 step and in $1"
}

check "1 stage bf16: no GEMM planned after step 1" same_after_first 5
check "1 stage fp32: no GEMM planned after step 1" same_after_first 5 --precision fp32
check "2 stages bf16: no GEMM planned after step 1" same_after_first 5 --stages 2
cli_finish
