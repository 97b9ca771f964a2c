#!/usr/bin/env bash
# Validation loss: `--val-data` evaluates the same batches forward only on the pipeline, to
# the same number on one stage, on zb-v's V, and over mpirun; an llm.c folder's _val_ shards
# are held out of training and become the validation set; a bad --val-data is one line, exit 2.
# usage: cli_validation.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"   # Open MPI's unloaded components

text="$src/tests/fixtures/text"
args=(train --data "$text" --val-data "$text" --steps 10 --val-every 5 --val-batches 2 --microbatches 4 --timeout 30)
vals() { grep '^val ' "$1"; }
"$bin" "${args[@]}" --db runs.db > one.txt 2>&1
check "one stage: validations at steps 5 and 10" [ "$(vals one.txt | awk '{print $2}' | tr '\n' ' ')" = "5 10 " ]
check "the banner says what validates" grep -q '^  validation: 2 batches of .* every 5 steps' one.txt
check "the summary gives the last validation loss" grep -q '^  validation loss [0-9.]*$' one.txt
"$bin" "${args[@]}" --db runs.db --stages 2 --schedule zb-v > zbv.txt 2>&1
check "zb-v P=2 V=2: the one stage's validation losses" cmp -s <(vals one.txt) <(vals zbv.txt)

# The run store keeps every pass (table evals, schema version 4); history shows, exports and
# compares them, to the digits train printed.
v10_printed=$(vals one.txt | awk 'NR == 2 {print $6}')   # 6 decimals; history shows 4
v5=$(vals one.txt | awk 'NR == 1 {printf "%.4f", $6}'); v10=$(vals one.txt | awk 'NR == 2 {printf "%.4f", $6}')
"$bin" history show 1 --db runs.db > show.txt 2>&1
check "history show: the passes, first and last" grep -q "^  2 passes: first $v5 (step 5), last $v10 (step 10)" show.txt
check "history show: each pass" grep -q "^  step: 5=$v5 10=$v10\$" show.txt
"$bin" history show 1 --json --db runs.db > show.json 2>&1
check "history show --json: evals" [ "$(sqlite3 :memory: "SELECT json_array_length(j, '\$.evals') = 2 AND
  json_extract(j, '\$.evals[1].step') = 10 AND abs(json_extract(j, '\$.evals[1].val_loss') - $v10_printed) < 5e-7 AND
  json_extract(j, '\$.run.evals') = 2 AND json_extract(j, '\$.run.last_val_step') = 10
  FROM (SELECT readfile('show.json') AS j)")" = 1 ]
"$bin" history export 1 --csv --db runs.db > export.csv 2>&1
check "history export: val_loss on steps 5 and 10 only" \
  bash -c "[ \"\$(awk -F, 'NR > 1 && \$9 != \"\" {print \$1}' export.csv | tr '\n' ' ')\" = '5 10 ' ]"
check "history export: the stored loss is train's" \
  bash -c "awk -F, '\$1 == 10 {printf \"%.4f\", \$9}' export.csv | grep -qx '$v10'"
"$bin" history compare 1 2 --db runs.db > compare.txt 2>&1
check "history compare: the final val loss of both, the same" grep -q "^  final val loss  *$v10 (step 10)  *$v10 (step 10)\$" compare.txt
check "history compare: min val loss row" grep -q "^  min val loss " compare.txt
mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x OMP_NUM_THREADS=1 -np 2 \
  "$bin" "${args[@]}" --stages 2 --schedule 1f1b --transport mpi > mpi.txt 2>&1
check "mpirun P=2: the one stage's validation losses, printed once" cmp -s <(vals one.txt) <(vals mpi.txt)

# An llm.c folder: fw_train_*.bin train, fw_val_*.bin validate (1024-byte header, uint16 tokens).
le32() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $((($1 >> 8) & 255)))\\x$(printf %02x $((($1 >> 16) & 255)))\\x$(printf %02x $((($1 >> 24) & 255)))"; }
shard() {   # shard FILE N FIRST: N tokens FIRST, FIRST+1, ... (mod 250)
  { le32 20240520; le32 1; le32 "$2"; head -c 1012 /dev/zero
    for ((i = 0; i < $2; i++)); do t=$((($3 + i) % 250)); printf "\\x$(printf %02x "$t")\\x00"; done; } > "$1"
}
mkdir llmc
shard llmc/fw_train_000001.bin 600 0
shard llmc/fw_train_000002.bin 600 7
shard llmc/fw_val_000000.bin 400 3
"$bin" train --data llmc --batching pack --seq 16 --batch 4 --steps 4 --val-every 2 --db '' > shards.txt 2>&1
check "a shard folder: its _val_ shard is held out of training" \
  grep -q '1 llm.c _val_ shard of llmc held out of training: the validation set' shards.txt
check "a shard folder: training reads 1200 tokens" grep -q 'llm.c shard (uint16), [0-9]* windows, 1200 tokens' shards.txt
check "a shard folder: validations at steps 2 and 4" [ "$(vals shards.txt | wc -l)" -eq 2 ]

# Bad input: one line on stderr, exit 2, before training.
"$bin" train --data "$text" --val-data /nonexistent/val.txt --steps 2 --db '' > out.txt 2> err.txt
code=$?
check "a missing --val-data: exit 2" [ $code -eq 2 ]
check "a missing --val-data: one line naming it" bash -c "[ \$(wc -l < err.txt) -eq 1 ] && grep -q /nonexistent/val.txt err.txt"
check "a missing --val-data: no step ran" bash -c "! grep -q '^step' out.txt"
"$bin" train --data "$text" --val-every 0 --steps 2 --db '' > /dev/null 2> err.txt
code=$?
check "--val-every 0: exit 2, one line" bash -c "[ $code -eq 2 ] && [ \$(wc -l < err.txt) -eq 1 ]"

# Options before the command (issue 29): moved after it, where that is unambiguous.
"$bin" train --data "$src/tests/fixtures/text" --steps 1 --batch 2 --seq 16 --db before.db > /dev/null 2>&1
"$bin" --db before.db history list > before-list.txt 2> before-err.txt
check "pptrain --db X history list runs history ($(head -c 120 before-err.txt))" grep -q '^ *1 ' before-list.txt
"$bin" --json --db before.db history list > before-json.txt 2>&1
check "pptrain --json --db X history list prints JSON" grep -q '^\[{"id":1,' before-json.txt
setsid "$bin" --data train --db '' < /dev/null > /dev/null 2> before-console.txt
check "pptrain --data train: 'train' is the folder, the console opens (and wants a terminal)" \
  grep -q 'needs a terminal' before-console.txt
rm -f before.db* before-*.txt

if [ "$failed" -ne 0 ]; then for f in *.txt; do echo "== $f"; cat "$f"; done; fi
cli_finish
