#!/usr/bin/env bash
# Checkpoints under mpirun without a shared filesystem (each rank's --ckpt-dir is its own
# folder, as a node-local disk would be: `sh -c 'exec pptrain ... --ckpt-dir node$RANK'`):
#  - each rank's folder holds its own stages' shards and nothing of the other rank's, plus the
#    same index, config.json, seal and trainer_state.json as rank 0's;
#  - the store's manifest has every shard with the sha256 of the file its rank wrote;
#  - resuming each rank from its own folder continues with bitwise the losses of the run that
#    was never interrupted, at P = 2 and at P = 2 x D = 2 (the replicas write their copies);
#  - a layout that needs another rank's shard is refused with one line per rank, exit 2; a
#    damaged shard is found when its rank reads it; a rank that cannot write its shard fails
#    the checkpoint in every folder;
#  - one shared --ckpt-dir still gets one complete folder, written once.
# usage: cli_checkpoint_nodelocal.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"

if ! command -v mpirun > /dev/null; then
  echo "skipped: no mpirun"
  exit 0
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
mpi=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
args=(--data "$src/tests/fixtures/text" --model tiny --steps 8 --batch 8 --seq 32 --microbatches 2 --stages 2
      --schedule 1f1b --lr 3e-3 --warmup 2 --timeout 60 --transport mpi)
# each NP PPTRAIN-ARGS...: mpirun -np NP, each rank through sh with @R in its arguments replaced by
# its rank, as a user gives each node its own disk: sh -c 'exec pptrain ... --ckpt-dir /local/ck'.
each() {
  local np=$1; shift
  # shellcheck disable=SC2016
  "${mpi[@]}" -np "$np" sh -c 'bin=$1; shift
    for a do set -- "$@" "$(printf %s "$a" | sed "s/@R/$OMPI_COMM_WORLD_RANK/g")"; shift; done
    exec "$bin" "$@"' sh "$bin" "$@"
}
losses() { sqlite3 "$1" "SELECT step, printf('%.17g', loss) FROM steps WHERE run_id = $2 ORDER BY step"; }
same_losses() { [ -s "$2" ] && [ -z "$(comm -13 <(sort "$1") <(sort "$2"))" ]; }

each 2 train "${args[@]}" --ckpt-every 4 --db ref.db --ckpt-dir node@R > ref.txt 2>&1 < /dev/null
check "P=2, node-local folders: exits 0" [ $? -eq 0 ]
ck=$(basename "$(dirname "$(ckpt_of node0 1 4)")")/step-000004   # run-1-<tag>/step-000004, in both
losses ref.db 1 > ref.losses
check "P=2: 8 losses recorded" [ "$(wc -l < ref.losses)" -eq 8 ]
check "rank 0's folder: stage 0's shards, not stage 1's" \
  bash -c "[ -f node0/$ck/model-00001-of-00002.safetensors ] && [ ! -e node0/$ck/model-00002-of-00002.safetensors ]"
check "rank 1's folder: stage 1's shards, not stage 0's" \
  bash -c "[ -f node1/$ck/optimizer-00002-of-00002.safetensors ] && [ ! -e node1/$ck/optimizer-00001-of-00002.safetensors ]"
for f in trainer_state.json checksums.sha256 config.json model.safetensors.index.json; do
  check "both folders: the same $f" cmp -s "node0/$ck/$f" "node1/$ck/$f"
done
check "no temporary file is left" [ -z "$(find node0 node1 -name '*.tmp')" ]
check "each folder's seal holds for the files it has" \
  bash -c "(cd node0/$ck && sha256sum --quiet --ignore-missing -c checksums.sha256) &&
           (cd node1/$ck && sha256sum --quiet --ignore-missing -c checksums.sha256)"

# The store: 7 files per checkpoint (the seal is not among them), each shard with the sha256 of its rank's file.
check "store: 2 complete checkpoints of 7 files" \
  [ "$(sqlite3 ref.db "SELECT count(*) FROM checkpoint_files f JOIN checkpoints c ON c.id = f.checkpoint_id
                       WHERE c.status = 'complete'")" -eq 14 ]
for s in 1 2; do
  for kind in model optimizer; do
    name=$kind-0000$s-of-00002.safetensors
    want=$(sha256sum "node$((s - 1))/$ck/$name" | cut -d' ' -f1)
    got=$(sqlite3 ref.db "SELECT f.sha256 FROM checkpoint_files f JOIN checkpoints c ON c.id = f.checkpoint_id
                          WHERE c.step = 4 AND f.path = '$name'")
    check "store: $name has rank $((s - 1))'s sha256" [ "$want" = "$got" ]
  done
done

# Resume each rank from its own folder: bitwise the reference's losses for steps 5..8.
each 2 train --resume node@R/$ck --transport mpi --db ref.db --ckpt-dir node@R > resume.txt 2>&1 < /dev/null
check "resume from each rank's own folder: exit 0" [ $? -eq 0 ]
losses ref.db 2 > resume.losses
check "resume: 4 losses" [ "$(wc -l < resume.losses)" -eq 4 ]
check "resume: losses bitwise equal to the uninterrupted run" same_losses ref.losses resume.losses
check "resume: its final checkpoint in both folders" \
  bash -c "[ -f $(ckpt_of node0 2 8)/trainer_state.json ] && [ -f $(ckpt_of node1 2 8)/trainer_state.json ]"

# Another layout needs the other rank's shards: one line per rank, exit 2.
each 2 train --resume node@R/$ck --transport mpi --db '' --stages 1 --dp 2 --microbatches 1 \
  > other.out 2> other.err < /dev/null
check "another layout from node-local folders: exit 2" [ $? -eq 2 ]
check "another layout: each rank says which shard it lacks, on one line" \
  [ "$(grep -c '^pptrain: node.*model-0000.-of-00002.safetensors is not in this folder and this process needs it' \
        other.err)" -eq 2 ]

# Rank 1 cannot put its shard in place (a folder already has the name, so the rename fails):
# the run fails with rank 1's line, and neither folder keeps a file of the checkpoint.
mkdir -p full1/run-1-0000abcd/step-000004/model-00002-of-00002.safetensors
PPTRAIN_TEST_RUN_TAG=abcd each 2 train "${args[@]}" --ckpt-every 4 --db full.db --ckpt-dir full@R > full.out 2> full.err < /dev/null
check "rank 1 cannot write: exit 2" [ $? -eq 2 ]
check "rank 1 cannot write: its line names its shard and the cause" \
  grep -q '^pptrain: .*full1/run-1-0000abcd/step-000004/model-00002-of-00002.safetensors: rename failed: Is a directory' full.err
check "rank 1 cannot write: no checkpoint file in either folder" [ -z "$(find full0 full1 -type f)" ]
check "rank 1 cannot write: the checkpoint is marked failed" \
  [ "$(sqlite3 full.db 'SELECT status FROM checkpoints')" = failed ]

# A damaged shard is found by the rank that reads it.
rm -rf dmg0 dmg1 && cp -r node0 dmg0 && cp -r node1 dmg1
printf '\x01' | dd of="dmg1/$ck/optimizer-00002-of-00002.safetensors" bs=1 seek=3000 conv=notrunc status=none
each 2 train --resume dmg@R/$ck --transport mpi --db '' > dmg.out 2> dmg.err < /dev/null
check "a damaged shard: exit 2" [ $? -eq 2 ]
check "a damaged shard: rank 1 names it" \
  grep -q "^pptrain: dmg1/$ck: optimizer-00002-of-00002.safetensors: sha256 does not match the manifest" dmg.err

# P = 2 x D = 2, four node-local folders: the replicas write their own copies and resume.
each 4 train "${args[@]}" --dp 2 --ckpt-every 4 --db dp.db --ckpt-dir dp@R > dp.txt 2>&1 < /dev/null
check "P=2 D=2, node-local folders: exits 0" [ $? -eq 0 ]
ck=$(basename "$(dirname "$(ckpt_of dp0 1 4)")")/step-000004   # this run's folder, in all four
check "P=2 D=2: replica 1's folders hold their stages' shards" \
  bash -c "[ -f dp2/$ck/model-00001-of-00002.safetensors ] && [ -f dp3/$ck/optimizer-00002-of-00002.safetensors ] &&
           [ ! -e dp3/$ck/model-00001-of-00002.safetensors ]"
check "P=2 D=2: replica 1's copies equal replica 0's" \
  bash -c "cmp -s dp0/$ck/model-00001-of-00002.safetensors dp2/$ck/model-00001-of-00002.safetensors &&
           cmp -s dp1/$ck/optimizer-00002-of-00002.safetensors dp3/$ck/optimizer-00002-of-00002.safetensors"
losses dp.db 1 > dp.losses
each 4 train --resume dp@R/$ck --transport mpi --db dp.db > dp-resume.txt 2>&1 < /dev/null
check "P=2 D=2: resume from each rank's own folder: exit 0" [ $? -eq 0 ]
losses dp.db 2 > dp-resume.losses
check "P=2 D=2: resumed losses bitwise equal to the uninterrupted run" same_losses dp.losses dp-resume.losses

# One shared folder (the default case): one complete folder, written once, that resumes.
"${mpi[@]}" -np 2 "$bin" train "${args[@]}" --ckpt-every 4 --db shared.db --ckpt-dir shared > shared.txt 2>&1
check "shared folder: exits 0" [ $? -eq 0 ]
ck=$(basename "$(dirname "$(ckpt_of shared 1 4)")")/step-000004
check "shared folder: all 8 files, sealed" \
  bash -c "[ \$(ls shared/$ck | wc -l) -eq 8 ] && (cd shared/$ck && sha256sum --quiet -c checksums.sha256)"
check "shared folder: no temporary file" [ -z "$(find shared -name '*.tmp')" ]
check "shared folder: the same losses as node-local ones" cmp -s ref.losses <(losses shared.db 1)
# P = 2 x D = 2 in one shared folder: the replicas see replica 0's shards (by inode and mtime,
# without reading them) and write nothing: every shard is older than trainer_state.json.
"${mpi[@]}" -np 4 "$bin" train "${args[@]}" --dp 2 --ckpt-every 4 --db '' --ckpt-dir shared-dp > shared-dp.txt 2>&1
check "shared folder, P=2 D=2: exits 0" [ $? -eq 0 ]
sdp=$(ckpt_of shared-dp '' 4)
check "shared folder, P=2 D=2: all 8 files, sealed" \
  bash -c "[ \$(ls $sdp | wc -l) -eq 8 ] && (cd $sdp && sha256sum --quiet -c checksums.sha256)"
check "shared folder, P=2 D=2: no shard rewritten after the state" \
  [ -z "$(find "$sdp" -name '*.safetensors' -newer "$sdp/trainer_state.json")" ]
"$bin" train --resume "shared/$ck" --db shared.db > shared-resume.txt 2>&1
check "shared folder: resumes in one process (exit 0)" [ $? -eq 0 ]
losses shared.db 2 > shared-resume.losses
check "shared folder: resumed losses bitwise equal" same_losses ref.losses shared-resume.losses

if [ "$failed" -ne 0 ]; then
  for f in "$work"/*.txt "$work"/*.err; do echo "== $f"; cat "$f"; done
fi
cli_finish
