#!/usr/bin/env bash
# A checkpoint folder proves itself, and failed or killed checkpoints leave nothing behind:
#  - checksums.sha256 (sha256sum's format) covers every file, trainer_state.json included: a
#    one-digit edit of the state's step, adam_step or data index, or of the seal itself, makes
#    --resume DIR refuse with one line naming the file, exit 2; the untouched folder resumes;
#  - a state edited and sealed again (as sha256sum would) is range-checked field by field: a
#    negative or fractional step, a step past the run's end, adam_step past step, a data
#    cursor beyond the items its steps took: one line naming the field, exit 2;
#  - a folder written before the seal (no checksums.sha256) resumes with one warning line;
#  - a run whose newest checkpoint is damaged: `export RUN|latest` and `sample RUN|latest`
#    take its newest intact one with one note line naming both, exit 0; the damaged folder
#    named by hand, and a run with no intact checkpoint left, are refused with one line,
#    exit 2, nothing written; `train --resume RUN` still refuses and names the good one;
#  - a checkpoint that fails on a full disk after one shard was renamed leaves no file at all;
#  - on start, temporary files of gone writers in incomplete folders are removed (a live
#    writer's stay), and the store's 'writing' checkpoints of an ended run are marked failed
#    and, under --ckpt-dir, discarded.
# usage: cli_checkpoint_integrity.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

args=(train --data "$src/tests/fixtures/text" --model tiny --steps 4 --batch 8 --seq 64 --microbatches 2 --warmup 1)
"$bin" "${args[@]}" --ckpt-every 2 --ckpt-dir ck --db t.db > ref.txt 2>&1
check "reference run exits 0" [ $? -eq 0 ]
ck2=$(ckpt_of ck 1 2)
check "the checkpoint is sealed: sha256sum -c passes" bash -c "cd $ck2 && sha256sum --quiet -c checksums.sha256"
check "the seal lists trainer_state.json" grep -q '  trainer_state.json$' "$ck2/checksums.sha256"

# resealed NAME SED-EXPR WANT: a copy of the step-2 folder with one edit to its state and its
# seal made again, resumed by folder: refused with one line matching WANT.
resealed() {
  local name=$1 expr=$2 want=$3
  rm -rf "$name" && cp -r "$ck2" "$name"
  sed -i "$expr" "$name/trainer_state.json"
  (cd "$name" && sha256sum $(awk '{print $2}' checksums.sha256) > seal.new && mv seal.new checksums.sha256)
  "$bin" train --resume "$name" --steps 6 --db t.db > "$name.out" 2> "$name.err"
  local rc=$?
  check "$name: exit 2 (got $rc)" [ $rc -eq 2 ]
  check "$name: one line naming the field" grep -qE "^pptrain: .*$want" "$name.err"
  check "$name: nothing else on stderr" [ "$(wc -l < "$name.err")" -eq 1 ]
}
resealed step-negative 's/"step":\t2,/"step":\t-1,/' '"step" is -1, not a whole number'
resealed step-fraction 's/"step":\t2,/"step":\t1.5,/' '"step" is 1.5, not a whole number'
resealed step-past-end 's/"step":\t2,/"step":\t400,/' '"step" 400 lies past the run.s 4 steps'
resealed adam-past-step 's/"adam_step":\t2,/"adam_step":\t3,/' '"adam_step" 3 exceeds "step" 2'
resealed cursor-far 's/"index":\t"16"/"index":\t"99999999999"/' 'data_cursor \(epoch 0, index 99999999999\) lies beyond'
rm -rf resealed-same && cp -r "$ck2" resealed-same
(cd resealed-same && sha256sum $(awk '{print $2}' checksums.sha256) > seal.new && mv seal.new checksums.sha256)
"$bin" train --resume resealed-same --steps 6 --db t.db > resealed-same.out 2>&1
check "a state sealed again unchanged resumes" [ $? -eq 0 ]

# tampered NAME SED-EXPR: a copy of the step-2 folder with one edit, resumed by folder.
tampered() {
  local name=$1 expr=$2
  rm -rf "$name" && cp -r "$ck2" "$name"
  sed -i "$expr" "$name/trainer_state.json"
  check "$name: the edit changed the file" bash -c "! cmp -s $ck2/trainer_state.json $name/trainer_state.json"
  "$bin" train --resume "$name" --steps 6 --db t.db > "$name.out" 2> "$name.err"
  check "$name: exit 2" [ $? -eq 2 ]
  check "$name: one line on stderr" [ "$(wc -l < "$name.err")" -eq 1 ]
  check "$name: names trainer_state.json and the seal" \
    grep -q "trainer_state.json: sha256 does not match checksums.sha256" "$name.err"
}
tampered step 's/^\t"step":\t2,/\t"step":\t3,/'
tampered adam 's/"adam_step":\t2/"adam_step":\t3/'
tampered index 's/"index":\t"16"/"index":\t"17"/'

rm -rf seal && cp -r "$ck2" seal
sed -i '1s/^./0/; 1s/^0/1/' seal/checksums.sha256   # one hex digit of the first line
"$bin" train --resume seal --steps 6 --db t.db > seal.out 2> seal.err
check "edited seal: exit 2, one line naming the file" \
  bash -c "[ \$(wc -l < seal.err) -eq 1 ] && grep -q 'sha256 does not match checksums.sha256' seal.err"

"$bin" train --resume "$ck2" --steps 6 --db t.db > good.out 2> good.err
check "the untouched folder resumes (exit 0)" [ $? -eq 0 ]
check "the untouched folder: nothing on stderr" [ ! -s good.err ]

rm -rf legacy && cp -r "$ck2" legacy && rm legacy/checksums.sha256
"$bin" train --resume legacy --steps 6 --db t.db > legacy.out 2> legacy.err
check "a folder from before the seal resumes (exit 0)" [ $? -eq 0 ]
check "a folder from before the seal: one warning line" \
  bash -c "[ \$(wc -l < legacy.err) -eq 1 ] && grep -q '^pptrain: warning: legacy has no checksums.sha256' legacy.err"

# A run whose newest checkpoint (step 4) is damaged: export and sample of the run take step 2.
"$bin" "${args[@]}" --ckpt-every 2 --ckpt-dir dmg --db dmg.db > dmg.out 2>&1
dmg4=$(sqlite3 dmg.db 'SELECT dir FROM checkpoints WHERE step = 4')
dmg2=$(sqlite3 dmg.db 'SELECT dir FROM checkpoints WHERE step = 2')
shard=model-00001-of-00001.safetensors
size=$(stat -c %s "$dmg4/$shard")
"$bin" export "$dmg2" by-folder > /dev/null 2>&1
new_ids() { sed 's/.*"ids":\[\([0-9,]*\)\].*/\1/' "$1"; }   # the new ids of sample --json
# one_error FILE WANT: FILE is one line and matches WANT (grep).
one_error() { [ "$(wc -l < "$1")" -eq 1 ] && grep -q "$2" "$1"; }
"$bin" sample "$dmg2" --prompt "The " --tokens 8 --json > sample-good.out 2> /dev/null
truncate -s 100 "$dmg4/$shard"
note="pptrain: note: $dmg4 is damaged ($shard has 100 bytes, the manifest says $size)"
for run in latest 1; do
  "$bin" export "$run" "exp-$run" --db dmg.db > "exp-$run.out" 2> "exp-$run.err"
  rc=$?
  check "export $run, its newest checkpoint damaged: exit 0 (got $rc)" [ $rc -eq 0 ]
  check "export $run: one note line naming both folders" [ "$(cat "exp-$run.err")" = "$note; exporting $dmg2" ]
  check "export $run: says it exported the step-2 checkpoint" grep -q "^exported $dmg2: " "exp-$run.out"
  check "export $run: the weights of exporting the step-2 folder" \
    cmp -s by-folder/model.safetensors "exp-$run/model.safetensors"
done
"$bin" sample latest --db dmg.db --prompt "The " --tokens 8 --json > sample-dmg.out 2> sample-dmg.err
rc=$?
check "sample latest, its newest checkpoint damaged: exit 0 (got $rc)" [ $rc -eq 0 ]
check "sample latest: one note line naming both folders" [ "$(cat sample-dmg.err)" = "$note; sampling from $dmg2" ]
good_ids=$(new_ids sample-good.out)
check "sample of the step-2 folder: 8 ids ($good_ids)" [ "$(echo "$good_ids" | tr ',' '\n' | wc -l)" -eq 8 ]
check "sample latest: the step-2 checkpoint's ids" [ "$(new_ids sample-dmg.out)" = "$good_ids" ]
"$bin" export "$dmg4" exp-folder > exp-folder.out 2> exp-folder.err
rc=$?
check "export of the damaged folder named by hand: exit 2 (got $rc)" [ $rc -eq 2 ]
check "export of the damaged folder: one line naming the good one" \
  one_error exp-folder.err "^pptrain: checkpoint $dmg4 is damaged: .*the newest good one is $dmg2"
check "export of the damaged folder: nothing written" [ ! -e exp-folder ]
"$bin" train --resume 1 --db dmg.db --steps 6 > dmg-resume.out 2>&1
rc=$?
check "train --resume RUN still refuses its damaged newest checkpoint: exit 2 (got $rc)" [ $rc -eq 2 ]
check "train --resume RUN: one line naming the good one" one_error dmg-resume.out "the newest good one is $dmg2"
truncate -s 100 "$dmg2/$shard"
"$bin" export 1 exp-none --db dmg.db > exp-none.out 2> exp-none.err
rc=$?
check "export, no intact checkpoint left: exit 2 (got $rc)" [ $rc -eq 2 ]
check "export, no intact checkpoint left: one line" one_error exp-none.err 'the run has no good checkpoint$'
check "export, no intact checkpoint left: nothing written" [ ! -e exp-none ]
"$bin" sample 1 --db dmg.db --prompt hi > sample-none.out 2> sample-none.err
rc=$?
check "sample, no intact checkpoint left: exit 2 (got $rc)" [ $rc -eq 2 ]
check "sample, no intact checkpoint left: one line" one_error sample-none.err 'the run has no good checkpoint$'

# A full disk (a 2 MB file size limit; SIGXFSZ is ignored by pptrain): the 1.3 MB weights shard
# is written and renamed, the 2.6 MB optimizer shard fails. Nothing of the checkpoint stays.
(ulimit -f 2000; "$bin" "${args[@]}" --ckpt-dir full --db full.db > full.out 2> full.err)
check "full disk: exit 2" [ $? -eq 2 ]
check "full disk: the failing file and the cause on one line" \
  bash -c "[ \$(wc -l < full.err) -eq 1 ] && grep -q 'optimizer-00001-of-00001.safetensors.*File too large' full.err"
check "full disk: no temporary file, no shard, no folder left" [ -z "$(find full -mindepth 1 \! -type d)" ]
check "full disk: no step folder left" [ -z "$(find full -name 'step-*')" ]
check "full disk: checkpoint marked failed" [ "$(sqlite3 full.db 'SELECT status FROM checkpoints')" = failed ]

# Debris of killed checkpoints: an incomplete folder in the store (its run has ended) and one
# outside it, with temporary files of a gone writer, a plain .tmp, and a live writer's.
dead=999999
while kill -0 "$dead" 2>/dev/null; do dead=$((dead - 1)); done
mkdir -p ck/run-1/step-000099 ck/step-000050
cp "$ck2/model-00001-of-00001.safetensors" ck/run-1/step-000099/
touch "ck/run-1/step-000099/optimizer-00001-of-00001.safetensors.$dead.tmp"
touch "ck/step-000050/model-00001-of-00001.safetensors.$dead.tmp" ck/step-000050/config.json.tmp \
      "ck/step-000050/optimizer-00001-of-00001.safetensors.$$.tmp"
touch "$ck2/stray.$dead.tmp"   # a complete folder is not touched
mkdir -p ck/run-5-0badf00d/step-000003   # killed in its first checkpoint: only a temporary file
touch "ck/run-5-0badf00d/step-000003/model-00001-of-00001.safetensors.$dead.tmp"
mkdir -p ck/run-6-0badf00d/step-000004   # a live writer's fresh folder, not yet with a file
mkdir -p elsewhere/step-000007   # abandoned too, but outside this run's --ckpt-dir
cp "$ck2/model-00001-of-00001.safetensors" elsewhere/step-000007/
touch "elsewhere/step-000007/optimizer-00001-of-00001.safetensors.$dead.tmp"
sqlite3 t.db "INSERT INTO checkpoints (run_id, step, dir, created_at, status) VALUES
              (1, 99, 'ck/run-1/step-000099', datetime('now'), 'writing'),
              (1, 7, 'elsewhere/step-000007', datetime('now'), 'writing')"
"$bin" "${args[@]}" --ckpt-dir ck --db t.db > clean.out 2> clean.err
check "a run with debris under its --ckpt-dir exits 0" [ $? -eq 0 ]
check "the store's abandoned checkpoint: folder removed" [ ! -e ck/run-1/step-000099 ]
check "the store's abandoned checkpoint: marked failed" \
  [ "$(sqlite3 t.db 'SELECT status FROM checkpoints WHERE step = 99')" = failed ]
check "outside --ckpt-dir: the shard stays, the gone writer's temporary file does not" \
  bash -c "[ -e elsewhere/step-000007/model-00001-of-00001.safetensors ] && [ -z \"\$(ls elsewhere/step-000007/*.tmp 2>/dev/null)\" ]"
check "no 'writing' checkpoint is left in the store" \
  [ "$(sqlite3 t.db "SELECT count(*) FROM checkpoints WHERE status = 'writing'")" -eq 0 ]
check "a gone writer's temporary file is removed" [ ! -e "ck/step-000050/model-00001-of-00001.safetensors.$dead.tmp" ]
check "a plain .tmp file is removed" [ ! -e ck/step-000050/config.json.tmp ]
check "a live writer's temporary file stays" [ -e "ck/step-000050/optimizer-00001-of-00001.safetensors.$$.tmp" ]
check "a complete folder is left as it is" [ -e "$ck2/stray.$dead.tmp" ]
check "a killed run's folder with only a gone writer's file: removed, step and run folders" [ ! -e ck/run-5-0badf00d ]
check "the abandoned checkpoint's emptied run folder: removed" [ ! -e ck/run-1 ]
check "an empty step folder (a live writer's, just made): stays" [ -d ck/run-6-0badf00d/step-000004 ]
check "the store passes integrity_check" [ "$(sqlite3 t.db 'PRAGMA integrity_check')" = ok ]

cli_finish
