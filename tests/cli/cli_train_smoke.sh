#!/usr/bin/env bash
# `pptrain train` end to end on the committed English corpus: the loss falls, two runs with
# the same seed print bitwise the same losses (data order and init depend only on the
# seed), and another seed changes them.
# usage: cli_train_smoke.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"

args=(train --data "$src/tests/fixtures/text" --model tiny --steps 40 --batch 8 --seq 64
      --lr 3e-3 --warmup 5 --microbatches 2)
"$bin" "${args[@]}" > "$work/a.txt"
check "first run exits 0" [ $? -eq 0 ]
"$bin" "${args[@]}" > "$work/b.txt"
"$bin" "${args[@]}" --seed 7 > "$work/c.txt"
mkdir empty
(cd empty && "$bin" train --data "$src/tests/fixtures/text" --steps 1 --db '' > /dev/null)
check "--db '' writes no store" [ -z "$(ls -A empty)" ]
losses() { grep '^step' "$1" | sed 's/.*| loss \([0-9.]*\) |.*/\1/'; }
check "40 step lines" [ "$(losses "$work/a.txt" | wc -l)" -eq 40 ]
check "summary line" grep -q '^done: 40 steps' "$work/a.txt"
first=$(losses "$work/a.txt" | head -1)
last=$(losses "$work/a.txt" | tail -5 | sort -n | tail -1)
check "loss falls ($first -> worst of last five $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }'
check "same seed, same losses" cmp -s <(losses "$work/a.txt") <(losses "$work/b.txt")
differ() { ! cmp -s "$1" "$2"; }
check "other seed, other losses" differ <(losses "$work/a.txt") <(losses "$work/c.txt")
check "step line has every field" grep -qE '^step +1/40 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| norm [0-9.]+ \| +[0-9]+ tok/s \| +[0-9.]+ GFLOP/s \| +[0-9.]+ ms$' "$work/a.txt"
# The run store recorded the runs: finished, with every step.
"$bin" history --db pptrain.db --json > "$work/runs.json"
check "three runs recorded" [ "$(grep -o '"status":"finished"' "$work/runs.json" | wc -l)" -eq 3 ]
"$bin" history export 1 --db pptrain.db --csv > "$work/steps.csv"
check "40 steps stored" [ "$(tail -n +2 "$work/steps.csv" | wc -l)" -eq 40 ]
check "stored losses are the printed ones" cmp -s <(losses "$work/a.txt") <(tail -n +2 "$work/steps.csv" | cut -d, -f2 | xargs printf '%.6f\n')
# SIGTERM between steps: the run ends as 'stopped', with exit code 0.
"$bin" train --data "$src/tests/fixtures/text" --steps 100000 --db stop.db > "$work/stop.txt" &
pid=$!
for _ in $(seq 100); do grep -q '^step' "$work/stop.txt" 2>/dev/null && break; sleep 0.1; done
kill -TERM $pid
wait $pid
check "SIGTERM stops with exit 0" [ $? -eq 0 ]
check "stopped run recorded" sh -c "'$bin' history --db stop.db --json | grep -q '\"status\":\"stopped\"'"
"$bin" train --help > "$work/help.txt"
check "--help exits 0 and lists --microbatches" grep -q -- '--microbatches M' "$work/help.txt"

# Models with biases (transformers' attention_bias / mlp_bias checkpoints) train pipelined to
# the bits of one device, under a zero-bubble and an interleaved schedule, with replicas.
fx="$src/tests/fixtures/hf_variants"
"$bin" check --init-from "$fx/attention_bias" --data "$src/tests/fixtures/text" --stages 2 --dp 2 \
  --schedule zb-h1 --microbatches 4 --batch 16 --seq 32 > "$work/bias1.txt" 2>&1
check "attention_bias: zb-h1 P2 D2 bitwise" grep -q '^  bitwise' "$work/bias1.txt"
# (The fixtures have 2 layers, so interleaving runs their 2 stages on one rank.)
"$bin" check --init-from "$fx/mlp_bias" --data "$src/tests/fixtures/text" --stages 1 --virtual 2 \
  --schedule interleaved-1f1b --microbatches 4 --batch 8 --seq 32 --recompute all > "$work/bias2.txt" 2>&1
check "mlp_bias: interleaved-1f1b P1 V2 recompute bitwise" grep -q '^  bitwise' "$work/bias2.txt"
# Tied embeddings split across stages (the first stage's embedding, the last stage's copy,
# their gradients summed): 6 steps at P=2 are the bits of P=1; a P=2 checkpoint resumes at
# P=1 to the same bits; the export writes the tied matrix once.
tied=(--data "$src/tests/fixtures/text" --db '' --batch 8 --seq 32 --microbatches 4)
steps_of() { grep '^step' "$1" | sed 's/| *[0-9]* tok.*//'; }
"$bin" train --init-from "$fx/tied" "${tied[@]}" --steps 6 --stages 1 > "$work/tied1.txt"
"$bin" train --init-from "$fx/tied" "${tied[@]}" --steps 6 --stages 2 --schedule zb-h1 --ckpt-every 3 \
  --ckpt-dir "$work/tied-ckpt" > "$work/tied2.txt"
check "tied embeddings: P=2 zb-h1 trains the bits of P=1" cmp -s <(steps_of "$work/tied1.txt") <(steps_of "$work/tied2.txt")
"$bin" train --resume "$(ckpt_of "$work/tied-ckpt" '' 3)" --data "$src/tests/fixtures/text" --db '' --stages 1 \
  > "$work/tied-resumed.txt"
check "tied embeddings: a P=2 checkpoint resumes at P=1 to the same bits" \
  cmp -s <(steps_of "$work/tied1.txt" | tail -3) <(steps_of "$work/tied-resumed.txt")
"$bin" export "$(ckpt_of "$work/tied-ckpt" '' 6)" "$work/tied-hf" > /dev/null
check "tied embeddings: the export holds the matrix once, no lm_head" \
  bash -c "grep -aq 'model.embed_tokens.weight' '$work/tied-hf/model.safetensors' && ! grep -aq 'lm_head' '$work/tied-hf/model.safetensors'"
# A torch schedule CSV brings its own P and M (2 ranks, 4 microbatches), as plan takes them.
"$bin" train --data "$src/tests/fixtures/text" --model tiny --steps 2 --batch 8 --seq 32 --db '' \
  --schedule "$src/tests/fixtures/torch_csv/zb-v_p2_v2_m4.compute_comms.csv" > "$work/csv.txt"
check "train --schedule FILE.csv takes P and M from the file" grep -q 'per rank and step: [0-9.]* [0-9.]*$' "$work/csv.txt"
cli_finish
