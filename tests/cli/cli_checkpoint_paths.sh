#!/usr/bin/env bash
# Where checkpoints go and how they are found again:
#  - a relative --ckpt-dir is recorded absolute, so --resume latest and export work from any
#    other working directory; a row an older pptrain stored relative is resolved against the
#    store's folder;
#  - a resumed run goes on writing checkpoints where the run it continues wrote them, at its
#    interval, without --ckpt-dir or --ckpt-every given again (and either flag overrides);
#  - --trace and --db are refused at start-up when their folder takes no new file, even when
#    the file itself is writable (the trace is written to a temporary name and renamed; SQLite
#    keeps -wal and -shm files beside the store).
# usage: cli_checkpoint_paths.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
args=(train --data "$src/tests/fixtures/text" --model tiny --batch 4 --seq 32 --lr 3e-3 --warmup 1)

mkdir -p proj elsewhere
(cd proj && "$bin" "${args[@]}" --steps 6 --ckpt-every 3 --ckpt-dir ck > run1.txt 2>&1)
check "a run with a relative --ckpt-dir exits 0" [ $? -eq 0 ]
dirs=$(sqlite3 proj/pptrain.db "SELECT group_concat(dir, ' ') FROM checkpoints WHERE run_id = 1")
check "the store records the folders absolute: $dirs" \
  [ "$dirs" = "$work/proj/ck/run-1/step-000003 $work/proj/ck/run-1/step-000006" ]

# From another folder: resume to step 9 (its interval, 3, is kept: checkpoints at 9 only
# would mean it was lost), then export.
(cd elsewhere && "$bin" train --resume latest --db ../proj/pptrain.db --steps 12 > resume.txt 2>&1)
check "--resume latest from another folder exits 0" [ $? -eq 0 ] || cat elsewhere/resume.txt
got=$(sqlite3 proj/pptrain.db "SELECT group_concat(dir, ' ') FROM checkpoints WHERE run_id = 2 AND status = 'complete'")
check "the resumed run writes its checkpoints beside its run's, every 3 steps: $got" \
  [ "$got" = "$work/proj/ck/run-2/step-000009 $work/proj/ck/run-2/step-000012" ]
(cd elsewhere && "$bin" export latest out --db ../proj/pptrain.db > export.txt 2>&1)
check "export latest from another folder exits 0" [ $? -eq 0 ] || cat elsewhere/export.txt
check "export wrote the resumed run's weights" [ -f elsewhere/out/config.json ]

# Flags given again win: --ckpt-every 0 writes only the last one, --ckpt-dir another folder.
(cd elsewhere && "$bin" train --resume 2 --db ../proj/pptrain.db --steps 16 --ckpt-every 0 --ckpt-dir other \
  > resume2.txt 2>&1)
got=$(sqlite3 proj/pptrain.db "SELECT group_concat(dir, ' ') FROM checkpoints WHERE run_id = 3")
check "--ckpt-dir and --ckpt-every given on --resume win: $got" [ "$got" = "$work/elsewhere/other/run-3/step-000016" ]

# A row stored relative by an older pptrain: resolved against the store's folder.
sqlite3 proj/pptrain.db "UPDATE checkpoints SET dir = 'ck/run-2/step-000012' WHERE run_id = 2 AND step = 12"
sqlite3 proj/pptrain.db "DELETE FROM checkpoints WHERE run_id = 3"
(cd elsewhere && "$bin" export 2 out2 --db ../proj/pptrain.db > export2.txt 2>&1)
check "an old relative row resolves against the store's folder" [ $? -eq 0 ] || cat elsewhere/export2.txt

# A file root may open for writing in a folder where nothing can be created: /proc/version.
if [ "$(id -u)" = 0 ] && [ -w /proc/version ]; then
  "$bin" "${args[@]}" --steps 1 --db '' --trace /proc/version > proc.txt 2>&1
  check "--trace /proc/version: exit 2 before training" [ $? -eq 2 ]
  check "--trace /proc/version: one line, at the start-up check, naming the folder" \
    grep -qx "pptrain: --trace /proc/version: cannot write in /proc: .*" proc.txt
  check "--trace /proc/version: nothing else" [ "$(wc -l < proc.txt)" -eq 1 ]
fi

# --trace and --db in a folder that takes no new file (a read-only bind of it works for
# root, who ignores permission bits; skipped where mounts are not allowed).
mkdir -p ro && touch ro/trace.json ro/x.db && chmod 666 ro/trace.json
if mount --bind -o ro ro ro 2>/dev/null || { mount --bind ro ro 2>/dev/null && mount -o remount,bind,ro ro 2>/dev/null; }; then
  "$bin" "${args[@]}" --steps 1 --db '' --trace ro/trace.json > trace.txt 2>&1
  rc=$?
  check "--trace in a read-only folder: exit 2 before training ($rc)" [ $rc -eq 2 ]
  check "--trace in a read-only folder: one line naming it" \
    grep -qx "pptrain: --trace ro/trace.json: .*" trace.txt
  check "--trace in a read-only folder: nothing else printed" [ "$(wc -l < trace.txt)" -eq 1 ]
  "$bin" "${args[@]}" --steps 1 --db ro/x.db > db.txt 2>&1
  check "--db in a read-only folder: exit 2" [ $? -eq 2 ]
  umount ro
else
  echo "read-only folder cases skipped: cannot bind-mount here"
fi
cli_finish
