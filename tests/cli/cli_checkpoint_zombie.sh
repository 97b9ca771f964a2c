#!/usr/bin/env bash
# A run killed while no one reaps it leaves nothing behind after the resume. When an mpirun
# job is SIGKILLed, its ranks are reparented to PID 1 and stay zombies until it reaps them
# (1.5 to 2 s in the container the audit ran in; never under a PID 1 that does not reap),
# and kill(pid, 0) succeeds on a zombie. A resume started in that time took the killed run
# for a live one: its row stayed 'running', its 'writing' checkpoint was never closed or
# discarded, and its temporary files stayed (3 of 8 mpirun trials of
# tests/audit/kill_resume.sh). Here the killed run is a
# child of a process that never waits, so it stays a zombie on any host:
#  - its row is marked failed on the next start, its 'writing' checkpoint marked failed and
#    its folder removed (step and run folder);
#  - a temporary file the zombie left in another incomplete folder is removed;
#  - the resume itself ends at the run's last step (exit 0).
# usage: cli_checkpoint_zombie.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

args=(train --data "$src/tests/fixtures/text" --model tiny --steps 6 --batch 8 --seq 64 --microbatches 2 --warmup 1
      --ckpt-every 2 --ckpt-dir ck --db t.db --timeout 120)
# The run stalls at step 3 (test hook; its step-2 checkpoint is complete by then) as a child
# of a shell that execs into sleep: once killed, nothing reaps it.
PPTRAIN_TEST_STALL=0:3:norm bash -c '"$@" > killed.out 2>&1 & echo $! > killed.pid; exec sleep 300' _ "$bin" "${args[@]}" &
for _ in $(seq 600); do [ -n "$(ls ck/run-1-*/step-000002/trainer_state.json 2>/dev/null)" ] && break; sleep 0.1; done
sleep 0.5
zpid=$(cat killed.pid)
kill -9 "$zpid"
for _ in $(seq 100); do [ "$(ps -o stat= -p "$zpid" | cut -c1)" = Z ] && break; sleep 0.05; done
check "the killed run is a zombie (nothing reaps it)" [ "$(ps -o stat= -p "$zpid" | cut -c1)" = Z ]
check "the killed run's row still says running" [ "$(sqlite3 t.db 'SELECT status FROM runs WHERE id = 1')" = running ]

# What a kill in the middle of its step-4 checkpoint leaves: a 'writing' row, a folder with a
# shard and the zombie's temporary file; and a temporary file of it in a folder without a row.
run1=$(dirname "$(ls -d ck/run-1-*/step-000002)")
mkdir -p "$run1/step-000004" ck/run-9-0badf00d/step-000005
cp "$run1/step-000002/model-00001-of-00001.safetensors" "$run1/step-000004/"
touch "$run1/step-000004/optimizer-00001-of-00001.safetensors.$zpid.tmp" \
      "ck/run-9-0badf00d/step-000005/model-00001-of-00001.safetensors.$zpid.tmp"
sqlite3 t.db "INSERT INTO checkpoints (run_id, step, dir, created_at, status)
              VALUES (1, 4, '$PWD/$run1/step-000004', datetime('now'), 'writing')"

"$bin" train --resume latest --db t.db > resume.out 2> resume.err
check "the resume exits 0" [ $? -eq 0 ]
check "the resume ends at step 6" [ "$(sqlite3 t.db 'SELECT max(step) FROM steps WHERE run_id = 2')" = 6 ]
check "the killed run is marked failed" [ "$(sqlite3 t.db 'SELECT status FROM runs WHERE id = 1')" = failed ]
check "no 'writing' checkpoint is left" \
  [ "$(sqlite3 t.db "SELECT count(*) FROM checkpoints WHERE status = 'writing'")" -eq 0 ]
check "the killed checkpoint's folder is removed" [ ! -e "$run1/step-000004" ]
check "the zombie's temporary file elsewhere: removed with its folders" [ ! -e ck/run-9-0badf00d ]
check "no temporary file is left under --ckpt-dir" [ -z "$(find ck -name '*.tmp')" ]
check "every step folder left is complete" \
  bash -c 'for d in ck/run-*/step-*; do [ -f "$d/trainer_state.json" ] || exit 1; done'

cli_finish
