#!/usr/bin/env bash
# GPU stages end to end, against the CPU engine as the independent reference:
#  - 10 steps of the tiny preset on a GPU (bf16) within 2e-2 of the CPU's losses, on one
#    stage, on 4 stages of one GPU (threads, 1f1b), and with 2 data-parallel replicas;
#    in fp32 within 1e-4; the banner states each stage's scratch arena (worked out here) and
#    the end counts it in each stage's GPU memory;
#  - `pptrain check --device cuda` passes for every built-in schedule (fp32, the CPU's single
#    device as reference), and in bf16 with bf16 tolerances;
#  - a GPU run checkpointed at step 5 and resumed repeats the uninterrupted losses bitwise;
#  - under mpirun, --transport nccl matches the CPU's losses (two or more GPUs: 1f1b and
#    zb-v; four: with 2 replicas), or refuses a second rank on one GPU with one line;
#  - generation on GPU stages (fp32) gives the CPU stages' ids: greedy at P=1 and P=3, seeded
#    sampling; `sample` keeps a GPU run's device; train --sample-every runs on GPUs;
#  - GPU-only refusals are one line and exit 2.
# Exit 77 (ctest: skipped) when no GPU is usable. ctest also runs it on the CPU against
# pptrain_emu, the GPU emulated (tests/gpu_emu/cuda_emu.c, PPTRAIN_EMU_GPUS=2 devices).
# usage: cli_gpu.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/../cli/lib_cli.sh" "$@"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}protect_shadow_gap=0"   # CUDA under ASan needs the gap

if ! why=$("$bin" train --device cuda --help 2>&1 >/dev/null); then
  echo "skipped: $why"
  exit 77
fi
gpus=${PPTRAIN_EMU_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
[ "$gpus" -ge 1 ] || gpus=1   # no nvidia-smi: at least the one the probe found

data="$src/tests/fixtures/text"
base=(train --data "$data" --model tiny --steps 10 --batch 8 --seq 64 --microbatches 4 --lr 3e-3 --warmup 2)
losses() { sqlite3 "$1" "SELECT step, printf('%.17g', loss) FROM steps ORDER BY step"; }
# within A B TOL: the same steps, and |b - a| <= TOL * |a| at each (A the reference).
within() {
  [ -s "$1" ] && [ "$(wc -l < "$1")" -eq "$(wc -l < "$2")" ] &&
    paste -d'|' "$1" "$2" | awk -F'|' -v tol="$3" '
      { d = $4 - $2; if (d < 0) d = -d; a = $2 < 0 ? -$2 : $2
        if ($1 != $3 || d > tol * a) { printf "  step %s: %s vs %s\n", $1, $2, $4; bad = 1 } }
      END { exit bad }'
}
run() {   # run NAME args...: a run recorded in NAME.db, output in NAME.txt
  local name=$1
  shift
  "$bin" "${base[@]}" --db "$name.db" "$@" > "$name.txt" 2>&1
  local code=$?
  losses "$name.db" > "$name.losses"
  [ $code -eq 0 ] || { echo "  $name exited $code:"; tail -3 "$name.txt"; }
  return $code
}

check "CPU reference run" run cpu
check "CPU reference, 4 stages" run cpu4 --stages 4 --schedule 1f1b
check "GPU bf16, 1 stage, runs" run gpu --device cuda
check "GPU bf16, 1 stage: 10 losses within 2e-2 of the CPU's" within cpu.losses gpu.losses 2e-2
check "GPU fp32, 1 stage, runs" run gpu32 --device cuda --precision fp32
check "GPU fp32, 1 stage: within 1e-4 of the CPU's" within cpu.losses gpu32.losses 1e-4
check "GPU bf16, 4 stages on one GPU (1f1b), runs" run gpu4 --device cuda --stages 4 --schedule 1f1b
check "GPU 4 stages: within 2e-2 of the CPU's" within cpu4.losses gpu4.losses 2e-2
check "GPU 4 stages: the record says cuda" [ "$(sqlite3 gpu4.db 'SELECT device FROM runs')" = cuda ]
# Each GPU stage's scratch arena (engine/model/model_cuda_arena.c), worked out here from the uses
# docs/gpu.md lists, for tiny at 2 x 64 rows a microbatch in bf16: the largest of the embedding
# sort (stage 0), the fused classifier (stage 3: one chunk of all N rows at V = 259), the norm's
# partial sums (a 128-row chunk's C doubles), the gradient norm's (1024 doubles at most) and the
# grouped queries' dk/dv shares, each piece 256-byte rounded, + 4 KiB.
arenas=$(awk 'function r(x) { return int((x + 255) / 256) * 256 }
  BEGIN { N = 2 * 64; C = 64; V = 259; NH = 4; HD = 16
    body = r(int((N + 127) / 128) * C * 8); if (8192 > body) body = 8192
    shares = 2 * r(N * NH * HD * 4); if (shares > body) body = shares
    embed = 3 * r(4 * N) + r(32 * N) + 1048576; head = r(8 * N) + r(N * V * 4) + r(N * V * 2)
    printf "%d %d %d %d", (embed > body ? embed : body) + 4096, body + 4096, body + 4096, (head > body ? head : body) + 4096 }')
mib() { awk '{ for (k = 1; k <= NF; k++) printf "%s%.1f", (k > 1 ? " " : ""), $k / 1048576 }'; }
check "GPU 4 stages: the banner states each stage's scratch arena" \
  grep -qxF "  scratch arena per stage (MiB, reserved once beside the activations): $(echo "$arenas" | mib)" gpu4.txt
# ... and the end counts it in each stage's GPU memory: the step's recorded peak activations + it.
peaks=$(sqlite3 gpu4.db 'SELECT peak_act_bytes FROM stage_steps WHERE step = 10 ORDER BY stage' | tr '\n' ' ')
check "GPU 4 stages: the arena is in each stage's GPU memory at the end" \
  grep -qxF "  GPU memory per stage, those activations + scratch arena (MiB): $(echo "$peaks $arenas" |
    awk '{ for (k = 1; k <= 4; k++) printf "%s%d", (k > 1 ? " " : ""), $k + $(k + 4) }' | mib)" gpu4.txt
check "GPU fp32, interleaved (4 stages on 2 ranks of one GPU), runs" run gpu4i --device cuda --stages 2 --schedule interleaved-1f1b --precision fp32
check "GPU fp32 interleaved: within 1e-4 of the CPU's" within cpu.losses gpu4i.losses 1e-4
check "GPU bf16, 2 stages x 2 replicas, runs" run gpudp --device cuda --stages 2 --dp 2
check "GPU data parallel: within 2e-2 of the CPU's" within cpu.losses gpudp.losses 2e-2

# Every schedule through `check`: fp32 against the CPU single device, then bf16.
for sched in gpipe 1f1b interleaved-1f1b looped-bfs zb-h1 interleaved-zb zb-v dualpipe-v; do
  for P in 2 4; do
    M=4
    [ "$sched" = dualpipe-v ] && M=$((2 * P))   # a microbatch per stage at least
    "$bin" check --data "$data" --model tiny --batch 8 --seq 64 --microbatches $M --stages $P --schedule $sched \
      --device cuda > "check-$sched-$P.txt" 2>&1
    check "check --device cuda --schedule $sched --stages $P" [ $? -eq 0 ] || cat "check-$sched-$P.txt"
  done
done
"$bin" check --data "$data" --model tiny --batch 8 --seq 64 --microbatches 4 --stages 4 --schedule zb-v \
  --device cuda --precision bf16 > check-bf16.txt 2>&1
check "check --device cuda --precision bf16 (bf16 tolerances)" [ $? -eq 0 ] || cat check-bf16.txt
# ... and with 4 layers a stage and the backward split (zb-h1): bf16 slots keep one fp32
# gradient row, each layer's input gradient written over its output gradient, and the weight
# half reads the layers' bf16 copies (engine/model/model_acts.h: acts_dresid_at).
"$bin" check --data "$data" --model tiny --batch 8 --seq 64 --microbatches 4 --stages 2 --schedule zb-h1 \
  --device cuda --precision bf16 > check-bf16-zb.txt 2>&1
check "check --device cuda --precision bf16, 4 layers a stage, zb-h1" [ $? -eq 0 ] || cat check-bf16-zb.txt

# Checkpoint at step 5 on the GPU, resume: the same losses as the run never stopped.
check "GPU run with checkpoints" run ck --device cuda --stages 2 --ckpt-dir ck --ckpt-every 5
# Only layout flags with --resume: the device and precision come from the checkpoint.
"$bin" train --data "$data" --steps 10 --stages 2 --db ck.db --resume "$(ckpt_of ck 1 5)" > resume.txt 2>&1
check "GPU resume from step 5 exits 0" [ $? -eq 0 ] || tail -3 resume.txt
sqlite3 ck.db "SELECT step, printf('%.17g', loss) FROM steps WHERE run_id = 2 ORDER BY step" > resume.losses
tail -5 ck.losses > ck-tail.losses
check "GPU resume: steps 6-10 bitwise equal to the uninterrupted run" cmp -s ck-tail.losses resume.losses
check "GPU resume: the resumed run is on the GPU too" [ "$(sqlite3 ck.db 'SELECT device FROM runs WHERE id = 2')" = cuda ]

# Generation on GPU stages (engine/model/model_cuda.c's decode, cuda_flash_decode), fp32, held
# to the CPU stages' ids (which tests/cli/cli_sample.sh holds to transformers): greedy ids of
# Hugging Face folders at P=1 (and P=2: two layers), of a trained tiny run's checkpoint at
# P=1 and P=3, seeded sampling at P=3; a GPU run's sample stays on its GPUs; train
# --sample-every on GPU stages records its samples.
ids_of() { tr -d ' \n' | sed 's/.*"ids":\[\([0-9,]*\)\].*/\1/'; }
gen() { "$bin" sample "$@" --json | ids_of; }
same_ids() {   # same_ids WHAT args...: the CPU's ids of WHAT, then the GPU's, equal and not empty
  local what=$1
  shift
  local cpu gpu
  cpu=$(gen "$what" "$@") gpu=$(gen "$what" "$@" --device cuda --precision fp32)
  [ -n "$cpu" ] && [ "$cpu" = "$gpu" ] || { echo "  cpu: $cpu"; echo "  gpu: $gpu"; return 1; }
}
hfg="$src/tests/fixtures/hf_generate"
want=$(grep '"prompt": "Hello"' "$hfg/expected.json" | ids_of)
check "GPU greedy ids of hf_generate at P=1 are transformers' generate()" \
  [ "$(gen "$hfg" --prompt Hello --tokens 64 --device cuda --precision fp32)" = "$want" ]
plain="$src/tests/fixtures/hf_variants/plain"
for P in 1 2; do
  check "GPU greedy ids of hf_variants/plain at P=$P are the CPU's" same_ids "$plain" --prompt "The pipeline" \
    --tokens 48 --stages "$P"
done
"$bin" train --data "$data" --model tiny --steps 120 --batch 8 --seq 64 --microbatches 2 --lr 1e-2 --warmup 5 \
  --db gen.db --ckpt-dir genck --ckpt-every 120 > gen.txt 2>&1
check "a tiny run to sample from" [ $? -eq 0 ] || tail -3 gen.txt
for P in 1 3; do
  check "GPU greedy ids of a trained run at P=$P are the CPU's" same_ids 1 --db gen.db --prompt "The pipeline " \
    --tokens 48 --stages "$P"
done
check "GPU seeded sampling at P=3 draws the CPU's ids" same_ids 1 --db gen.db --prompt "The pipeline " --tokens 48 \
  --stages 3 --temperature 1.0 --top-k 50 --seed 7
# A GPU run samples on its GPUs (kernels run: counted where the GPU is emulated), with the ids
# of --device cpu on the same checkpoint.
PPTRAIN_EMU_COUNT_SYNCS=1 "$bin" sample 1 --db ck.db --prompt "The " --tokens 16 --json > ckgen.json 2> ckgen.err
check "sample of a GPU run gives the CPU's ids" [ -s ckgen.json ] && \
  [ "$(ids_of < ckgen.json)" = "$(gen 1 --db ck.db --prompt "The " --tokens 16 --device cpu)" ]
if [ -n "${PPTRAIN_EMU_GPUS:-}" ]; then
  check "sample of a GPU run stays on the GPU" grep -q "GPU emulation): [1-9][0-9]* kernel calls" ckgen.err
fi
run gpusample --device cuda --precision fp32 --sample-every 5
check "train --device cuda --sample-every 5: two samples recorded" \
  [ "$(sqlite3 gpusample.db 'SELECT count(*) FROM samples')" -eq 2 ]
check "train --device cuda --sample-every 5: the losses bitwise those of the run without" cmp -s gpu32.losses \
  gpusample.losses

# NCCL between processes (one OpenMP thread each: the ranks share the machine's cores).
nccl_built=1
ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" "$bin" "${base[@]}" --transport nccl --device cuda --db '' 2>&1 |
  grep -q "built without NCCL" && nccl_built=0
nccl_run() {   # nccl_run NAME NP args...: mpirun -np NP, recorded in NAME.db
  local name=$1 np=$2
  shift 2
  # (Leak checks off under mpirun: Open MPI's own allocations outlive MPI_Finalize, as cli_mpi.sh says.)
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" OMP_NUM_THREADS=1 timeout 600 mpirun --allow-run-as-root --oversubscribe -np "$np" "$bin" "${base[@]}" \
    --transport nccl --device cuda --db "$name.db" "$@" > "$name.txt" 2>&1
  local code=$?
  losses "$name.db" > "$name.losses" 2>/dev/null
  [ $code -eq 0 ] || { echo "  $name exited $code:"; tail -5 "$name.txt"; }
  return $code
}
nccl_refused() {   # with one GPU for two ranks: one line on each rank, non-zero ([EMULATED_GPUS])
  env ${1:+PPTRAIN_EMU_GPUS=$1} ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" OMP_NUM_THREADS=1 timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" "${base[@]}" --stages 2 \
    --transport nccl --device cuda --db '' > refused.txt 2>&1
  [ $? -ne 0 ] && grep -q "would share GPU 0.*NCCL needs a GPU per rank" refused.txt
}
if [ $nccl_built -eq 0 ]; then
  echo "  (this pptrain has no NCCL: the nccl checks are skipped)"
else
  if [ "$gpus" -ge 2 ]; then
    check "nccl, 2 processes, 1f1b" nccl_run nccl 2 --stages 2
    check "nccl 1f1b: within 2e-2 of the CPU's" within cpu.losses nccl.losses 2e-2
    # zb-v: rank 0 sends stage 0's activations and stage 3's gradients to rank 1, each on its own edge.
    check "nccl, 2 processes, zb-v (4 stages)" nccl_run ncclv 2 --stages 2 --schedule zb-v
    check "nccl zb-v: within 2e-2 of the CPU's" within cpu.losses ncclv.losses 2e-2
    # Generation between processes: the logits gathered to the root, the CPU stages' ids.
    got=$(env ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" OMP_NUM_THREADS=1 timeout 120 mpirun --allow-run-as-root \
          --oversubscribe -np 2 "$bin" sample "$plain" --prompt "The pipeline" --tokens 24 --stages 2 --transport nccl \
          --device cuda --precision fp32 --timeout 60 --json 2> nccl-sample.err | ids_of)
    check "nccl, 2 processes: greedy ids of hf_variants/plain are the CPU's" \
      [ -n "$got" ] && [ "$got" = "$(gen "$plain" --prompt "The pipeline" --tokens 24 --stages 2)" ]
  fi
  if [ "$gpus" -ge 4 ]; then
    check "nccl, 4 processes: 2 stages x 2 replicas" nccl_run nccldp 4 --stages 2 --dp 2
    check "nccl data parallel: within 2e-2 of the CPU's" within cpu.losses nccldp.losses 2e-2
  fi
  if [ -n "${PPTRAIN_EMU_GPUS:-}" ]; then
    check "nccl with 2 ranks on 1 emulated GPU: refused, saying they would share it" nccl_refused 1
  elif [ "$gpus" -eq 1 ]; then
    check "nccl with 2 ranks on 1 GPU: refused, saying they would share it" nccl_refused
  fi
fi

expect_refusal() {   # expect_refusal "text" args...: one line on stderr, exit 2
  local want=$1
  shift
  "$bin" "${base[@]}" --db '' "$@" > out.txt 2> err.txt
  local code=$?
  [ $code -eq 2 ] && [ "$(wc -l < err.txt)" -eq 1 ] && grep -qF -- "$want" err.txt || {
    echo "  exit $code:"; cat err.txt; return 1; }
}
check "--recompute all on GPUs: one line, exit 2" expect_refusal "--recompute all runs on CPU stages only" \
  --device cuda --recompute all
check "--transport mpi on GPUs: one line, exit 2" expect_refusal "use --transport nccl" --device cuda --transport mpi
if [ -n "${PPTRAIN_EMU_GPUS:-}" ]; then   # the emulated GPUs pretend a T4 (PPTRAIN_EMU_CC)
  PPTRAIN_EMU_CC=7.5 check "a GPU under compute capability 8.0 (a T4): one line, exit 2" expect_refusal \
    "GPU 0 (emulated GPU) has compute capability 7.5; pptrain's GPU kernels need 8.0 or newer" --device cuda
fi
# Tied embeddings on one GPU stage: the head accumulates into the embedding itself; within
# fp32 tolerance of the CPU stages' E + H. Split across GPU stages, and biases: refused.
fx="$src/tests/fixtures/hf_variants"
tied=(--init-from "$fx/tied" --steps 4 --seq 32 --microbatches 2)
base=(train --data "$data" --batch 8 --lr 3e-3 --warmup 2)   # --init-from brings the model
run tiedcpu "${tied[@]}" > /dev/null
check "GPU fp32 tied embeddings on one stage, runs" run tiedgpu "${tied[@]}" --device cuda --precision fp32
check "GPU tied embeddings: within 1e-4 of the CPU's" within tiedcpu.losses tiedgpu.losses 1e-4
check "tied embeddings split across GPU stages: one line, exit 2" \
  expect_refusal "tied word embeddings need the embedding and the head on one GPU stage" "${tied[@]}" --device cuda --stages 2
check "biases on GPUs: one line, exit 2" expect_refusal "mlp_bias runs on CPU stages only" \
  --init-from "$fx/mlp_bias" --device cuda
cli_finish
