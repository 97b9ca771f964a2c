#!/usr/bin/env bash
# tests/gpu_emu/emu_cuda_failure.sh: a CUDA call that fails on one rank of an nccl run stops
# the others at once, naming that rank, instead of leaving them to wait out --timeout. The
# emulator makes rank 1's 60th copy or event record fail (PPTRAIN_EMU_FAIL_CALL,
# tests/gpu_emu/cuda_emu.c) during the second step; the CUDA check's last words send the
# nccl transport's abort notice (engine/transport/transport_nccl.c nccl_last_words).
# Checks, with --timeout 60:
#  - rank 1 prints the failed call's one line, starting with its rank;
#  - rank 0 stops naming rank 1: "aborted (rank 1 failed)";
#  - the job ends within 20 s (before this, rank 0 sat out the whole --timeout).
# usage: emu_cuda_failure.sh PPTRAIN_EMU SOURCE_DIR
source "$(dirname "$0")/../cli/lib_cli.sh" "$@"

data="$src/tests/fixtures/text"
base=(train --data "$data" --model tiny --batch 4 --seq 64 --microbatches 2 --lr 3e-3 --warmup 1 --device cuda
      --db '' --steps 5 --stages 2 --transport nccl --timeout 60)
if "$bin" "${base[@]}" 2>&1 | grep -q "built without NCCL"; then
  echo "  (this pptrain has no NCCL: skipped)"
  cli_finish
  exit
fi
start=$(date +%s)
PPTRAIN_EMU_FAIL_RANK=1 PPTRAIN_EMU_FAIL_CALL=60 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  OMP_NUM_THREADS=1 timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" "${base[@]}" >run.out 2>&1
rc=$?
took=$(($(date +%s) - start))
check "the run fails" test "$rc" -ne 0
check "rank 1 names itself and its failed CUDA call" grep -q "pptrain: rank 1: CUDA error: unspecified launch failure" run.out
check "rank 0 stops naming rank 1" grep -q "rank 0 (stage 0): aborted (rank 1 failed)" run.out
within() { [ "$took" -le 20 ] || { echo "  the job took $took s: rank 0 waited for its --timeout"; return 1; }; }
check "the job ends within 20 s, not at --timeout 60" within
[ "$failed" -eq 0 ] || cat run.out
cli_finish
