#!/usr/bin/env bash
# Checkpoints and --resume, end to end (DESIGN.md, "Nothing lost"):
#  - a run killed with SIGKILL at several points and resumed (--resume RUN) continues with
#    bitwise the same losses as the run that was never killed;
#  - a checkpoint resumes under another layout (stages, schedule, recompute, transport) with
#    bitwise the same losses, because tensors are keyed by name (and D = 2 layouts bitwise
#    equal to each other);
#  - a damaged checkpoint is refused with one line naming the newest good one, which resumes;
#  - a full disk during a checkpoint fails the run with one line, marks the checkpoint failed,
#    leaves no trainer_state.json, and the store passes PRAGMA integrity_check.
# usage: cli_checkpoint.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

args=(train --data "$src/tests/fixtures/text" --model tiny --steps 40 --batch 8 --seq 64 --microbatches 4
      --stages 2 --schedule 1f1b --lr 3e-3 --warmup 5 --ckpt-every 5)
# Every loss of a run at full precision, "step loss" per line, from the run store.
losses() { sqlite3 "$1" "SELECT step, printf('%.17g', loss) FROM steps WHERE run_id = $2 ORDER BY step"; }
# The lines of B (a resumed run) must appear verbatim in A (the reference).
same_losses() { [ -s "$2" ] && [ -z "$(comm -13 <(sort "$1") <(sort "$2"))" ]; }

"$bin" "${args[@]}" --db ref.db --ckpt-dir ref-ckpt > ref.txt 2>&1
check "reference run exits 0" [ $? -eq 0 ]
losses ref.db 1 > ref.losses
check "reference run recorded 40 losses" [ "$(wc -l < ref.losses)" -eq 40 ]
check "reference wrote 8 complete checkpoints" \
  [ "$(sqlite3 ref.db "SELECT count(*) FROM checkpoints WHERE status = 'complete'")" -eq 8 ]

# SIGKILL once the run has printed step K, resume from the newest complete checkpoint, and
# compare every loss the resumed run computes with the reference.
kill_and_resume() {
  local k=$1 db=kill$1.db
  "$bin" "${args[@]}" --db "$db" --ckpt-dir "ckpt$k" > "kill$k.txt" 2>&1 &
  local pid=$!
  for _ in $(seq 2000); do
    grep -q "^step *$k/" "kill$k.txt" 2>/dev/null && break
    sleep 0.005
  done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  check "run killed at step >= $k (not finished)" [ $? -eq 137 ]
  "$bin" train --resume 1 --db "$db" > "resume$k.txt" 2>&1
  check "resume after the kill at step $k exits 0" [ $? -eq 0 ]
  losses "$db" 2 > "resume$k.losses"
  check "resumed after the kill at $k: losses bitwise equal to the unkilled run" same_losses ref.losses "resume$k.losses"
  check "resumed run at $k records resumed_from = 1" [ "$(sqlite3 "$db" 'SELECT resumed_from FROM runs WHERE id = 2')" = 1 ]
  check "resumed run at $k ends at step 40" [ "$(tail -1 "resume$k.losses" | cut -d'|' -f1)" = 40 ]
}
for k in 7 12 27; do kill_and_resume "$k"; done

# SIGINT stops the run between steps with a final checkpoint at the step it stopped at,
# and the resumed run continues bitwise.
"$bin" "${args[@]}" --db int.db --ckpt-dir int --ckpt-every 1000 > int.txt 2>&1 &
pid=$!
for _ in $(seq 2000); do grep -q '^step *9/' int.txt 2>/dev/null && break; sleep 0.005; done
kill -INT "$pid"
wait "$pid"
check "SIGINT: exit 0" [ $? -eq 0 ]
check "SIGINT: run recorded as stopped" [ "$(sqlite3 int.db 'SELECT status FROM runs')" = stopped ]
stopped_at=$(sqlite3 int.db 'SELECT max(step) FROM steps')
check "SIGINT: a complete checkpoint at the step it stopped at ($stopped_at)" \
  [ "$(sqlite3 int.db "SELECT step FROM checkpoints WHERE status = 'complete'")" = "$stopped_at" ]
"$bin" train --resume latest --db int.db > int-resume.txt 2>&1
losses int.db 2 > int.losses
check "SIGINT: resumed losses bitwise equal to the uninterrupted run" same_losses ref.losses int.losses

# Killed before its first checkpoint: nothing to resume, and the line says so.
"$bin" "${args[@]}" --db early.db --ckpt-dir early --ckpt-every 1000 > early.txt 2>&1 &
pid=$!
for _ in $(seq 2000); do grep -q '^step *2/' early.txt 2>/dev/null && break; sleep 0.005; done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
"$bin" train --resume latest --db early.db > early-resume.txt 2>&1
check "killed before any checkpoint: exit 2" [ $? -eq 2 ]
check "killed before any checkpoint: says no run has one" grep -q 'no run in early.db has a complete checkpoint' early-resume.txt

# Resharding: the step-10 checkpoint under other layouts trains bitwise what the unchanged run
# trains, because tensors are keyed by name and every layout computes what one device computes
# (DESIGN.md "Parity"). Data parallelism adds the replicas' gradients in replica order, so D = 2
# layouts are held to the D = 2 single-stage run instead.
ck10=$(ckpt_of ref-ckpt 1 10)
resume_as() {   # resume_as N LAYOUT...: the step-10 checkpoint under LAYOUT as run N of ref.db
  local n=$1; shift
  "$bin" train --resume "$ck10" --db ref.db "$@" > "reshard$n.txt" 2>&1
  check "resume under '$*' exits 0" [ $? -eq 0 ]
  losses ref.db "$n" > "reshard$n.losses"
}
n=1
for layout in "--stages 1" "--stages 4 --schedule zb-h1" "--stages 2 --schedule interleaved-1f1b --virtual 2" \
              "--stages 4 --schedule looped-bfs --virtual 2 --recompute all"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  resume_as $n $layout
  check "resume under '$layout': 30 losses bitwise equal to the unchanged run" same_losses ref.losses "reshard$n.losses"
done
n=$((n + 1)); dp_ref=$n
resume_as $n --stages 1 --dp 2 --microbatches 2
for layout in "--stages 2 --dp 2 --microbatches 2" "--stages 4 --schedule zb-v --virtual 2 --dp 2 --microbatches 2"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  resume_as $n $layout
  check "resume under '$layout': 30 losses bitwise equal to --stages 1 --dp 2" \
    same_losses "reshard$dp_ref.losses" "reshard$n.losses"
done
if command -v mpirun > /dev/null; then
  mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 \
    -np 2 "$bin" train --resume "$ck10" --db mpi.db --transport mpi --ckpt-dir mpi-ckpt > mpi.txt 2>&1
  check "resume under mpirun -np 2 exits 0" [ $? -eq 0 ]
  losses mpi.db 1 > mpi.losses
  check "resume under MPI: losses bitwise equal to the unchanged run" same_losses ref.losses mpi.losses
  check "MPI run wrote its final checkpoint" [ -f "$(ckpt_of mpi-ckpt 1 40)/trainer_state.json" ]
fi

# A damaged checkpoint: flip one byte of the newest shard of the reference run.
newest=$(sqlite3 ref.db "SELECT dir FROM checkpoints WHERE run_id = 1 AND status = 'complete' ORDER BY step DESC LIMIT 1")
good=$(sqlite3 ref.db "SELECT dir FROM checkpoints WHERE run_id = 1 AND status = 'complete' ORDER BY step DESC LIMIT 1 OFFSET 1")
printf '\x01' | dd of="$newest/model-00002-of-00002.safetensors" bs=1 seek=2000 conv=notrunc status=none
"$bin" train --resume 1 --db ref.db > damaged.txt 2>&1
check "damaged checkpoint: exit 2" [ $? -eq 2 ]
check "damaged checkpoint: one line" [ "$(wc -l < damaged.txt)" -eq 1 ]
check "damaged checkpoint: says sha256 and names the newest good one" \
  grep -q "sha256 does not match.*the newest good one is $good" damaged.txt
"$bin" train --resume "$good" --db ref.db > good.txt 2>&1
check "the named good checkpoint resumes" [ $? -eq 0 ]
rm "$good/optimizer-00001-of-00002.safetensors"
"$bin" train --resume "$good" --db ref.db > missing.txt 2>&1
check "a missing file: exit 2 and names it" grep -q "optimizer-00001-of-00002.safetensors is missing" missing.txt

# A full disk during a checkpoint, simulated with a file size limit (SIGXFSZ is ignored by
# pptrain, so the write fails with EFBIG): the shards are 650 KB, the store stays far below.
(ulimit -f 400; "$bin" train --data "$src/tests/fixtures/text" --steps 4 --stages 2 --ckpt-dir full --db full.db \
   > full.txt 2> full.err)
check "disk full: exit 2" [ $? -eq 2 ]
check "disk full: one line naming the file and the cause" grep -q "model-0000.-of-00002.safetensors.*File too large" full.err
check "disk full: one line only" [ "$(wc -l < full.err)" -eq 1 ]
check "disk full: checkpoint marked failed" [ "$(sqlite3 full.db 'SELECT status FROM checkpoints')" = failed ]
check "disk full: run marked failed" [ "$(sqlite3 full.db 'SELECT status FROM runs')" = failed ]
check "disk full: no trainer_state.json, no temporary files" \
  [ -z "$(find full -name 'trainer_state.json' -o -name '*.tmp')" ]
check "disk full: integrity_check ok" [ "$(sqlite3 full.db 'PRAGMA integrity_check')" = ok ]

cli_finish
