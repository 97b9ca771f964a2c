#!/usr/bin/env bash
# tests/gpu_emu/emu_timing.sh: a GPU stage's actions return once queued, so their telemetry
# (busy time, bubble, trace) is device time from timing events (engine/runtime.c
# runtime_device_times, cudaEventElapsedTime), not the time the host took to queue them.
# The emulator makes every kernel take PPTRAIN_EMU_KERNEL_US more (tests/gpu_emu/cuda_emu.c)
# and runs queued work only when something waits on it, so host time and device time part:
# `tiny`'s 8 layers on one stage queue about 110 kernels a forward and 155 a backward, on each
# of 2 stages about 55 and 78, in a few ms of host time (in bf16; 145 and 330 before the bf16
# operand activations took their conversion passes away, 212 a backward before the fused
# residual norms, RoPE's backward inside attention's and the like). (An action's device time can hold
# other streams' kernels too: the emulator runs its GPUs' streams one at a time, so on 2
# stages an F measures about 56 ms in some interleavings and 113 in others; the bounds below
# are about 3/4 of the kernels' own, which every interleaving exceeds, and far above the
# queueing time they tell apart.) Checks, at 1000 us a kernel:
#  - on 1 stage every F lasts at least 80 kernels (80 ms) and every B at least 115; on 2 stages
#    every F at least 40 and every B at least 58;
#  - each rank's busy time (console) holds those for its M microbatches;
#  - the step still has its one host sync per stage (tests/gpu_emu/emu_syncs.sh counts them).
# usage: emu_timing.sh PPTRAIN_EMU SOURCE_DIR
source "$(dirname "$0")/../cli/lib_cli.sh" "$@"

data="$src/tests/fixtures/text"
M=2
base=(train --data "$data" --model tiny --batch 4 --seq 64 --microbatches $M --lr 3e-3 --warmup 1 --device cuda
      --db '' --steps 1)
# run NAME args...: one step at 1000 us a kernel; console in NAME.out, trace in NAME.json
run() {
  local name=$1
  shift
  PPTRAIN_EMU_KERNEL_US=1000 timeout 120 "$bin" "${base[@]}" --trace "$name.json" "$@" >"$name.out" 2>&1 ||
    { cat "$name.out"; return 1; }
}
# shortest TYPE NAME: the shortest TYPE action (F, B) in NAME.json, in ms
shortest() {
  awk -v t="$2" -F'"dur":' '$0 ~ "\"cat\":\"" t "\"" { split($2, d, ","); if (min == "" || d[1] < min) min = d[1] }
                           END { printf "%d\n", min == "" ? -1 : min / 1000 }' "$1.json"
}
# at_least MS TYPE NAME: every TYPE action of NAME lasts MS ms or more
at_least() {
  local got
  got=$(shortest "$3" "$2")
  [ "$got" -ge "$1" ] || { echo "  $3: shortest $2 lasts $got ms, not $1 or more: queueing time, not device time"; return 1; }
}
# busy_at_least MS NAME: every rank's "mean busy ms per rank and step" is MS or more
busy_at_least() {
  local line
  line=$(grep "mean busy ms per rank" "$2.out")
  echo "$line" | awk -v want="$1" -F: '{ n = split($2, v, " "); for (i = 1; i <= n; i++) if (v[i] + 0 < want) bad = 1 }
                                       END { exit (n == 0 || bad) }' ||
    { echo "  $2: ${line:-no busy line}: not $1 ms or more on every rank"; return 1; }
}

check "1 stage runs" run one
check "1 stage: every F lasts 80 kernels or more" at_least 80 F one
check "1 stage: every B lasts 115 kernels or more" at_least 115 B one
check "1 stage: busy holds the F and B of every microbatch" busy_at_least $((M * (80 + 115))) one
check "2 stages run" run two --stages 2
check "2 stages: every F lasts 40 kernels or more" at_least 40 F two
check "2 stages: every B lasts 58 kernels or more" at_least 58 B two
check "2 stages: each rank's busy holds its F and B" busy_at_least $((M * (40 + 58))) two
cli_finish
