#!/usr/bin/env bash
# tests/cli/cli_sample.sh: `pptrain sample` (issue 28).
#  - fidelity: greedy ids from the Hugging Face folder tests/fixtures/hf_generate (GQA, tied,
#    llama3 RoPE; written by tests/reference/hf_generate.py) equal transformers' greedy
#    generate() token for token, 64 new tokens for each prompt, at P=1 and P=3, and over
#    mpirun at P=2 (when mpirun is here);
#  - a run's checkpoint: `sample latest` and `sample RUN` from the store, a checkpoint folder;
#  - seeded sampling: the same seed gives the same ids, another seed others;
#  - train --sample-every: a sample line, its time apart from the steps', the losses unchanged;
#    the store's samples table (schema 5), shown by history show (sampling's share of the time
#    too), show --json and compare (side by side at the steps every run sampled), escaped;
#  - bad input: one line on stderr, exit 2 (an empty --prompt with any tokenizer, before the
#    source is read).
# usage: cli_sample.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"

fixture="$src/tests/fixtures/hf_generate"
ids_of() { tr -d ' \n' | sed 's/.*"ids":\[\([0-9,]*\)\].*/\1/'; }   # the new ids of --json, or a prompt line
expected() { grep "\"prompt\": \"$1\"" "$fixture/expected.json" | ids_of; }

for prompt in "Hello" "The pipeline" "a"; do
  want=$(expected "$prompt")
  check "the fixture has 64 ids for '$prompt'" [ "$(echo "$want" | tr ',' '\n' | wc -l)" -eq 64 ]
  for P in 1 3; do
    got=$("$bin" sample "$fixture" --prompt "$prompt" --tokens 64 --stages "$P" --json | ids_of)
    check "greedy ids for '$prompt' at P=$P are transformers' generate()" [ "$got" = "$want" ]
  done
done

if command -v mpirun > /dev/null; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"   # as cli_mpi.sh says why
  got=$(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 -x OMP_NUM_THREADS=1 \
        "$bin" sample "$fixture" --prompt Hello --tokens 64 --stages 2 --transport mpi --timeout 60 --json | ids_of)
  check "greedy ids over mpirun at P=2 are transformers' generate()" [ "$got" = "$(expected Hello)" ]
else
  echo "skipped: no mpirun"
fi

# Text as it is generated: the prompt, then the new text, then a line of numbers on stderr.
"$bin" sample "$fixture" --prompt "Hello" --tokens 8 > text.out 2> text.err
check "text mode prints the prompt first" bash -c "head -c 5 text.out | grep -q '^Hello'"
check "text mode says how many tokens and how fast" grep -q '^pptrain sample: 8 tokens in .* s (.* tokens/s), 1 stages, greedy$' text.err

# Seeded sampling.
draw() { "$bin" sample "$fixture" --prompt "Hello" --tokens 32 --temperature 1.0 --top-k 50 --top-p 0.95 "$@" --json | ids_of; }
a=$(draw --seed 7) b=$(draw --seed 7 --stages 2) c=$(draw --seed 8)
check "the same seed samples the same ids (on another layout too)" [ -n "$a" -a "$a" = "$b" ]
check "another seed samples other ids" [ "$a" != "$c" ]
check "sampling is not greedy" [ "$a" != "$(expected Hello | cut -d, -f1-32)" ]

# A run of the store: its newest checkpoint, by run id and by latest, and its folder.
"$bin" train --data "$src/tests/fixtures/text" --model tiny --steps 2 --batch 4 --seq 32 --db store.db \
  --ckpt-dir ck --ckpt-every 2 > train.out 2>&1
one=$("$bin" sample latest --db store.db --prompt "The " --tokens 12 --json | ids_of)
check "sample latest: 12 ids from the run's checkpoint" [ "$(echo "$one" | tr ',' '\n' | wc -l)" -eq 12 ]
check "sample RUN gives latest's ids" \
  [ "$("$bin" sample 1 --db store.db --prompt "The " --tokens 12 --json | ids_of)" = "$one" ]
check "the checkpoint folder, on 4 stages, gives latest's ids" \
  [ "$("$bin" sample "$(ckpt_of ck 1 2)" --db store.db --prompt "The " --tokens 12 --stages 4 --json | ids_of)" = "$one" ]
"$bin" train --data "$src/tests/fixtures/text" --model tiny --steps 1 --batch 4 --seq 32 --db store.db > /dev/null 2>&1

# Samples during training: a line at every --sample-every steps and after the last, their
# time apart from the steps', and the losses of the run without them.
small=(train --data "$src/tests/fixtures/text" --model tiny --steps 5 --batch 4 --seq 32 --stages 2 --db '')
"$bin" "${small[@]}" > plain.out 2>&1
"$bin" "${small[@]}" --sample-every 2 --sample-tokens 12 --sample-prompt "The " > sampled.out 2>&1
check "three sample lines" [ "$(grep -c '^sample ' sampled.out)" -eq 3 ]
check "a sample line at step 2, of 12 tokens" grep -q '^sample    2 | [0-9.]* s | 12 tokens | "' sampled.out
check "a sample line after the last step, 5" grep -q '^sample    5 | ' sampled.out
check "the samples' time is its own share of the run" grep -q '^  samples: 3 in [0-9.]* s, [0-9.]*% of the run' sampled.out
check "sampling leaves the losses as they were" [ "$(grep '^step' plain.out | cut -d'|' -f1-2)" = "$(grep '^step' sampled.out | cut -d'|' -f1-2)" ]
"$bin" "${small[@]}" --db samples.db --sample-every 2 --sample-tokens 12 > /dev/null 2>&1
"$bin" history show 1 --db samples.db > show.out
check "history show lists the run's samples" grep -q '^samples (greedy, 3 in the run)$' show.out
check "... at steps 2, 4 and 5" [ "$(grep -c '^  step [245] ([0-9.]* s, 12 tokens): "' show.out)" -eq 3 ]
check "the store keeps them in its samples table (schema 5)" \
  [ "$(sqlite3 samples.db 'SELECT count(*) FROM samples WHERE tokens = 12; PRAGMA user_version')" = "$(printf '3\n6')" ]
check "history show gives sampling its own share" \
  grep -q '^  sampling: 3 samples in [0-9.]* s, [0-9.]*% of the time in steps and samples (in no step' show.out
"$bin" history show 1 --db samples.db --json > show.json
check "history show --json lists the samples and their share" python3 -c '
import json, sys
d = json.load(open("show.json"))
s, sh = d["samples"], d["sampling"]
assert [x["step"] for x in s] == [2, 4, 5] and all(x["tokens"] == 12 and x["seconds"] > 0 and x["text"] for x in s), s
assert sh["samples"] == 3 and abs(sh["seconds"] - sum(x["seconds"] for x in s)) < 1e-9 and 0 < sh["share"] < 1, sh'
# compare: a second run, sampled at steps 2, 4 and 5 as the first, and a third at 3 and 5 only.
"$bin" "${small[@]}" --db samples.db --sample-every 2 --sample-tokens 12 --lr 1e-2 > /dev/null 2>&1
"$bin" history compare 1 2 --db samples.db > compare.out
check "history compare puts the samples side by side at matching steps" \
  grep -q '^samples at the steps every run sampled' compare.out && \
  [ "$(grep -c '^  step [245]$' compare.out)" -eq 3 ] && [ "$(grep -cE '^    run [12] +"' compare.out)" -eq 6 ]
"$bin" "${small[@]}" --db samples.db --sample-every 3 --sample-tokens 12 > /dev/null 2>&1
"$bin" history compare 1 2 3 --db samples.db --json > compare.json
check "history compare --json: the steps all three sampled, a text per run" python3 -c '
import json
d = json.load(open("compare.json"))
assert [x["step"] for x in d["samples"]] == [5] and len(d["samples"][0]["texts"]) == 3, d["samples"]'
# A text no terminal or JSON document may take raw: ESC, a CSI, invalid UTF-8.
sqlite3 samples.db "INSERT INTO samples VALUES (1, 3, 12, 0.01, X'1b5b324a9bff22410a')"
"$bin" history show 1 --db samples.db > raw.out
"$bin" history show 1 --db samples.db --json > raw.json
check "history show escapes control bytes and invalid UTF-8" \
  grep -qF '  step 3 (0.01 s, 12 tokens): "\x1b[2J\x9b\xff\"A\n"' raw.out && ! grep -q $'\x1b' raw.out
check "history show --json stays UTF-8: invalid bytes as U+FFFD" python3 -c '
import json
d = json.load(open("raw.json", encoding="utf-8"))
assert [x["text"] for x in d["samples"] if x["step"] == 3] == ["\x1b[2J\ufffd\ufffd\"A\n"], d["samples"]'
check "check refuses --sample-every" bash -c "! \"$bin\" check --data \"$src/tests/fixtures/text\" --sample-every 2 2> /dev/null"

# Bad input: one line, exit 2, nothing on stdout.
refused() {   # refused "what" "the line's start" args...
  local what=$1 line=$2
  shift 2
  "$bin" sample "$@" > bad.out 2> bad.err
  local rc=$?
  check "$what: exit 2 (got $rc)" [ "$rc" -eq 2 ]
  check "$what: one line 'pptrain: $line...'" one_line "$line"
}
one_line() {   # one_line START: bad.err is one line that starts "pptrain: START"; bad.out is empty
  [ "$(wc -l < bad.err)" -eq 1 ] && [[ "$(cat bad.err)" == "pptrain: $1"* ]] && [ ! -s bad.out ]
}
long=$(printf 'x%.0s' $(seq 1 200))
refused "an empty prompt" "--prompt is empty" "$fixture" --prompt ""
hf_tokenizer="$src/tests/fixtures/hf_workflow/model"   # its tokenizer.json would make "" BOS alone
refused "an empty prompt, a Hugging Face tokenizer" "--prompt is empty" "$hf_tokenizer" --prompt ""
refused "an empty prompt, refused before the source is read" "--prompt is empty" 2 --db store.db --prompt ""
refused "no prompt" "sample needs --prompt" "$fixture"
refused "no source" "sample needs RUN" --prompt hi
mkdir -p no_weights && cp "$src/tests/fixtures/hf_variants/plain/config.json" no_weights/
refused "a Hugging Face folder without weights, named as given (no --init-from was typed)" \
  "no_weights: neither model.safetensors.index.json nor model.safetensors is there" no_weights --prompt hi
refused "a prompt longer than max_position_embeddings" "--prompt is 201 tokens, longer than the model's max_position_embeddings (128)" "$fixture" --prompt "$long"
refused "temperature 0 with sampling" "--temperature 0: sampling needs a temperature > 0" "$fixture" --prompt hi --temperature 0
refused "a negative temperature" "--temperature -1: sampling needs" "$fixture" --prompt hi --temperature -1
refused "top-p 0" "--top-p 0 is outside (0, 1]" "$fixture" --prompt hi --top-p 0
refused "top-p above 1" "--top-p 1.5 is outside (0, 1]" "$fixture" --prompt hi --top-p 1.5
refused "a run with no checkpoint" "run 2 has no complete checkpoint" 2 --db store.db --prompt hi
refused "a folder that is no model" "" "$work" --prompt hi
refused "a run flag sample has no use for" "sample: no use for the option '--data'" "$fixture" --prompt hi --data x
refused "zero tokens" "--tokens" "$fixture" --prompt hi --tokens 0
"$bin" "${small[@]}" --sample-every 2 --sample-prompt "" > bad.out 2> bad.err
check "train --sample-prompt '': exit 2" [ $? -eq 2 ]
check "train --sample-prompt '': one line" one_line "--sample-prompt: the prompt must be 1 to 255 bytes"

# A schedule CSV: its ranks are the layout's (as train takes them), and a training run's CSV,
# written for M > 1, is refused saying how to write one for the one microbatch a sample runs.
"$bin" plan --stages 2 --microbatches 1 --dump-csv > one_mb.csv
"$bin" plan --stages 2 --microbatches 2 --dump-csv > two_mb.csv
got=$("$bin" sample "$fixture" --prompt Hello --tokens 64 --schedule one_mb.csv --json 2> csv.err | ids_of)
check "a 1-microbatch CSV: transformers' ids, on its 2 ranks" [ "$got" = "$(expected Hello)" ]
"$bin" sample "$fixture" --prompt Hello --tokens 8 --schedule one_mb.csv 2> csv.err > /dev/null
check "... the CSV's 2 ranks, with no --stages" grep -q ', 2 stages, greedy$' csv.err
refused "a training run's CSV (M 2)" "--schedule two_mb.csv runs 2 microbatches, and a sample runs 1: write one with \
pptrain plan --stages 2 --microbatches 1 --dump-csv > FILE" "$fixture" --prompt hi --schedule two_mb.csv
refused "a --virtual the CSV contradicts" "--virtual 2, but one_mb.csv has 2 stages on 2 ranks" "$fixture" \
  --prompt hi --schedule one_mb.csv --virtual 2
cli_finish
