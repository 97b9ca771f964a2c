#!/usr/bin/env bash
# The run store under faults (issue 17): a lock held by another process, a store that cannot
# grow (a full disk), a damaged page, NaN weights (refused at load) and weights that overflow
# the loss to NaN. Every case checks the exit code, the stderr lines, and a
# store that passes PRAGMA integrity_check and whose rows tell what happened.
# PPTRAIN_TEST_DB_BUSY_MS shortens the store's lock wait (5 s) so that a lock held for two
# seconds outlasts it; PPTRAIN_TEST_DB_MAX_PAGES caps the store's size (SQLITE_FULL past it).
# usage: cli_store_faults.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3 shell"; exit 0; }

data="$src/tests/fixtures/text"
small=(--data "$data" --batch 2 --seq 16)
export OMP_NUM_THREADS=1
q() { sqlite3 "$1" "$2"; }
intact() { [ "$(q "$1" 'PRAGMA integrity_check')" = ok ]; }
# until_rows DB SQL: waits (20 s at most) until the count SQL gives is above 0.
until_rows() {
  local n
  for _ in $(seq 400); do
    n=$(q "$1" "$2" 2>/dev/null)
    [ "${n:-0}" -gt 0 ] && return 0
    sleep 0.05
  done
}

# ---- 1. a lock held while the run writes: nothing is lost ---------------------------------
# The lock is taken once the run has committed steps, and held until the run has found it
# (its warning) and half a second more: steps and a checkpoint or two meet the lock.
export PPTRAIN_TEST_DB_BUSY_MS=200 OMP_NUM_THREADS=1
tiny=(--data "$data" --batch 1 --seq 8)
"$bin" train "${tiny[@]}" --steps 3000 --ckpt-every 500 --ckpt-dir ck1 --db busy.db >out1.txt 2>err1.txt &
run=$!
until_rows busy.db 'SELECT count(*) FROM steps'   # the run has committed its first steps
sqlite3 busy.db ".timeout 10000" "BEGIN IMMEDIATE;" \
  ".shell for i in \$(seq 100); do [ -s err1.txt ] && break; sleep 0.05; done; sleep 0.5" "COMMIT;"
wait $run
code=$?
check "a locked store: exit 0 (got $code)" [ "$code" -eq 0 ]
check "a locked store: one warning line on stderr" [ "$(wc -l <err1.txt)" -eq 1 ]
check "a locked store: the warning says the steps are kept" grep -q "warning: .*locked.*steps are kept" err1.txt
check "a locked store: every step recorded" [ "$(q busy.db 'SELECT count(*) FROM steps')" -eq 3000 ]
check "a locked store: the run finished" [ "$(q busy.db 'SELECT status FROM runs')" = finished ]
check "a locked store: all 6 checkpoints complete" \
  [ "$(q busy.db "SELECT count(*) FROM checkpoints WHERE status = 'complete'")" -eq 6 ]
check "a locked store: integrity_check passes" intact busy.db

# A lock held when the run starts: recording the run waits for it.
sqlite3 busy.db ".timeout 10000" "BEGIN IMMEDIATE;" ".shell sleep 1" "COMMIT;" &
sleep 0.3
"$bin" train "${tiny[@]}" --steps 5 --db busy.db >/dev/null 2>err1b.txt
code=$?
wait
check "a store locked at the start: exit 0 (got $code)" [ "$code" -eq 0 ]
check "a store locked at the start: nothing on stderr" [ ! -s err1b.txt ]
check "a store locked at the start: the run is recorded, finished" \
  [ "$(q busy.db "SELECT count(*) FROM runs WHERE status = 'finished'")" -eq 2 ]
# A lock held past the patience (12 waits: 2.4 s here) at a checkpoint: the run stops with
# exit 2 after a final checkpoint whose folder its line names. The store cannot take the
# run's end nor that checkpoint, so both go into a journal beside it; the next writer
# records them: the row says failed with that very line, and --resume latest starts at the
# step the line named.
"$bin" train "${tiny[@]}" --steps 3000 --ckpt-every 20 --ckpt-dir ckl --db locked.db >outl.txt 2>errl.txt &
run=$!
until_rows locked.db "SELECT count(*) FROM checkpoints WHERE status = 'complete'"
sqlite3 locked.db ".timeout 10000" "BEGIN IMMEDIATE;" \
  ".shell for i in \$(seq 400); do kill -0 $run 2>/dev/null || break; sleep 0.05; done" "COMMIT;"
wait $run
code=$?
check "a lock past the patience: exit 2 (got $code)" [ "$code" -eq 2 ]
named=$(sed -n 's/.*its last checkpoint is \(.*\)$/\1/p' errl.txt | tail -1)
named_step=$((10#${named##*step-}))
check "a lock past the patience: the line names the last checkpoint ($named)" [ -f "$named/trainer_state.json" ]
check "a lock past the patience: a journal beside the store" [ -f locked.db.journal-1.json ]
check "a lock past the patience: the row still says running until a writer comes" \
  [ "$(q locked.db 'SELECT status FROM runs WHERE id = 1')" = running ]
"$bin" train --resume latest --db locked.db --steps $((named_step + 2)) >outr.txt 2>errr.txt
check "resume latest after the lock: exit 0" [ $? -eq 0 ] || cat errr.txt
check "resume latest after the lock: the journal was recorded, and removed" \
  bash -c "grep -q 'note: locked.db: recorded 1 earlier run' errr.txt && [ ! -e locked.db.journal-1.json ]"
check "the locked run's row: failed, with the line it printed" \
  [ "$(q locked.db 'SELECT status || '"'"'|'"'"' || error FROM runs WHERE id = 1')" = "failed|$(sed 's/^pptrain: //' errl.txt | tail -1)" ]
check "the named checkpoint: a complete row" \
  [ "$(q locked.db "SELECT status FROM checkpoints WHERE dir = '$named'")" = complete ]
check "resume latest started at the step the line named ($named_step)" \
  [ "$(q locked.db 'SELECT min(step) FROM steps WHERE run_id = 2')" -eq $((named_step + 1)) ]
check "the store after the lock and the journal: integrity_check passes" intact locked.db
unset PPTRAIN_TEST_DB_BUSY_MS

# ---- 2. a store that cannot grow (a full disk): exit 2, one line, the run failed -------------
"$bin" train "${small[@]}" --steps 1 --db full.db >/dev/null 2>&1
pages=$(q full.db 'PRAGMA page_count')
PPTRAIN_TEST_DB_MAX_PAGES=$((pages + 2)) \
  "$bin" train "${small[@]}" --steps 600 --ckpt-dir ck2 --db full.db >out2.txt 2>err2.txt
code=$?
check "a full store: exit 2 (got $code)" [ "$code" -eq 2 ]
check "a full store: one line on stderr" [ "$(wc -l <err2.txt)" -eq 1 ]
check "a full store: the line says the store is full and where the run stopped" \
  grep -q "full.*the run stopped at step [0-9]*, its last checkpoint is /.*/ck2/run-2-[0-9a-f]\{8\}/step-" err2.txt
stopped=$(sed -n 's/.*the run stopped at step \([0-9]*\).*/\1/p' err2.txt)
check "a full store: it stopped early (step ${stopped:-?})" [ "${stopped:-600}" -lt 600 ]
check "a full store: a final checkpoint on disk at that step" \
  [ -f "$(ckpt_of ck2 2 "${stopped:-0}")/trainer_state.json" ]
check "a full store: the run is marked failed, with the line" \
  [ "$(q full.db "SELECT count(*) FROM runs WHERE id = 2 AND status = 'failed' AND error LIKE '%full%'")" -eq 1 ]
recorded=$(q full.db 'SELECT count(*) FROM steps WHERE run_id = 2')
check "a full store: fewer steps recorded ($recorded) than run" [ "$recorded" -lt "${stopped:-0}" ]
check "a full store: no checkpoint claimed complete that is not" \
  [ "$(q full.db "SELECT count(*) FROM checkpoints WHERE run_id = 2 AND status = 'complete'")" -eq 0 ]
check "a full store: integrity_check passes" intact full.db

# ---- 3. a damaged page: train and history refuse the store, in one line ---------------------
"$bin" train "${small[@]}" --steps 2 --db bad.db >/dev/null 2>&1
check "a damaged store: it has a third page to damage" [ "$(q bad.db 'PRAGMA page_count')" -ge 4 ]
head -c 4096 /dev/zero | tr '\0' '\377' | dd of=bad.db bs=4096 seek=2 conv=notrunc status=none
check "a damaged store: integrity_check fails" [ "$(q bad.db 'PRAGMA integrity_check' 2>&1)" != ok ]
sum_before=$(cksum <bad.db)
for cmd in "train ${small[*]} --steps 1" "history"; do
  # shellcheck disable=SC2086
  "$bin" $cmd --db bad.db >out3.txt 2>err3.txt
  code=$?
  check "a damaged store: $cmd exits 2 (got $code)" [ "$code" -eq 2 ]
  check "a damaged store: $cmd prints one line" [ "$(wc -l <err3.txt)" -eq 1 ]
  check "a damaged store: $cmd names the damage" grep -q "bad.db: the run store is damaged" err3.txt
done
check "a damaged store: left unchanged" [ "$(cksum <bad.db)" = "$sum_before" ]

# ---- 4. non-finite values: stop at the step, save no NaN weights, the run failed -------------
"$bin" train "${small[@]}" --steps 2 --ckpt-dir ck4 --db nan.db >/dev/null 2>&1
# Hugging Face folders whose last 1,024 floats are NaN (0xffffffff), or finite but huge
# (3.4e38, 0x7f7fffff): NaN is refused when the folder is loaded, naming the tensor, before any
# run is recorded; huge weights load and overflow at step 1.
mkdir poisoned huge
ck42=$(ckpt_of ck4 1 2)
size=$(stat -c %s "$ck42/model-00001-of-00001.safetensors")
for d in poisoned huge; do
  cp "$ck42/config.json" $d/
  cp "$ck42/model-00001-of-00001.safetensors" $d/model.safetensors
done
head -c 4096 /dev/zero | tr '\0' '\377' | dd of=poisoned/model.safetensors bs=1 seek=$((size - 4096)) conv=notrunc status=none
for _ in $(seq 1024); do printf '\377\377\177\177'; done |
  dd of=huge/model.safetensors bs=1 seek=$((size - 4096)) conv=notrunc status=none
"$bin" train "${small[@]}" --steps 3 --init-from poisoned --ckpt-dir ck4 --ckpt-every 1 --db nan.db >out4.txt 2>err4.txt
code=$?
check "NaN weights: refused at load, exit 2 (got $code)" [ "$code" -eq 2 ]
check "NaN weights: one line naming the tensor" \
  bash -c "[ \$(wc -l <err4.txt) -eq 1 ] && grep -q 'tensor lm_head.weight holds NaN' err4.txt"
check "NaN weights: no run recorded" [ "$(q nan.db 'SELECT count(*) FROM runs')" -eq 1 ]
"$bin" train "${small[@]}" --steps 3 --init-from huge --ckpt-dir ck4 --ckpt-every 1 --db nan.db >out4.txt 2>err4.txt
code=$?
check "overflowing weights: exit 2 (got $code)" [ "$code" -eq 2 ]
check "overflowing weights: one line naming the step" [ "$(wc -l <err4.txt)" -eq 1 ]
check "overflowing weights: the line names step 1 and the loss" grep -q "step 1: non-finite loss" err4.txt
check "overflowing weights: no checkpoint of them" [ -z "$(ls -d ck4/run-2-* 2>/dev/null)" ]
check "overflowing weights: the earlier checkpoint stays" [ -f "$ck42/trainer_state.json" ]
check "overflowing weights: the run is failed with that line" \
  [ "$(q nan.db "SELECT count(*) FROM runs WHERE id = 2 AND status = 'failed' AND error LIKE 'step 1: non-finite%'")" -eq 1 ]
check "overflowing weights: no checkpoint row" [ "$(q nan.db 'SELECT count(*) FROM checkpoints WHERE run_id = 2')" -eq 0 ]
check "overflowing weights: integrity_check passes" intact nan.db

# The store deleted, then replaced, while a run writes it: the run stops with exit 2 after a
# final checkpoint, and its one line says what happened (SQLite would write on into the
# unlinked file, and the run end in silence with its history gone).
for how in deleted replaced; do
  "$bin" train "${small[@]}" --steps 100000 --warmup 1 --db gone.db --ckpt-dir gone-ck > gone.out 2> gone.err &
  pid=$!
  for _ in $(seq 300); do grep -q '^step *3/' gone.out 2>/dev/null && break; sleep 0.05; done
  rm -f gone.db gone.db-wal gone.db-shm
  [ "$how" = replaced ] && sqlite3 gone.db 'CREATE TABLE t(x)'
  wait "$pid"
  check "store $how mid-run: exit 2" [ $? -eq 2 ]
  check "store $how mid-run: one line saying so" grep -q "gone.db: the run store was $how.* while this run wrote it" gone.err
  check "store $how mid-run: a final checkpoint" \
    grep -q "the run stopped at step [0-9]*, its last checkpoint is .*gone-ck/run-1-" gone.err
  rm -rf gone.db* gone-ck
done

# An intact store on a read-only mount (root ignores permission bits; a bind mount made
# read-only stands for a CD or a snapshot): the readers read it, and nothing calls it damaged.
mkdir -p rodir
"$bin" train "${small[@]}" --steps 2 --warmup 1 --db rodir/ro.db --ckpt-dir rock > ro-train.txt 2>&1
if mount --bind rodir rodir 2>/dev/null && mount -o remount,bind,ro rodir 2>/dev/null; then
  "$bin" history list --db rodir/ro.db > ro-list.txt 2> ro-list.err
  check "read-only store: history list exits 0" [ $? -eq 0 ]
  check "read-only store: history lists run 1" grep -q '^ *1 .*finished' ro-list.txt
  "$bin" export 1 ro-out --db rodir/ro.db > ro-export.txt 2> ro-export.err
  check "read-only store: export exits 0" [ $? -eq 0 ]
  "$bin" train "${small[@]}" --steps 2 --warmup 1 --db rodir/ro.db > ro-w.txt 2> ro-w.err
  check "read-only store: a run that must write it exits 2" [ $? -eq 2 ]
  check "read-only store: nobody calls it damaged" \
    bash -c "! grep -q 'damaged\|recover' ro-list.err ro-export.err ro-w.err"
  check "read-only store: the writer's line says it cannot write" grep -q 'cannot write' ro-w.err
  umount rodir
else
  echo "read-only store cases skipped: cannot bind-mount here"
fi

cli_finish
