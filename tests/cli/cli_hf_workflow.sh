#!/usr/bin/env bash
# tests/cli/cli_hf_workflow.sh: a user's whole path from a Hugging Face model and their own text to
# an export, held to transformers (issue 24). The fixture tests/fixtures/hf_workflow/ comes from
# tests/reference/hf_workflow.py: a small Llama with a byte-level BPE tokenizer, saved by
# transformers; the token counts and sha256 of transformers' encoding of tests/fixtures/text; a
# 4-window shard check.bin; and transformers' float64 loss of the model on it.
#   1. `tokenize` writes exactly transformers' ids (count and sha256 of each split);
#   2. pptrain's loss of the model on check.bin is transformers' (relative 1e-5), at P=1 and P=2;
#   3. `train --init-from` at P=2 on the shards, a checkpoint, `export`;
#   4. the export's loss on the same batch is the checkpoint's, to the bit, and P=2 is one device's;
#   5. ids round-trip: the export's tokenizer writes the same shards byte for byte.
# (tests/reference/hf_workflow.py with a binary also checks the export's loss with transformers.)
# usage: cli_hf_workflow.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"

fx="$src/tests/fixtures/hf_workflow"
want() { grep "\"$1\"" "$fx/expected.json" | sed 's/.*: *"\{0,1\}\([^",]*\)"\{0,1\},\{0,1\}$/\1/'; }
body_sha() { tail -c +1025 "$1" | sha256sum | cut -c1-64; }
tokens_of() { od -An -t u4 -j 8 -N 4 "$1" | tr -d ' '; }   # the header's token count

# 1. tokenize: the same ids as transformers' tokenizer.
"$bin" tokenize --tokenizer "$fx/model" --out shards --val-docs "$(want val_docs)" --threads 2 \
  "$src/tests/fixtures/text" > tokenize.txt 2>&1
check "tokenize succeeds" [ $? -eq 0 ]
for split in train val; do
  shard=$(ls shards/*_"$split"_*.bin 2>/dev/null | head -1)
  check "tokenize: one $split shard" [ "$(ls shards/*_"$split"_*.bin | wc -l)" -eq 1 ]
  check "tokenize: $split holds transformers' $(want ${split}_tokens) tokens (has $(tokens_of "$shard"))" \
    [ "$(tokens_of "$shard")" = "$(want ${split}_tokens)" ]
  check "tokenize: $split's ids are transformers' (sha256)" [ "$(body_sha "$shard")" = "$(want ${split}_sha256)" ]
done
val=$(ls shards/*_val_*.bin | head -1)
check "check.bin is the first 129 ids of the val split" \
  cmp -s -n 258 <(tail -c +1025 "$fx/check.bin") <(tail -c +1025 "$val")

# 2. The model's loss on check.bin, as transformers computes it.
batch=(--batching pack --batch "$(want batch)" --seq "$(want seq)")   # --resume keeps its run's
loss_of() {   # loss_of ARGS...: check's single-device loss, and whether the pipeline is bitwise
  "$bin" check "$@" --data "$fx/check.bin" --db '' --json 2>/dev/null |
    sed -n 's/.*"bitwise":\(true\|false\).*"loss_single_device":\([^,}]*\).*/\2 \1/p'
}
near() {   # near GOT WANT: |got - want| <= 1e-5 |want|
  awk -v g="$1" -v w="$2" 'BEGIN { d = g - w; if (d < 0) d = -d; a = w < 0 ? -w : w; exit !(g != "" && d <= 1e-5 * a) }'
}
read -r l1 _ <<< "$(loss_of --init-from "$fx/model" "${batch[@]}")"
read -r l2 bitwise2 <<< "$(loss_of --init-from "$fx/model" "${batch[@]}" --stages 2)"
check "the source's loss on check.bin is transformers' $(want loss_source) (pptrain: $l1)" near "$l1" "$(want loss_source)"
check "at P=2 too, and bitwise against one device ($l2, $bitwise2)" \
  bash -c "[ '$l2' = '$l1' ] && [ '$bitwise2' = true ]"

# 3. Fine-tune at P=2 on the shards, checkpoint, export.
"$bin" train --init-from "$fx/model" --data shards --batching pack --stages 2 --steps 3 --batch 4 --seq 32 \
  --lr 3e-3 --db '' --ckpt-dir ck > train.txt 2>&1
check "train --init-from at P=2 on the shards succeeds" [ $? -eq 0 ]
check "the banner names the shards' tokenizer" grep -q "^  tokens from pptrain tokenize with .*tokenizer.json: vocab 300, sha256 [0-9a-f]\{12\}" train.txt
ckpt=$(ckpt_of ck '' 3)
"$bin" export "$ckpt" out > export.txt 2>&1
check "export succeeds" [ $? -eq 0 ]

# The shards are checked against the model's own tokenizer.json, with no --tokenizer given.
mkdir other && cp "$fx"/model/*.json "$fx"/model/*.safetensors other/
sed -i 's/"<unk>"/"<UNK>"/' other/tokenizer.json
"$bin" train --init-from other --data shards --batching pack --steps 1 --batch 4 --seq 32 --db '' > other.txt 2>&1
code=$?
check "shards of another tokenizer than --init-from's: exit 2, one line ($code: $(head -c 200 other.txt))" \
  bash -c "[ $code -eq 2 ] && [ \$(wc -l < other.txt) -eq 1 ] && grep -q 'the shards were made with' other.txt"
"$bin" train --resume "$ckpt" --data shards --steps 4 --db '' --val-data shards > resumed.txt 2>&1
check "a resume checks them against the checkpoint's tokenizer.json, and passes" [ $? -eq 0 ]
"$bin" train --init-from other --data "$fx/check.bin" --batching pack --steps 1 --batch 4 --seq 32 --db '' \
  --ckpt-dir other-ck > other-ck.txt 2>&1
"$bin" train --resume "$(ckpt_of other-ck '' 1)" --data shards --steps 2 --db '' > resumed-other.txt 2>&1
code=$?
check "... and refuses them when resuming a run of another tokenizer ($code)" \
  bash -c "[ $code -eq 2 ] && grep -q 'the shards were made with' resumed-other.txt"

# 4. The export is the checkpoint: the same loss on the same batch, to the bit.
read -r lc _ <<< "$(loss_of --resume "$ckpt")"
read -r le bitwise_e <<< "$(loss_of --init-from out "${batch[@]}" --stages 2)"
check "the export's loss is the checkpoint's, bitwise ($le vs $lc)" bash -c "[ -n '$lc' ] && [ '$le' = '$lc' ]"
check "training moved the weights (loss $l1 -> $le)" bash -c "[ '$le' != '$l1' ]"
check "the export at P=2 is bitwise against one device" [ "$bitwise_e" = true ]

# 5. ids round-trip: the export's tokenizer encodes the text to the same shards.
"$bin" tokenize --tokenizer out --out shards2 --val-docs "$(want val_docs)" --threads 1 \
  "$src/tests/fixtures/text" > tokenize2.txt 2>&1
for f in shards/*.bin; do
  check "the export's tokenizer writes $(basename "$f") byte for byte" cmp -s "$f" "shards2/$(basename "$f")"
done
cli_finish
