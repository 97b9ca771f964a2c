#!/usr/bin/env bash
# tests/gpu_emu/emu_syncs.sh: a GPU step makes the host wait for the device once per stage, where
# it reads the gradient norm, which on the last stage's rank brings the step's loss with it
# (engine/model/model_cuda.c). Everything else (messages, copies, the transports' handovers, the
# tokens through pinned memory) is ordered by events. The emulator counts the waits
# (PPTRAIN_EMU_COUNT_SYNCS=1, tests/gpu_emu/cuda_emu.c); a step's share is the difference between
# a 4-step and a 2-step run, so set-up does not count:
#  - 1 stage: 1 a step;
#  - 2 stages as threads of one process (local transport): 2 a step, one each;
#  - 2 processes over nccl: 1 a step on each rank;
# and, over nccl, that a rank has one receive posted at a time (the emulated NCCL counts them).
# usage: emu_syncs.sh PPTRAIN_EMU SOURCE_DIR
source "$(dirname "$0")/../cli/lib_cli.sh" "$@"

data="$src/tests/fixtures/text"
base=(train --data "$data" --model tiny --batch 8 --seq 64 --microbatches 4 --lr 3e-3 --warmup 1 --device cuda --db '')
# syncs STEPS NP RANK args...: the host syncs of a run of STEPS steps; NP 0: one process, else
# NP processes under mpirun, and only rank RANK's
syncs() {
  local steps=$1 np=$2 rank=$3
  shift 3
  local run=("$bin")
  [ "$np" -eq 0 ] || run=(env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" OMP_NUM_THREADS=1
                          mpirun --allow-run-as-root --oversubscribe -np "$np" "$bin")
  PPTRAIN_EMU_COUNT_SYNCS=1 timeout 120 "${run[@]}" "${base[@]}" --steps "$steps" "$@" 2>&1 >/dev/null |
    awk -v np="$np" -v r="$rank" '/host syncs/ { if (np == 0 || $0 ~ "[(]rank " r "[)]") { s += $4; n++ } }
                                  END { if (n) print s }'
}
# per_step WANT NP RANK args...: a step's syncs (4 steps' minus 2 steps', halved) are WANT
per_step() {
  local want=$1 np=$2 rank=$3
  shift 3
  local two four
  two=$(syncs 2 "$np" "$rank" "$@")
  four=$(syncs 4 "$np" "$rank" "$@")
  if [ -z "$two" ] || [ -z "$four" ] || [ $(((four - two) / 2)) -ne "$want" ]; then
    echo "  $* (rank $rank of $np): ${two:-?} host syncs in 2 steps, ${four:-?} in 4: not $want a step"
    return 1
  fi
}

check "1 stage: 1 host sync a step (loss and norm)" per_step 1 0 0
check "1 stage fp32: 1 host sync a step" per_step 1 0 0 --precision fp32
check "2 stages, one process: 2 host syncs a step (one a stage)" per_step 2 0 0 --stages 2
if "$bin" "${base[@]}" --steps 2 --transport nccl 2>&1 | grep -q "built without NCCL"; then
  echo "  (this pptrain has no NCCL: the nccl checks are skipped)"
else
  check "nccl, rank 0 (stage 0): 1 host sync a step (norm)" per_step 1 2 0 --transport nccl --stages 2
  check "nccl, rank 1 (last stage): 1 host sync a step (loss and norm)" per_step 1 2 1 --transport nccl --stages 2
  # the runtime posts one receive at a time (engine/runtime.c post_next), not a step's at its start
  one_pending() {
    local most
    most=$(PPTRAIN_EMU_COUNT_SYNCS=1 OMP_NUM_THREADS=1 \
           ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 120 \
           mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" "${base[@]}" --steps 2 --transport nccl --stages 2 \
             --schedule "$1" 2>&1 >/dev/null | awk '/receives pending/ { if ($6 > m) m = $6 } END { print m + 0 }')
    [ "$most" -eq 1 ] || { echo "  nccl $1: at most $most receives pending at once on a rank, not 1"; return 1; }
  }
  check "nccl 1f1b: one receive posted at a time" one_pending 1f1b
  check "nccl zb-v: one receive posted at a time" one_pending zb-v
fi
cli_finish
