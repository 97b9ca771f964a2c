#!/usr/bin/env bash
# tests/cli/cli_tokenize.sh: `pptrain tokenize` and `train --tokenizer` end to end: text ->
# llm.c shards with the Llama 2-style fixture tokenizer (tests/fixtures/tokenizers), the same
# bytes on 1 and 2 threads, a rerun that replaces stale shards (under its own --name or
# another), a write failure that leaves nothing, a failed rerun that leaves the earlier shards,
# training that reads the shards tokenize.json lists and no others, then a few steps on the
# shards at P=2 and on the text itself; and the refusals: one line on stderr, exit 2, nothing
# written (a listed shard missing, a tokenize that has not finished among them).
# usage: cli_tokenize.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"
fx=$src/tests/fixtures/tokenizers

mkdir text
for i in 1 2 3 4 5 6 7 8; do
  printf 'Document %d: the pipeline fills, drains and bubbles; café, 日本語, 🍕.\nA second line %d.\n\n' "$i" "$((i * 37))"
done > text/a.txt
printf 'Another file: zero-bubble schedules split the backward pass.\n\nIts second document.\n' > text/b.txt
cat > model.json <<'JSON'
{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "vocab_size": 856, "max_position_embeddings": 256}
JSON

u16() { od -An -t d4 -N 12 "$1" | tr -s ' ' | sed 's/^ //'; }   # magic version count

"$bin" tokenize --tokenizer "$fx/llama2" --out shards --val-docs 2 --threads 2 text >out.txt 2>err.txt
check "tokenize exits 0" [ $? -eq 0 ]
check "train and val shards and tokenize.json" test -s shards/tokens_train_000000.bin -a -s shards/tokens_val_000000.bin -a -s shards/tokenize.json
read -r magic version count <<<"$(u16 shards/tokens_train_000000.bin)"
check "uint16 header: magic 20240520 version 1" [ "$magic" = 20240520 -a "$version" = 1 ]
check "the count matches the body" [ $(( $(stat -c %s shards/tokens_train_000000.bin) - 1024 )) -eq $((count * 2)) ]
check "tokenize.json holds the tokenizer's sha256" grep -q "$(sha256sum "$fx/llama2/tokenizer.json" | cut -c1-64)" shards/tokenize.json
first=$(od -An -t u2 -j 1024 -N 2 shards/tokens_val_000000.bin | tr -d ' ')
check "a document starts with the template's BOS (1)" [ "$first" = 1 ]

"$bin" tokenize --tokenizer "$fx/llama2" --out shards1 --val-docs 2 --threads 1 text >/dev/null 2>&1
check "1 thread writes the same bytes as 2" cmp -s shards/tokens_train_000000.bin shards1/tokens_train_000000.bin

touch shards/tokens_train_000007.bin
"$bin" tokenize --tokenizer "$fx/llama2" --out shards --val-docs 2 text >/dev/null 2>&1
check "a rerun removes an earlier run's stale shard" test ! -e shards/tokens_train_000007.bin -a -s shards/tokenize.json

(ulimit -f 1; "$bin" tokenize --tokenizer "$fx/llama2" --out full text >/dev/null 2>err.txt)
code=$?
check "a write that fails exits 2 with one line" [ $code -eq 2 -a "$(wc -l <err.txt)" -eq 1 ]
check "and leaves no shard, temporary or manifest" [ -z "$(ls -A full 2>/dev/null)" ]

# A run that fails after writing some shards (the second file is not UTF-8 and GPT-2 has no
# byte fallback) leaves no shard where training would read it: they were only staged.
mkdir mixed
cp text/a.txt mixed/a.txt
printf 'caf\xe9\n' > mixed/b.txt
"$bin" tokenize --tokenizer "$fx/gpt2" --out mixed_out --shard-tokens 20 mixed >/dev/null 2>err.txt
code=$?
check "a failure after some shards exits 2 with one line" [ $code -eq 2 -a "$(wc -l <err.txt)" -eq 1 ]
check "and leaves no shard, staged or published" [ -z "$(ls -A mixed_out 2>/dev/null)" ]

# A rerun under another --name replaces the shards the earlier tokenize.json listed, and training
# reads what the new one lists: the manifest's token count, not a stray .bin dropped in beside.
# A rerun that fails leaves the earlier run's shards and manifest as they were.
"$bin" tokenize --tokenizer "$fx/llama2" --out renamed --name aaa text >/dev/null 2>&1
"$bin" tokenize --tokenizer "$fx/llama2" --out renamed --name bbb text/b.txt >/dev/null 2>&1
check "a rerun under another --name leaves only its own shards" \
  [ "$(ls -A renamed | tr '\n' ' ')" = "bbb_train_000000.bin tokenize.json " ]
cp shards/tokens_train_000000.bin renamed/stray_train_000000.bin
"$bin" train --model model.json --data renamed --tokenizer "$fx/llama2" --batching pack --seq 8 --batch 1 --steps 1 \
  --db '' >renamed.txt 2>&1
want=$(sed -n 's/.*"train_tokens":[[:space:]]*\([0-9]*\).*/\1/p' renamed/tokenize.json)
check "train reads the manifest's $want tokens, not the old shards or a stray .bin" \
  grep -q "^  data renamed: .*, $want tokens, pack batching" renamed.txt
cp renamed/tokenize.json renamed.json
"$bin" tokenize --tokenizer "$fx/gpt2" --out renamed --name ccc --shard-tokens 20 mixed >/dev/null 2>&1
check "a failed rerun keeps the earlier manifest" cmp -s renamed.json renamed/tokenize.json
check "and the earlier shards, and makes none" \
  [ "$(ls -A renamed | tr '\n' ' ')" = "bbb_train_000000.bin stray_train_000000.bin tokenize.json " ]
mkdir -p unfinished/.tokenize-partial
cp shards/tokens_train_000000.bin unfinished/

"$bin" train --model model.json --data shards --tokenizer "$fx/llama2" --batching pack --seq 16 --batch 4 \
  --microbatches 2 --stages 2 --steps 3 --db '' >train.txt 2>&1
check "3 steps at P=2 on the shards" grep -q "^done: 3 steps" train.txt
"$bin" train --model model.json --data text --tokenizer "$fx/llama2" --seq 16 --batch 4 --steps 2 --db '' >text.txt 2>&1
check "text with --tokenizer trains" grep -q "^done: 2 steps" text.txt
check "the banner names the tokenizer and its ids" grep -q "tokenizer $fx/llama2/tokenizer.json: vocab 856, bos 1, eos 2, pad 2" text.txt
"$bin" train --model model.json --data text --tokenizer "$fx/llama2" --seq 16 --batch 4 --steps 2 --db run.db \
  --ckpt-dir ck >/dev/null 2>&1
"$bin" train --resume latest --steps 3 --db run.db --ckpt-dir ck >resume.txt 2>&1
check "a resumed run reads its text with the checkpoint's tokenizer" grep -q "tokenizer $fx/llama2/tokenizer.json" resume.txt
check "and finishes" grep -q "^done: 1 steps" resume.txt

# --tokenizer auto: a Hugging Face folder (this run's export) holding the tokenizer files
# starts a P=2 run on the shards (their tokenize.json matches the copied tokenizer.json) and
# one on the text, whose banner names the folder's tokenizer.
"$bin" export latest hf --db run.db >/dev/null 2>&1
cp "$fx/llama2/tokenizer.json" "$fx/llama2/tokenizer_config.json" hf/
"$bin" train --init-from hf --tokenizer auto --data shards --batching pack --seq 16 --batch 4 --microbatches 2 \
  --stages 2 --steps 2 --db '' >auto.txt 2>&1
check "--init-from with --tokenizer auto trains on the shards at P=2" grep -q "^done: 2 steps" auto.txt
"$bin" train --init-from hf --tokenizer auto --data text --seq 16 --batch 4 --steps 1 --db '' >auto_text.txt 2>&1
check "and on text, the banner naming the folder's tokenizer" grep -q "tokenizer hf/tokenizer.json: vocab 856, bos 1, eos 2" auto_text.txt
# check reads its batch as train does: the folder's tokenizer on the text, not bytes. Without
# --tokenizer, text under this 856-id model is refused (it would check byte ids).
"$bin" check --init-from hf --tokenizer auto --data text --seq 16 --batch 4 --microbatches 2 --stages 2 --db '' \
  >check.txt 2>&1
check "check --init-from --tokenizer auto: bitwise on the folder's tokenizer" grep -q "^  bitwise" check.txt
"$bin" check --init-from hf --data text --seq 16 --batch 4 --stages 2 --db '' >check_bytes.txt 2>&1
check "check on text without --tokenizer under a non-byte vocabulary: exit 2, naming --tokenizer" \
  bash -c "[ $? -eq 2 ] && grep -q 'pass --tokenizer' check_bytes.txt"

# Past 65,536 ids: the GPT-2-style fixture with 70,000 filler tokens (ids 700..70699) gets
# uint32 shards, magic 20240801 version 7, and a model of that vocabulary trains on them.
awk 'BEGIN { for (i = 700; i < 70700; i++) f = f sprintf("\"filler%d\": %d, ", i, i) }
     { if (!done && sub(/"vocab": [{]/, "\"vocab\": {" f)) done = 1; print }' "$fx/gpt2/tokenizer.json" > big.json
"$bin" tokenize --tokenizer big.json --out big text >/dev/null 2>&1
read -r magic version count <<<"$(u16 big/tokens_train_000000.bin)"
check "70,700 ids: uint32 header, magic 20240801 version 7" [ "$magic" = 20240801 -a "$version" = 7 ]
check "4 bytes a token" [ $(( $(stat -c %s big/tokens_train_000000.bin) - 1024 )) -eq $((count * 4)) ]
sed 's/"vocab_size": 856/"vocab_size": 70700/' model.json > big_model.json
"$bin" train --model big_model.json --data big --tokenizer big.json --batching pack --seq 16 --batch 2 --steps 1 \
  --db '' >big.txt 2>&1
check "a 70,700-id model trains on uint32 shards" grep -q "^done: 1 steps" big.txt

expect_refusal() {   # expect_refusal "what stderr must say" command args...: exit 2, one line, nothing new
  local want=$1
  shift
  local before
  before=$(ls -A | sort)
  "$@" >stdout.txt 2>stderr.txt
  local code=$? lines
  lines=$(wc -l <stderr.txt)
  rm -f stdout.txt
  if [ $code -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" stderr.txt && [ "$(ls -A | grep -v stderr.txt | sort)" = "$(echo "$before" | grep -v stderr.txt)" ]; then
    pass
  else
    fail "$* -> exit $code, $lines lines (want 2, 1 line with '$want', nothing written)"
    cat stderr.txt
  fi
  rm -f stderr.txt
}
sed 's/"type": "BPE"/"type": "Unigram"/' "$fx/llama2/tokenizer.json" > unknown_type.json
head -c 500 "$fx/llama2/tokenizer.json" > malformed.json
python_free_merge() { sed 's/"merges": \[/"merges": [["e", "nosuch"], /' "$fx/llama2/tokenizer.json"; }
python_free_merge > bad_merge.json
printf 'caf\xe9 latin-1, not UTF-8\n' > latin1.txt
expect_refusal 'model.type "Unigram"' "$bin" tokenize --tokenizer unknown_type.json --out o1 text
expect_refusal "malformed JSON" "$bin" tokenize --tokenizer malformed.json --out o2 text
expect_refusal "not in the vocabulary" "$bin" tokenize --tokenizer bad_merge.json --out o3 text
expect_refusal "invalid UTF-8 at byte 3" "$bin" tokenize --tokenizer "$fx/gpt2" --out o4 latin1.txt
expect_refusal "pass --tokenizer" "$bin" train --model model.json --data text --steps 1 --db ''
expect_refusal "more than the model's vocabulary (259)" "$bin" train --data text --tokenizer "$fx/llama2" --steps 1 --db ''
expect_refusal "the shards were made with" "$bin" train --model model.json --data shards --batching pack --tokenizer "$fx/mistral" --steps 1 --db ''
expect_refusal "there is no --init-from" "$bin" train --model model.json --data text --tokenizer auto --steps 1 --db ''
expect_refusal "needs --tokenizer, --out" "$bin" tokenize --out o5 text
rm renamed/bbb_train_000000.bin
expect_refusal "renamed/tokenize.json lists bbb_train_000000.bin, which is missing: run pptrain tokenize again" \
  "$bin" train --model model.json --data renamed --tokenizer "$fx/llama2" --batching pack --seq 8 --steps 1 --db ''
expect_refusal "unfinished: a pptrain tokenize into this folder has not finished" \
  "$bin" train --model model.json --data unfinished --tokenizer "$fx/llama2" --batching pack --seq 8 --steps 1 --db ''
cli_finish
