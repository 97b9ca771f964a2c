#!/usr/bin/env bash
# Bad input to `pptrain train`: each case must print exactly one line on stderr that names
# the problem, exit with code 2, and leave nothing behind in the working directory.
# usage: cli_train_errors.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"

mkdir data
printf 'A small document about pipelines.\n\nAnother one about bubbles.\n' > data/ok.txt
# llm.c shards: 256 int32 header words, then the tokens.
python_free_shard() {   # path magic version count body_tokens(uint16)
  local path=$1 magic=$2 version=$3 count=$4 body=$5
  { printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((magic & 255)) $((magic >> 8 & 255)) $((magic >> 16 & 255)) $((magic >> 24 & 255)))"
    printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((version & 255)) 0 0 0)"
    printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((count & 255)) $((count >> 8 & 255)) 0 0)"
    head -c $((1024 - 12)) /dev/zero
    head -c $((body * 2)) /dev/zero; } > "$path"
}
python_free_shard bad_magic.bin 12345 1 100 100
python_free_shard truncated.bin 20240520 1 100 10
# A random .bin is named as no shard before any advice about shards (pad batching, mixed folders).
mkdir rand_bin mixed_bin && head -c 5000 /dev/urandom > rand_bin/rand.bin && cp rand_bin/rand.bin mixed_bin/
printf 'A document.\n' > mixed_bin/notes.txt
printf '{"hidden_size": 60, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 259}' > hidden_heads.json
printf '{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3, "vocab_size": 259}' > heads_kv.json
printf '{"hidden_size": 64,' > broken.json
printf '0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n' > incomplete.csv
printf '0F0,0F1,0X1\n' > malformed.csv
printf 'not a folder' > plain_file
printf '{"hidden_size": 1000000000, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 259}' > hidden_1e9.json
before=$(ls -A | sort | tr '\n' ' ')

expect_error() {   # expect_error "what it should mention" args...
  local want=$1
  shift
  "$bin" train "$@" >stdout.txt 2>stderr.txt
  local code=$?
  local lines
  lines=$(wc -l < stderr.txt)
  if [ "$code" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" stderr.txt && [ ! -s stdout.txt ]; then
    pass
  else
    fail "pptrain train $* -> exit $code, $lines stderr lines (want 2, 1 line mentioning '$want')"
    cat stderr.txt
  fi
  rm -f stdout.txt stderr.txt
}

expect_error "unknown option '--frobnicate'" --data data --frobnicate 3
expect_error "--steps: 'ten' is not an integer" --data data --steps ten
expect_error "--steps: '12x' is not an integer" --data data --steps 12x
expect_error "--lr: 'fast' is not a number" --data data --lr fast
expect_error "--batch: 0 is out of range" --data data --batch 0
expect_error "--seq needs a value" --data data --seq
expect_error "--data PATH is required" --steps 2
expect_error "nowhere" --data nowhere/at/all.txt
expect_error "bad_magic.bin" --data bad_magic.bin --batching pack
expect_error "truncated.bin" --data truncated.bin --batching pack
expect_error "rand_bin/rand.bin: .*not an llm.c token shard" --data rand_bin
expect_error "mixed_bin/rand.bin: .*not an llm.c token shard" --data mixed_bin
expect_error "bad_magic.bin: wrong magic" --data bad_magic.bin
expect_error "not divisible by --microbatches" --data data --batch 6 --microbatches 4
expect_error "exceeds the model's max_position_embeddings" --data data --seq 100000
expect_error "hidden_size (60) is not divisible by num_attention_heads (8)" --data data --model hidden_heads.json
expect_error "num_attention_heads (4) is not divisible by num_key_value_heads (3)" --data data --model heads_kv.json
expect_error "broken.json: not a JSON object" --data data --model broken.json
expect_error "unknown preset 'huge'" --data data --model huge
expect_error "--batching: 'zip' is not pad or pack" --data data --batching zip
# pipeline layouts and schedules
expect_error "cannot split 8 layers into 9 stages" --data data --stages 3 --schedule interleaved-1f1b --virtual 3 --microbatches 3 --batch 6
expect_error "zb-v runs exactly 2 stages per rank" --data data --stages 2 --schedule zb-v --virtual 3 --microbatches 4 --batch 8
expect_error "cannot split 8 layers into 9 stages" --data data --stages 9
expect_error "dualpipe-v needs at least 1 microbatch per stage: 4 ranks x 2 stages need M >= 8, not 4; use --microbatches 8 or more, or --stages 2 or fewer for 4 microbatches" --data data --stages 4 --schedule dualpipe-v --microbatches 4 --batch 8
expect_error "interleaved-zb needs the microbatches to be a multiple of max(1, M / P) = 2" --data data --stages 4 --schedule interleaved-zb --microbatches 9 --batch 9
expect_error "incomplete.csv: stage 0, microbatch 1 has no backward" --data data --stages 2 --microbatches 2 --batch 4 --schedule incomplete.csv
expect_error "malformed.csv:1:9: bad action '0X1'" --data data --microbatches 2 --batch 4 --schedule malformed.csv
expect_error "unknown schedule 'warp'" --data data --schedule warp
expect_error "--split '3,3,2': 3 counts for 4 stages" --data data --stages 4 --split 3,3,2
expect_error "--stages: 0 is out of range" --data data --stages 0
expect_error "--device: 'tpu' is not cpu or cuda" --data data --device tpu
# One line and exit 2 on every machine: without a GPU it says why none is usable (no driver,
# no device, a build without the toolkit); with one, that recompute is CPU-only.
expect_error "--device cuda: " --data data --device cuda --recompute all
"$bin" train --data data --device cuda --db '' > /dev/null 2> stderr.txt
if grep -q "(cudaError" stderr.txt; then   # a build with the toolkit on a machine without a GPU
  check "no GPU: the reason in plain words ($(cat stderr.txt))" \
    bash -c "grep -qE 'NVIDIA (driver|GPU)' stderr.txt && ! grep -q 'driver version is insufficient' stderr.txt"
fi
rm -f stderr.txt
expect_error "--precision bf16 is for GPU stages" --data data --precision bf16
expect_error "--precision: 'fp16' is not bf16 or fp32" --data data --precision fp16
expect_error "--transport nccl moves GPU memory: it needs --device cuda" --data data --transport nccl
expect_error "--resume and --init-from exclude each other" --resume 1 --init-from x --db ''
expect_error "--resume 1 needs the run store" --resume 1 --db ''
expect_error "nowhere does not exist (deleted or moved?); give a run id, latest, or a checkpoint folder" --resume nowhere --db ''
expect_error "--init-from: " --data data --init-from nowhere --db ''
# impossible optimizer values (AdamW divides by sqrt(v) + eps: eps 0 is NaN from step 2)
expect_error "--eps 0: AdamW needs a positive number" --data data --eps 0
expect_error "--eps: -1 is out of range" --data data --eps -1
expect_error "--lr: -0.1 is out of range" --data data --lr -0.1
expect_error "--beta1: 1 is out of range" --data data --beta1 1
expect_error "--beta2: 1.5 is out of range" --data data --beta2 1.5
# every output path is checked before step 1, before the store records a run
expect_error "--ckpt-dir plain_file: plain_file is not a folder" --data data --ckpt-dir plain_file
expect_error "--ckpt-dir plain_file/sub: plain_file is not a folder" --data data --ckpt-dir plain_file/sub
expect_error "--ckpt-dir /proc/pptrain-ckpt: cannot write in /proc" --data data --ckpt-dir /proc/pptrain-ckpt
if [ "$(id -u)" -ne 0 ]; then   # root writes through permission bits
  mkdir read_only && chmod 555 read_only
  expect_error "--ckpt-dir read_only/ck: cannot write in read_only" --data data --ckpt-dir read_only/ck
  rmdir read_only
fi
expect_error "--trace /nonexistent/t.json: no folder /nonexistent" --data data --trace /nonexistent/t.json
expect_error "--trace plain_file/t.json: plain_file is not a folder" --data data --trace plain_file/t.json
expect_error "--trace .: a folder, not a file" --data data --trace .
expect_error "--db .: a folder, not a file" --data data --db .
# sizes no machine here can hold: refused before the allocation, saying need and have
expect_error "this run needs at least .* GiB .* available" --data data --batch 1000000
expect_error "this run needs at least .* GiB .* available" --data data --model hidden_1e9.json

# --transport mpi without mpirun: said before MPI starts (no singleton world, no leak in it).
expect_error "--transport mpi needs mpirun: start every rank with it" --data data --transport mpi
"$bin" console --transport mpi --steps 30 --db '' < /dev/null > stdout.txt 2> stderr.txt
code=$?
if [ $code -eq 2 ] && [ "$(wc -l < stderr.txt)" -eq 1 ] && grep -q "needs mpirun" stderr.txt; then pass
else fail "console --transport mpi without mpirun -> exit $code: $(cat stderr.txt)"; fi
rm -f stdout.txt stderr.txt

# Errors name their cause (issue 29): a folder or a missing file where a file is wanted, a
# file too large for what it should be, an integer out of range, a warmup the user never set.
mkdir folder.csv
expect_error "--min-lr 0.01 exceeds --lr 0.001" --data data --lr 1e-3 --min-lr 1e-2
"$bin" --version extra > stdout.txt 2> stderr.txt
code=$?
check "--version with something after it: exit 2, one line" \
  bash -c "[ $code -eq 2 ] && [ ! -s stdout.txt ] && [ \$(wc -l < stderr.txt) -eq 1 ] && grep -q 'takes nothing after it' stderr.txt"
rm -f stdout.txt stderr.txt
expect_error "--schedule: folder.csv is a folder, not a file" --data data --schedule folder.csv
expect_error "--schedule: none.csv: no such file" --data data --schedule none.csv
truncate -s 17M huge.json
expect_error "huge.json: 17.0 MiB, more than a config.json may hold (16 MiB)" --data data --model huge.json
mkdir noconfig
expect_error "--init-from: noconfig/config.json: no such file" --data data --init-from noconfig
rmdir noconfig
sed 's/"vocab_size": *[0-9]*/"vocab_size": 2147483648/' "$src/tests/fixtures/hf_workflow/model/config.json" > vocab31.json
expect_error '"vocab_size" 2147483648 is out of range' --data data --model vocab31.json
rm -rf folder.csv huge.json vocab31.json
setsid "$bin" console --steps 5 --db '' < /dev/null > /dev/null 2> stderr.txt   # no terminal: it stops there
check "console --steps 5: the console's default warmup (20) shrinks; what stops it is the missing terminal" \
  bash -c "grep -q 'needs a terminal' stderr.txt && ! grep -q warmup stderr.txt"
# export: a typo is not a damaged checkpoint; a deleted checkpoint folder is gone, not damaged.
"$bin" export NO-SUCH-FOLDER out > /dev/null 2> stderr.txt
check "export of a missing folder says so" grep -q "NO-SUCH-FOLDER does not exist (deleted or moved?); give a run id, latest, or a checkpoint folder" stderr.txt
"$bin" train --data data --steps 2 --warmup 1 --db gone.db --ckpt-dir gone-ck > /dev/null 2>&1
# export into a folder that holds anything (a hidden file too): one line, exit 2, the folder as
# it was; an empty folder and a new path take the export.
mkdir cfgonly hidden empty
echo '{"mine":1}' > cfgonly/config.json
touch hidden/.keep
for folder in cfgonly hidden; do
  entry=$(ls -A "$folder")
  "$bin" export 1 "$folder" --db gone.db > stdout.txt 2> stderr.txt
  rc=$?
  check "export into $folder (holding $entry): exit 2 (got $rc)" [ $rc -eq 2 ]
  check "export into $folder: one line naming $entry" \
    [ "$(cat stderr.txt)" = "pptrain: $folder/$entry already exists (export into a new or empty folder)" ]
  check "export into $folder: nothing written" [ "$(ls -A "$folder")" = "$entry" ]
  check "export into $folder: nothing on stdout" [ ! -s stdout.txt ]
done
check "export into cfgonly: the user's config.json unchanged" [ "$(cat cfgonly/config.json)" = '{"mine":1}' ]
"$bin" export 1 empty --db gone.db > /dev/null 2>&1
check "export into an empty folder exits 0" [ $? -eq 0 ]
check "export into an empty folder writes it" [ "$(ls -A empty | tr '\n' ' ')" = "config.json model.safetensors " ]
"$bin" export 1 new/sub --db gone.db > /dev/null 2>&1
check "export into a new path exits 0" [ $? -eq 0 ]
check "export into a new path writes it" [ -s new/sub/model.safetensors ]
rm -rf cfgonly hidden empty new stdout.txt
rm -rf gone-ck/*/step-000002
"$bin" export latest out --db gone.db > /dev/null 2> stderr.txt
check "export of a run whose checkpoint folder was deleted: gone, not damaged" \
  grep -q "step-000002 (run 1, step 2) is gone: .*step-000002 does not exist (deleted or moved?)" stderr.txt
rm -rf gone.db* gone-ck out
"$bin" train --data data --steps 5 --warmup 6 --db '' > /dev/null 2> stderr.txt
check "a warmup the user gave is still held to --steps" grep -q -- "--warmup 6 exceeds --steps 5" stderr.txt
rm -f stderr.txt

# A flag that would do nothing without its partner is refused in one line that names what it
# needs (console/run_options.c: refuse_inert); with the partner, or inheriting it on --resume
# or from the console's defaults, it is not.
expect_line() {   # expect_line "the exact line, after 'pptrain: '" args...
  local want=$1
  shift
  "$bin" train "$@" >stdout.txt 2>stderr.txt
  local code=$?
  if [ $code -eq 2 ] && [ "$(cat stderr.txt)" = "pptrain: $want" ] && [ ! -s stdout.txt ]; then pass
  else fail "pptrain train $* -> exit $code, stderr [$(cat stderr.txt)] (want 2 and 'pptrain: $want')"; fi
  rm -f stdout.txt stderr.txt
}
"$bin" plan --stages 2 --microbatches 2 --dump-csv > v1.csv
expect_line "--ckpt-every 2 needs --ckpt-dir DIR: without it no checkpoint is written" \
  --data data --ckpt-every 2 --steps 2 --db ''
expect_line "--val-every 2 needs --val-data PATH (or --data, a folder with llm.c _val_ shards): without it nothing is \
validated" --data data --val-every 2 --steps 2 --db ''
expect_line "--val-batches 3 needs --val-data PATH (or --data, a folder with llm.c _val_ shards): without it nothing \
is validated" --data data --val-batches 3 --steps 2 --db ''
expect_line "--sample-prompt needs --sample-every N: without it no sample is taken (train's default is none)" \
  --data data --sample-prompt hello --steps 2 --db ''
expect_line "--sample-tokens 8 needs --sample-every N: without it no sample is taken (train's default is none)" \
  --data data --sample-tokens 8 --sample-every 0 --steps 2 --db ''
expect_line "--virtual 2, but v1.csv has 2 stages on 2 ranks" --data data --schedule v1.csv --virtual 2 --db ''
expect_line "--virtual 2, but v1.csv has 2 stages on 2 ranks" --data data --schedule v1.csv --virtual 2 \
  --stages 2 --microbatches 2 --batch 4 --db ''
setsid "$bin" train --tui --data data --ckpt-every 2 --db '' < /dev/null > /dev/null 2> stderr.txt
check "train --tui --ckpt-every alone: the same one line, before the terminal is looked for" \
  [ "$(cat stderr.txt)" = "pptrain: --ckpt-every 2 needs --ckpt-dir DIR: without it no checkpoint is written" ]
setsid "$bin" console --steps 5 --ckpt-every 2 --sample-prompt x --sample-tokens 8 --db '' < /dev/null > /dev/null \
  2> stderr.txt
check "console --ckpt-every/--sample-prompt: its --ckpt-dir and --sample-every 25 serve; only the tty stops it" \
  [ "$(cat stderr.txt)" = "pptrain: the console needs a terminal: cannot open /dev/tty" ]
"$bin" train --data data --steps 2 --warmup 1 --db '' --ckpt-every 1 --ckpt-dir inert-ck --schedule v1.csv \
  --virtual 1 --batch 4 --sample-every 2 --sample-tokens 4 --sample-prompt "A " > stdout.txt 2> stderr.txt
check "--ckpt-every with --ckpt-dir, --virtual 1 with a V=1 CSV, samples with --sample-every: exit 0" \
  bash -c "[ $? -eq 0 ] && grep -q '^checkpoint step 1: ' stdout.txt && grep -q '^sample ' stdout.txt"
ck=$(ls -d inert-ck/run-*/step-000002)
"$bin" train --resume "$ck" --steps 3 --ckpt-every 1 --db '' > stdout.txt 2> stderr.txt
check "--resume with --ckpt-every alone: the run's --ckpt-dir is inherited, exit 0" \
  bash -c "[ $? -eq 0 ] && grep -q '^checkpoint step 3: .*inert-ck/' stdout.txt"
expect_line "--val-every 1 needs --val-data PATH (or --data, a folder with llm.c _val_ shards): without it nothing is \
validated" --resume "$ck" --steps 3 --val-every 1 --db ''
expect_line "--virtual 2, but v1.csv has 2 stages on 2 ranks" --resume "$ck" --steps 3 --virtual 2 --db ''
"$bin" plan --stages 2 --microbatches 4 --dump-csv > m4.csv
"$bin" train --resume "$ck" --steps 3 --schedule m4.csv --db '' > stdout.txt 2> stderr.txt
check "--resume onto another CSV: its M taken, as a fresh run takes it (the checkpoint's was 2)" \
  bash -c "[ $? -eq 0 ] && grep -q ', 4 microbatches,' stdout.txt"
"$bin" train --resume "$ck" --steps 3 --val-data data --val-every 1 --db '' > stdout.txt 2> stderr.txt
check "--resume with --val-data: the command line's validation runs (the checkpoint keeps none)" \
  grep -q '^val      3 | val loss' stdout.txt
mkdir heldout
python_free_shard heldout/d_train_000000.bin 20240520 1 600 600
python_free_shard heldout/d_val_000000.bin 20240520 1 600 600
"$bin" train --data heldout --batching pack --seq 16 --batch 2 --steps 1 --val-every 1 --val-batches 1 --db '' \
  > stdout.txt 2> stderr.txt
check "--val-every with --data holding _val_ shards: validated, exit 0" \
  bash -c "[ $? -eq 0 ] && grep -q '^val      1 | val loss' stdout.txt"
rm -rf v1.csv m4.csv inert-ck heldout stdout.txt stderr.txt

after=$(ls -A | sort | tr '\n' ' ')
if [ "$before" = "$after" ]; then pass; else fail "files appeared: before [$before] after [$after]"; fi

"$bin" frobnicate >/dev/null 2>stderr.txt; code=$?
if [ $code -eq 2 ] && grep -q "unknown command 'frobnicate'" stderr.txt; then pass; else fail "unknown command -> exit $code"; fi
rm -f stderr.txt

# watch on a store of a newer schema: refused at once, as history refuses it, not waited on.
"$bin" train --data data --steps 2 --warmup 1 --db newer.db > /dev/null 2>&1
sqlite3 newer.db 'PRAGMA user_version = 999'
timeout 20 "$bin" watch --db newer.db < /dev/null > /dev/null 2> stderr.txt; code=$?
if [ $code -eq 2 ] && grep -q "schema version 999 is newer than this pptrain" stderr.txt; then pass
else fail "watch on a newer store -> exit $code: $(cat stderr.txt)"; fi
rm -f stderr.txt newer.db*

cli_finish
