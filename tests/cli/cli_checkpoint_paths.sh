#!/usr/bin/env bash
# Where checkpoints go and how they are found again:
#  - a relative --ckpt-dir is recorded absolute, so --resume latest and export work from any
#    other working directory; a row an older pptrain stored relative is resolved against the
#    store's folder;
#  - the run 1 of two stores sharing a --ckpt-dir writes two folders (run-1-<tag>), and a
#    folder that already holds another run's checkpoint is never written over (two runs
#    given one tag by the test hook): one line, exit 2, the first run's files unchanged;
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
  [ "$dirs" = "$(ckpt_of "$work/proj/ck" 1 3) $(ckpt_of "$work/proj/ck" 1 6)" ]

# From another folder: resume to step 9 (its interval, 3, is kept: checkpoints at 9 only
# would mean it was lost), then export.
(cd elsewhere && "$bin" train --resume latest --db ../proj/pptrain.db --steps 12 > resume.txt 2>&1)
check "--resume latest from another folder exits 0" [ $? -eq 0 ] || cat elsewhere/resume.txt
got=$(sqlite3 proj/pptrain.db "SELECT group_concat(dir, ' ') FROM checkpoints WHERE run_id = 2 AND status = 'complete'")
check "the resumed run writes its checkpoints beside its run's, every 3 steps: $got" \
  [ "$got" = "$(ckpt_of "$work/proj/ck" 2 9) $(ckpt_of "$work/proj/ck" 2 12)" ]
(cd elsewhere && "$bin" export latest out --db ../proj/pptrain.db > export.txt 2>&1)
check "export latest from another folder exits 0" [ $? -eq 0 ] || cat elsewhere/export.txt
check "export wrote the resumed run's weights" [ -f elsewhere/out/config.json ]

# Flags given again win: --ckpt-every 0 writes only the last one, --ckpt-dir another folder.
(cd elsewhere && "$bin" train --resume 2 --db ../proj/pptrain.db --steps 16 --ckpt-every 0 --ckpt-dir other \
  > resume2.txt 2>&1)
got=$(sqlite3 proj/pptrain.db "SELECT group_concat(dir, ' ') FROM checkpoints WHERE run_id = 3")
check "--ckpt-dir and --ckpt-every given on --resume win: $got" [ "$got" = "$(ckpt_of "$work/elsewhere/other" 3 16)" ]

# A row stored relative by an older pptrain: resolved against the store's folder.
old_row=$(cd proj && ckpt_of ck 2 12)   # ck/run-2-<tag>/step-000012, as an older pptrain stored it
sqlite3 proj/pptrain.db "UPDATE checkpoints SET dir = '$old_row' WHERE run_id = 2 AND step = 12"
sqlite3 proj/pptrain.db "DELETE FROM checkpoints WHERE run_id = 3"
(cd elsewhere && "$bin" export 2 out2 --db ../proj/pptrain.db > export2.txt 2>&1)
check "an old relative row resolves against the store's folder" [ $? -eq 0 ] || cat elsewhere/export2.txt

# Two stores, one --ckpt-dir: each store's run 1 has a folder of its own.
mkdir -p two && cd two
"$bin" "${args[@]}" --steps 2 --db a.db --ckpt-dir ck > a.txt 2>&1
"$bin" "${args[@]}" --steps 2 --seed 7 --db b.db --ckpt-dir ck > b.txt 2>&1
a=$(sqlite3 a.db "SELECT dir FROM checkpoints"); b=$(sqlite3 b.db "SELECT dir FROM checkpoints")
check "two stores' run 1: two folders ($a, $b)" [ -n "$a" -a -n "$b" -a "$a" != "$b" ]
check "store a's checkpoint is intact" bash -c "cd '$a' && sha256sum --quiet -c checksums.sha256"
check "store b's checkpoint is intact" bash -c "cd '$b' && sha256sum --quiet -c checksums.sha256"
# Forced onto one folder: the second run refuses to write over the first's checkpoint.
PPTRAIN_TEST_RUN_TAG=1234abcd "$bin" "${args[@]}" --steps 2 --db c.db --ckpt-dir same > c.txt 2>&1
sum_before=$(cat same/run-1-1234abcd/step-000002/*.safetensors | sha256sum)
PPTRAIN_TEST_RUN_TAG=1234abcd "$bin" "${args[@]}" --steps 2 --seed 9 --db d.db --ckpt-dir same > d.out 2> d.err
check "a folder another run's checkpoint holds: exit 2" [ $? -eq 2 ]
check "a folder another run's checkpoint holds: one line naming it" \
  grep -q "^pptrain: checkpoint .*same/run-1-1234abcd/step-000002: the folder already holds another run's checkpoint" d.err
check "a folder another run's checkpoint holds: its files unchanged" \
  [ "$(cat same/run-1-1234abcd/step-000002/*.safetensors | sha256sum)" = "$sum_before" ]
check "a folder another run's checkpoint holds: still sealed" \
  bash -c "cd same/run-1-1234abcd/step-000002 && sha256sum --quiet -c checksums.sha256"
cd "$work" || exit 1

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
