#!/usr/bin/env bash
# tests/gpu_emu/emu_parity.sh: the emulated GPU path against the CPU, quickly, where the GPU
# path's ordering matters: messages between stages. fp32, so a wrong byte cannot hide in bf16's
# tolerance (1e-4 of the CPU's losses, as cli_gpu.sh holds fp32). The GPU path sums in another
# order than the CPU where it fuses (the classifier's weight gradient chunk by chunk, one GEMM
# for q|k|v and one for gate|up): 2.5e-9 of the CPU's losses over 10 tiny steps, not bitwise;
# the mistakes tried by hand (the classifier's short last chunk dropped: 6% off; dk and dv
# swapped in the packing; the 3-way q|k|v batch cut to 2) each fail it:
#  - 4 stages on 4 emulated GPUs (threads, local transport, device mailboxes), 1f1b;
#  - 2 processes over the nccl transport (mpirun), 1f1b and zb-v, and 2 stages x 2 replicas
#    (the gradients' all-reduce on the device);
#  - a model without grouped queries (kv heads = heads) on 2 stages, where q, k and v take one
#    batched GEMM (engine/model/model_cuda.c), against the CPU on the same model.
# The normal pptrain_emu passes it at every PPTRAIN_EMU_SEED. A mutant build drops one required
# wait (kernels/cuda/cuda_check.h: REQUIRED_WAIT); with a third argument, `mutant`, the script
# passes only when the mutant is caught: the CPU reference ran, and at least one GPU check
# failed (wrong losses, a breach, a NaN stop or a hang).
# usage: emu_parity.sh PPTRAIN_EMU SOURCE_DIR [mutant]
source "$(dirname "$0")/../cli/lib_cli.sh" "$@"
mutant=${3:-}

data="$src/tests/fixtures/text"
base=(train --data "$data" --model tiny --steps 4 --batch 8 --seq 64 --microbatches 4 --lr 3e-3 --warmup 2)
losses() { sqlite3 "$1" "SELECT step, printf('%.17g', loss) FROM steps ORDER BY step" 2>/dev/null; }
# within A B TOL: the same steps, and |b - a| <= TOL * |a| at each (A the reference).
within() {
  [ -s "$1" ] && [ "$(wc -l < "$1")" -eq "$(wc -l < "$2")" ] &&
    paste -d'|' "$1" "$2" | awk -F'|' -v tol="$3" '
      { d = $4 - $2; if (d < 0) d = -d; a = $2 < 0 ? -$2 : $2
        if ($1 != $3 || d > tol * a) { printf "  step %s: %s vs %s\n", $1, $2, $4; bad = 1 } }
      END { exit bad }'
}
run() {   # run NAME args...: a run recorded in NAME.db (a hang counts as a failure)
  local name=$1
  shift
  timeout 120 "$bin" "${base[@]}" --db "$name.db" "$@" > "$name.txt" 2>&1
  local code=$?
  losses "$name.db" > "$name.losses"
  [ $code -eq 0 ] || { echo "  $name exited $code:"; tail -3 "$name.txt"; }
  return $code
}
nccl_run() {   # nccl_run NAME NP args...: NP processes over nccl
  local name=$1 np=$2
  shift 2
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" OMP_NUM_THREADS=1 timeout 120 \
    mpirun --allow-run-as-root --oversubscribe -np "$np" "$bin" "${base[@]}" --transport nccl --device cuda \
    --precision fp32 --db "$name.db" "$@" > "$name.txt" 2>&1
  local code=$?
  losses "$name.db" > "$name.losses"
  [ $code -eq 0 ] || { echo "  $name exited $code:"; tail -3 "$name.txt"; }
  return $code
}

run cpu || { echo "FAIL: the CPU reference run"; exit 1; }
check "GPU fp32, 4 stages on 4 GPUs (local), runs" run local --device cuda --precision fp32 --stages 4 --schedule 1f1b
check "GPU fp32, 4 stages (local): within 1e-4 of the CPU's" within cpu.losses local.losses 1e-4
# Validation runs on forward-only slots (an evaluation's schedule has no backward): there the
# last stage computes the loss alone, no head gradient (engine/model/model_cuda.c). Validating
# every 2 steps leaves the training losses bitwise as they were, and the validation losses are
# within 1e-4 of the CPU's.
vals() { sqlite3 "$1" "SELECT step, printf('%.17g', val_loss) FROM evals ORDER BY step" 2>/dev/null; }
val=(--val-data "$data" --val-every 2 --val-batches 2)
check "CPU validating every 2 steps, runs" run cpu_val "${val[@]}"
check "GPU fp32 validating every 2 steps (4 stages, local), runs" run local_val --device cuda --precision fp32 \
  --stages 4 --schedule 1f1b "${val[@]}"
check "GPU validating: the training losses bitwise those without" cmp -s local.losses local_val.losses
vals cpu_val.db > cpu_val.vals
vals local_val.db > local_val.vals
two_rounds_within() { [ "$(wc -l < "$1")" -eq 2 ] && within "$1" "$2" 1e-4; }
check "GPU validation: 2 rounds, within 1e-4 of the CPU's" two_rounds_within cpu_val.vals local_val.vals
printf '{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
 "num_key_value_heads": 4, "vocab_size": 259, "max_position_embeddings": 256}' > mha.json
mha=(--model mha.json)
check "CPU, no grouped queries, runs" run cpu_mha "${mha[@]}"
check "GPU fp32, no grouped queries, 2 stages, runs" run mha "${mha[@]}" --device cuda --precision fp32 --stages 2
check "GPU fp32, no grouped queries: within 1e-4 of the CPU's" within cpu_mha.losses mha.losses 1e-4
if "$bin" "${base[@]}" --transport nccl --device cuda --db '' 2>&1 | grep -q "built without NCCL"; then
  echo "  (this pptrain has no NCCL: the nccl checks are skipped)"
else
  check "nccl fp32, 2 processes, 1f1b, runs" nccl_run nccl 2 --stages 2
  check "nccl fp32 1f1b: within 1e-4 of the CPU's" within cpu.losses nccl.losses 1e-4
  check "nccl fp32, 2 processes, zb-v, runs" nccl_run ncclv 2 --stages 2 --schedule zb-v
  check "nccl fp32 zb-v: within 1e-4 of the CPU's" within cpu.losses ncclv.losses 1e-4
  check "nccl fp32, 2 stages x 2 replicas, runs" nccl_run nccldp 4 --stages 2 --dp 2
  check "nccl fp32 data parallel: within 1e-4 of the CPU's" within cpu.losses nccldp.losses 1e-4
fi
if [ "$mutant" = mutant ]; then
  echo "$passed passed, $failed failed"
  [ "$failed" -gt 0 ] && { echo "the mutant is caught"; exit 0; }
  echo "FAIL: the mutant passed every check: the emulator did not see the missing wait"
  exit 1
fi
cli_finish
