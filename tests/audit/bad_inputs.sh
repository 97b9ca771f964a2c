#!/usr/bin/env bash
# tests/audit/bad_inputs.sh: the reliability audit's bad inputs, by hand (not run by ctest: it
# runs pptrain a few hundred times).
#   tests/audit/bad_inputs.sh PPTRAIN [NAME_REGEX]   (only the cases whose name matches)
#   VERBOSE=1 ...: every case's output too, to see that each fails for the reason it means to
# Feeds pptrain a broad list of bad inputs, generated from the tables below: malformed, out of
# range and missing values for every command's flags; corrupt, truncated and missing checkpoint
# files; bad config.json values and duplicate keys; NaN and Inf weights; bad token shards; bad
# tokenizer.json; bad schedule CSVs; outputs that cannot be written; stores that are not
# stores or are newer than this pptrain. Each case runs in a folder of its own (its inputs
# made there first). A case is clean when pptrain
#   - exits 2,
#   - prints exactly one line on stdout and stderr together (the error's "pptrain: ..."), and
#     no sanitizer report,
#   - leaves the case folder as it found it: no new file, no changed file, no folder left.
# Prints each unclean case with what it printed, then the counts. Exit 0 when all are clean.
# A build with -DPPTRAIN_SANITIZE=ON runs the same cases under ASan and UBSan (leaks included).
set -u
bin=$(readlink -f "$1")
only=${2:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=$src/tests/fixtures
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
fx=$work/fx   # inputs shared by every case, made once; checked unchanged at the end
mkdir -p "$fx" "$work/cases"

# ---- shared inputs --------------------------------------------------------------------------
text=$fixtures/text
T=(--data "$text" --model tiny --steps 1 --batch 2 --seq 16 --db '')   # a run that would start
TI=(--data "$text" --steps 1 --batch 2 --seq 16 --db '')                # the same, its model from --init-from
"$bin" train --data "$text" --model tiny --steps 2 --batch 2 --seq 16 --ckpt-every 2 --ckpt-dir "$fx/ckpts" \
  --db "$fx/good.db" > "$fx/good.out" 2>&1 || { echo "the good run failed:"; cat "$fx/good.out"; exit 1; }
cp -r "$(ls -d "$fx"/ckpts/run-*/step-000002)" "$fx/ck"
cp -r "$fixtures/hf_variants/plain" "$fx/hf"
rm -f "$fx/hf/reference.safetensors"
cp "$fixtures/tokenizers/gpt2/tokenizer.json" "$fx/tokenizer.json"
"$bin" tokenize --tokenizer "$fx/tokenizer.json" --out "$fx/gpt2shards" "$text" > "$fx/tok.out" 2>&1 ||
  { echo "tokenize failed:"; cat "$fx/tok.out"; exit 1; }
cp "$fixtures/torch_csv/1f1b_p2_v1_m2.compute_only.csv" "$fx/good.csv"
fx_sum=$(cd "$fx" && find . -type f ! -name 'good.db*' -exec sha256sum {} + | sort)

# Helpers a case's preparation may call (in its own folder).
# shard FILE MAGIC VERSION CLAIMED ACTUAL MAXID: an llm.c shard whose header claims CLAIMED
# tokens and whose body holds ACTUAL uint16 tokens cycling below MAXID+1.
shard() {
  python3 - "$@" <<'EOF'
import struct, sys
path, magic, version, claimed, actual, maxid = sys.argv[1], *map(int, sys.argv[2:])
head = struct.pack('<3i', magic, version, claimed) + bytes(4 * 253)
body = struct.pack('<%dH' % actual, *[(i * 7) % (maxid + 1) for i in range(actual)])
open(path, 'wb').write(head + body)
EOF
}
# poison FILE.safetensors TENSOR VALUE: the first element of TENSOR (F32) set to VALUE (nan, inf, -inf).
poison() {
  python3 - "$@" <<'EOF'
import json, struct, sys
path, name, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
data = bytearray(open(path, 'rb').read())
n = struct.unpack('<Q', data[:8])[0]
info = json.loads(data[8:8 + n])[name]
off = 8 + n + info['data_offsets'][0]
data[off:off + 4] = struct.pack('<f', value)
open(path, 'wb').write(data)
EOF
}
# config_edit FILE PYTHON: config.json rewritten after PYTHON ran on its dict c.
config_edit() {
  python3 - "$@" <<'EOF'
import json, sys
path, code = sys.argv[1], sys.argv[2]
c = json.load(open(path))
exec(code)
open(path, 'w').write(json.dumps(c, indent=2))
EOF
}
# state_edit DIR PYTHON: trainer_state.json of DIR edited (PYTHON on its dict s), sealed again.
state_edit() {
  python3 - "$1/trainer_state.json" "$2" <<'EOF'
import json, sys
path, code = sys.argv[1], sys.argv[2]
s = json.load(open(path))
exec(code)
open(path, 'w').write(json.dumps(s, indent='\t'))
EOF
  (cd "$1" && sha256sum $(awk '{print $2}' checksums.sha256) > seal.new && mv seal.new checksums.sha256)
}
first_tensor() { python3 -c "import json,struct,sys; d=open(sys.argv[1],'rb').read(); n=struct.unpack('<Q',d[:8])[0]; print(sorted(k for k in json.loads(d[8:8+n]) if k!='__metadata__')[0])" "$1"; }
export -f shard poison config_edit state_edit first_tensor

# ---- the cases: add NAME PREP ARGS... (PREP: shell run in the case folder first; '' none) ---
names=() preps=() argv=()
add() {
  names+=("$1")
  preps+=("$2")
  shift 2
  argv+=("$(printf '%q ' "$@")")
}

# Every count flag of train (and check's) with values that are not counts, or are out of range.
for flag in --steps --batch --seq --microbatches --stages --virtual --dp --val-every --val-batches \
            --ckpt-every --warmup; do
  for v in -1 abc '' 1.5 99999999999999999999 12x '3 '; do add "train $flag '$v'" '' train "${T[@]}" "$flag" "$v"; done
done
for v in -1 abc '' 0 nan inf; do add "train --timeout '$v'" '' train "${T[@]}" --timeout "$v"; done
for flag in --batch --seq --microbatches --stages --dp; do
  for v in -2 x 1e3; do add "check $flag '$v'" '' check --data "$text" --model tiny --db '' "$flag" "$v"; done
done
add "train --seed abc" '' train "${T[@]}" --seed abc
add "train --seed -1x" '' train "${T[@]}" --seed -1x
# Every real-valued flag: not a number, NaN, infinities, and values out of their range.
for flag in --lr --min-lr --beta1 --beta2 --eps --weight-decay --grad-clip; do
  for v in abc nan inf -inf -1 1e400 ''; do add "train $flag '$v'" '' train "${T[@]}" "$flag" "$v"; done
done
for flag in --beta1 --beta2; do add "train $flag 1.5" '' train "${T[@]}" "$flag" 1.5; done
add "train --eps 0" '' train "${T[@]}" --eps 0
add "train --min-lr above --lr" '' train "${T[@]}" --lr 1e-3 --min-lr 1e-2
# Choices and forms.
for pair in "--model nope" "--batching zigzag" "--schedule nope" "--transport carrier-pigeon" "--recompute some" \
            "--device tpu" "--precision fp8" "--split a,b" "--split 3,3" "--split -1,9" "--split 9,0" \
            "--split 4,,4" "--tokenizer missing.json" "--data missing" "--val-data missing" \
            "--init-from missing" "--resume missing" "--resume 99" "--model missing.json"; do
  set -- $pair
  add "train $1 $2" '' train "${T[@]}" --stages 2 "$1" "$2"
done
add "train --microbatches 3 of --batch 2" '' train "${T[@]}" --microbatches 3
add "train --stages 9 (tiny has 8 layers)" '' train "${T[@]}" --stages 9
add "train --virtual 3 with 1f1b" '' train "${T[@]}" --stages 2 --virtual 3
add "train --resume and --init-from" '' train "${T[@]}" --resume "$fx/ck" --init-from "$fx/hf"
add "train --tokenizer auto without --init-from" '' train "${T[@]}" --tokenizer auto
add "train --transport mpi without mpirun" '' train "${T[@]}" --transport mpi
add "train --device cuda (no GPU)" '' train "${T[@]}" --device cuda
add "train --val-every without --val-data" '' train "${T[@]}" --val-every 1 --val-batches 0
add "train unknown flag" '' train "${T[@]}" --bogus 1
add "train positional" '' train "${T[@]}" stray
for flag in --steps --data --model --lr --schedule --db --ckpt-dir --resume --trace --split; do
  add "train $flag without a value" '' train --data "$text" --db '' "$flag"
done
add "train without --data" '' train --db ''
add "unknown command" '' frobnicate
add "--version with an argument" '' --version extra

# plan
for pair in "--stages 0" "--stages x" "--microbatches 0" "--microbatches -3" "--virtual 0" "--cost 1" "--cost a,b" \
            "--cost 1,-2" "--cost 0,0" "--cost nan,1" "--latency -1" "--latency nan" "--seq 0" "--layers 0" \
            "--layers -1" "--top 0" "--schedule nope" "--model nope" "--from-run 1" "--stages 2000"; do
  set -- $pair
  add "plan $1 $2" '' plan --stages 4 --microbatches 8 "$1" "$2"
done
add "plan --with-comm without --dump-csv" '' plan --stages 2 --microbatches 4 --with-comm
add "plan positional" '' plan --stages 2 --microbatches 4 extra
add "plan --schedule zb-v --virtual 3" '' plan --stages 2 --microbatches 4 --schedule zb-v --virtual 3

# history and export
for a in "show" "show abc" "show 99" "show -1" "compare 1" "export" "frob" "list --limit -1" "list --limit x" \
         "list --status weird" "list --since yesterday" "list --since 2026-13-45" "export 1 --csv --json"; do
  add "history $a (good store)" 'cp "$fx/good.db" s.db' history $a --db s.db
done
add "history --out in a missing folder" 'cp "$fx/good.db" s.db' history export 1 --csv --out no/such/dir/x.csv --db s.db
add "history --out is a folder" 'cp "$fx/good.db" s.db; mkdir d' history export 1 --csv --out d --db s.db
add "history without a store" '' history list --db none.db
add "export without arguments" '' export
add "export with one argument" '' export latest
add "export 99" 'cp "$fx/good.db" s.db' export 99 out --db s.db
add "export missing folder" '' export missing out --db ''
add "export into a file" 'touch out' export "$fx/ck" out --db ''
add "export --bf16=x" '' export "$fx/ck" out --bf16=x --db ''
add "export into /proc" '' export "$fx/ck" /proc/pptrain-out --db ''

# tokenize
add "tokenize without --tokenizer" '' tokenize --out o "$text"
add "tokenize without --out" '' tokenize --tokenizer "$fx/tokenizer.json" "$text"
add "tokenize without text" '' tokenize --tokenizer "$fx/tokenizer.json" --out o
add "tokenize missing text" '' tokenize --tokenizer "$fx/tokenizer.json" --out o missing.txt
for pair in "--val-fraction 2" "--val-fraction -0.1" "--val-fraction x" "--val-docs -1" "--shard-tokens 0" \
            "--shard-tokens x" "--threads 0" "--threads -2" "--name a/b" "--name ''"; do
  set -- $pair
  add "tokenize $1 $2" '' tokenize --tokenizer "$fx/tokenizer.json" --out o "$1" "$(eval echo "$2")" "$text"
done
add "tokenize --out is a file" 'touch o' tokenize --tokenizer "$fx/tokenizer.json" --out o "$text"

# tokenizer.json, bad: each read by tokenize and by train --tokenizer.
tok_cases=(
  "not json|echo '{nope' > tok.json"
  "empty|: > tok.json"
  "truncated|head -c 3000 \"\$fx/tokenizer.json\" > tok.json"
  "a JSON array|echo '[]' > tok.json"
  "no model|python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); del t[\"model\"]; json.dump(t,open(\"tok.json\",\"w\"))' \"\$fx/tokenizer.json\""
  "unknown model type|python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); t[\"model\"][\"type\"]=\"Magic\"; json.dump(t,open(\"tok.json\",\"w\"))' \"\$fx/tokenizer.json\""
  "empty vocab|python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); t[\"model\"][\"vocab\"]={}; json.dump(t,open(\"tok.json\",\"w\"))' \"\$fx/tokenizer.json\""
  "a duplicate key|python3 -c 'import sys; s=open(sys.argv[1]).read(); open(\"tok.json\",\"w\").write(s.replace(\"{\", \"{\\\"version\\\": \\\"0\\\", \", 1))' \"\$fx/tokenizer.json\""
  "a folder without one|mkdir tok.json"
  "missing|:"
)
for row in "${tok_cases[@]}"; do
  add "tokenize: tokenizer.json ${row%%|*}" "${row#*|}" tokenize --tokenizer tok.json --out o "$text"
  add "train --tokenizer: tokenizer.json ${row%%|*}" "${row#*|}" train "${T[@]}" --tokenizer tok.json
done

# Token shards, bad: --data and --val-data.
shard_cases=(
  "wrong magic|shard d/x_train_000000.bin 12345 1 1000 1000 200"
  "wrong version|shard d/x_train_000000.bin 20240520 7 1000 1000 200"
  "truncated body|shard d/x_train_000000.bin 20240520 1 1000 500 200"
  "no tokens|shard d/x_train_000000.bin 20240520 1 0 0 200"
  "negative count|shard d/x_train_000000.bin 20240520 1 -5 10 200"
  "shorter than its header|head -c 100 /dev/zero > d/x_train_000000.bin"
  "ids over the vocabulary|shard d/x_train_000000.bin 20240520 1 4000 4000 300"
  "gpt2 ids, tiny model|cp \"\$fx\"/gpt2shards/*_train_*.bin d/"
  "uint32 with a u16 magic|shard d/x_train_000000.bin 20240801 1 1000 1000 200"
  "only _val_ shards|shard d/x_val_000000.bin 20240520 1 4000 4000 200"
  "an empty folder|:"
)
for row in "${shard_cases[@]}"; do
  add "--data shard: ${row%%|*}" "mkdir d; ${row#*|}" train "${T[@]/#$text/d}" --batching pack
  [[ $row == "only _val_"* ]] && continue   # a folder of _val_ shards is what --val-data reads
  add "--val-data shard: ${row%%|*}" "mkdir d; ${row#*|}" train "${T[@]}" --batching pack --val-data d --val-every 1
done
add "--data an empty text file" ': > e.txt' train "${T[@]/#$text/e.txt}"
add "--data a text file of NUL bytes" 'head -c 4096 /dev/zero > e.txt' train "${T[@]/#$text/e.txt}"

# config.json, bad: as --model CONFIG.json and in an --init-from folder.
config_cases=(
  "hidden_size 0|c['hidden_size']=0"
  "hidden_size -64|c['hidden_size']=-64"
  "hidden_size a string|c['hidden_size']='64'"
  "hidden_size 1.5|c['hidden_size']=1.5"
  "hidden_size 1e12|c['hidden_size']=10**12"
  "num_hidden_layers 0|c['num_hidden_layers']=0"
  "num_hidden_layers -1|c['num_hidden_layers']=-1"
  "heads do not divide hidden|c['num_attention_heads']=5; c.pop('head_dim')"
  "kv heads do not divide heads|c['num_key_value_heads']=3"
  "num_key_value_heads 0|c['num_key_value_heads']=0"
  "vocab_size 0|c['vocab_size']=0"
  "vocab_size null|c['vocab_size']=None"
  "intermediate_size -1|c['intermediate_size']=-1"
  "rms_norm_eps -1|c['rms_norm_eps']=-1"
  "rms_norm_eps a string|c['rms_norm_eps']='x'"
  "rope_theta 0|c['rope_parameters']['rope_theta']=0"
  "head_dim odd|c['head_dim']=7"
  "no hidden_size|c.pop('hidden_size')"
  "no vocab_size|c.pop('vocab_size')"
  "model_type gpt2|c['model_type']='gpt2'"
  "hidden_act gelu|c['hidden_act']='gelu'"
  "a JSON array|c=[1]"
)
for row in "${config_cases[@]}"; do
  prep="cp \"\$fx/hf/config.json\" c.json; config_edit c.json \"${row#*|}\""
  add "--model config: ${row%%|*}" "$prep" train "${T[@]}"  --model c.json
  add "--init-from config: ${row%%|*}" "cp -r \"\$fx/hf\" hf; config_edit hf/config.json \"${row#*|}\"" \
    train "${TI[@]}" --init-from hf
done
dup_prep='sed "0,/\"hidden_size\": 32,/s//\"hidden_size\": 32,\n  \"hidden_size\": 64,/"'
add "--model config: a duplicate key" "$dup_prep \"\$fx/hf/config.json\" > c.json" train "${T[@]}" --model c.json
add "--init-from config: a duplicate key" "cp -r \"\$fx/hf\" hf; $dup_prep \"\$fx/hf/config.json\" > hf/config.json" \
  train "${TI[@]}" --init-from hf
add "--model config: not JSON" 'echo "{hidden" > c.json' train "${T[@]}" --model c.json
add "--model config: empty" ': > c.json' train "${T[@]}" --model c.json
add "--model config: a folder" 'mkdir c.json' train "${T[@]}" --model c.json

# --init-from weights, bad.
for v in nan inf -inf; do
  add "--init-from weights: $v" 'cp -r "$fx/hf" hf; poison hf/model.safetensors "$(first_tensor hf/model.safetensors)" '"$v" \
    train "${TI[@]}" --init-from hf
  add "export: a checkpoint with $v weights" \
    'cp -r "$fx/ck" ck; poison ck/model-00001-of-00001.safetensors "$(first_tensor ck/model-00001-of-00001.safetensors)" '"$v"'; (cd ck && sha256sum $(awk "{print \$2}" checksums.sha256) > s.new && mv s.new checksums.sha256); state_edit ck "import hashlib; [f.update(sha256=hashlib.sha256(open(\"ck/\"+f[\"path\"],\"rb\").read()).hexdigest()) for f in s[\"files\"] if f[\"path\"].startswith(\"model-\")]"' \
    export ck out --db ''
done
hf_cases=(
  "no model.safetensors|rm hf/model.safetensors"
  "truncated weights|truncate -s 5000 hf/model.safetensors"
  "a header length past the end|printf '\\377\\377\\377\\377\\000\\000\\000\\000' | dd of=hf/model.safetensors conv=notrunc status=none"
  "a header that is not JSON|printf '{{{{{{{{' | dd of=hf/model.safetensors bs=1 seek=8 conv=notrunc status=none"
  "an empty weights file|: > hf/model.safetensors"
  "no config.json|rm hf/config.json"
  "weights of another shape|config_edit hf/config.json \"c['intermediate_size']=96\""
  "an index naming a missing shard|echo '{\"weight_map\": {\"model.norm.weight\": \"gone.safetensors\"}}' > hf/model.safetensors.index.json; rm hf/model.safetensors"
)
for row in "${hf_cases[@]}"; do
  add "--init-from: ${row%%|*}" "cp -r \"\$fx/hf\" hf; ${row#*|}" train "${TI[@]}" --init-from hf
done

# Checkpoint folders, bad: each resumed (--resume DIR) and exported.
shard_file=model-00001-of-00001.safetensors opt_file=optimizer-00001-of-00001.safetensors
ck_cases=(
  "no trainer_state.json|rm ck/trainer_state.json"
  "trainer_state.json empty|: > ck/trainer_state.json"
  "trainer_state.json not JSON|echo '{' > ck/trainer_state.json"
  "trainer_state.json truncated|truncate -s 100 ck/trainer_state.json"
  "no checksums.sha256 and a bad shard|rm ck/checksums.sha256; truncate -s 1000 ck/$shard_file"
  "checksums.sha256 garbage|echo 'not a seal' > ck/checksums.sha256"
  "a shard truncated|truncate -s 1000 ck/$shard_file"
  "a shard missing|rm ck/$shard_file"
  "the optimizer shard missing|rm ck/$opt_file"
  "a shard's byte flipped|printf 'Z' | dd of=ck/$shard_file bs=1 seek=5000 conv=notrunc status=none"
  "config.json missing|rm ck/config.json"
  "config.json garbage|echo 'x' > ck/config.json"
  "the index missing|rm ck/model.safetensors.index.json"
  "a folder that is empty|rm ck/*"
  "a file, not a folder|rm -r ck; touch ck"
  "state step -1 (sealed)|state_edit ck \"s['step']=-1\""
  "state step a string (sealed)|state_edit ck \"s['step']='2'\""
  "state adam_step 99 (sealed)|state_edit ck \"s['adam_step']=99\""
  "state data index huge (sealed)|state_edit ck \"s['data_cursor']['index']='99999999999'\""
  "state data epoch -1 (sealed)|state_edit ck \"s['data_cursor']['epoch']=-1\""
  "state without its files (sealed)|state_edit ck \"s.pop('files')\""
  "unsealed: trainer_state.json not JSON|rm ck/checksums.sha256; echo '{' > ck/trainer_state.json"
  "unsealed: trainer_state.json empty|rm ck/checksums.sha256; : > ck/trainer_state.json"
  "unsealed: trainer_state.json a JSON array|rm ck/checksums.sha256; echo '[1]' > ck/trainer_state.json"
  "unsealed: config.json garbage|rm ck/checksums.sha256; echo x > ck/config.json"
  "state with a duplicate key (sealed)|sed -i '0,/\"step\":/s//\"step\": 1, \"step\":/' ck/trainer_state.json; (cd ck && sha256sum \$(awk '{print \$2}' checksums.sha256) > s.new && mv s.new checksums.sha256)"
)
for row in "${ck_cases[@]}"; do
  add "--resume DIR: ${row%%|*}" "cp -r \"\$fx/ck\" ck; ${row#*|}" train --resume ck --steps 4 --db ''
  add "export DIR: ${row%%|*}" "cp -r \"\$fx/ck\" ck; ${row#*|}" export ck out --db ''
done

# Schedule CSVs, bad: read by plan and by train.
csv_cases=(
  "empty|: > s.csv"
  "a token that is not an action|echo '0F0,0X1' > s.csv"
  "a microbatch without its backward|printf '0F0,0F1,0B0\\n1F1,1B0,1F2,1B1\\n' > s.csv"
  "an action twice|printf '0F0,0F0,0B0,0B1\\n1F1,1B0,1F2,1B1\\n' > s.csv"
  "a deadlock|printf '0B0,0F0,0F1,0B1\\n1F1,1B0,1F2,1B1\\n' > s.csv"
  "a stage out of range|printf '0F0,0F1,0B0,0B1\\n9F1,1B0,1F2,1B1\\n' > s.csv"
  "a negative microbatch|printf '0F-1,0F1,0B0,0B1\\n1F1,1B0,1F2,1B1\\n' > s.csv"
  "binary garbage|head -c 300 /dev/urandom > s.csv"
  "missing|:"
  "a folder|mkdir s.csv"
)
for row in "${csv_cases[@]}"; do
  add "plan csv: ${row%%|*}" "${row#*|}" plan --schedule s.csv
  add "train csv: ${row%%|*}" "${row#*|}" train "${T[@]}" --stages 2 --microbatches 2 --schedule s.csv
done

# Outputs that cannot be written. (The harness may run as root: permission bits do not stop
# root, so the unwritable places are /proc's and files in the way.)
out_cases=(
  "--db in a missing folder|--db no/such/x.db"
  "--db a folder|--db ."
  "--db /proc/version|--db /proc/version"
  "--db in /proc|--db /proc/pptrain.db"
  "--trace in a missing folder|--trace no/such/t.json"
  "--trace a folder|--trace ."
  "--trace /proc/version|--trace /proc/version"
  "--trace in /proc|--trace /proc/t.json"
  "--ckpt-dir a file|--ckpt-dir f"
  "--ckpt-dir under a file|--ckpt-dir f/sub"
  "--ckpt-dir in /proc|--ckpt-dir /proc/ck"
  "--ckpt-dir /proc/self|--ckpt-dir /proc/self"
)
for row in "${out_cases[@]}"; do
  set -- ${row#*|}
  base=("${T[@]}")
  [ "$1" = --db ] && base=("${T[@]:0:${#T[@]}-2}")
  add "train ${row%%|*}" 'touch f' train "${base[@]}" "$1" "$2"
done

# Stores that are not stores, or are newer than this pptrain: every command that reads one.
store_cases=(
  "newer schema|cp \"\$fx/good.db\" s.db; sqlite3 s.db 'PRAGMA user_version = 99'"
  "not SQLite|head -c 8192 /dev/urandom > s.db"
  "a text file|echo hello > s.db"
  "another application's|sqlite3 s.db 'PRAGMA application_id = 42; CREATE TABLE t (x)'"
  "truncated|head -c 5000 \"\$fx/good.db\" > s.db"
)
for row in "${store_cases[@]}"; do
  add "train store: ${row%%|*}" "${row#*|}" train "${T[@]:0:${#T[@]}-2}" --db s.db
  add "history list store: ${row%%|*}" "${row#*|}" history list --db s.db
  add "history show store: ${row%%|*}" "${row#*|}" history show latest --db s.db
  add "export latest store: ${row%%|*}" "${row#*|}" export latest out --db s.db
  add "plan --from-run store: ${row%%|*}" "${row#*|}" plan --from-run latest --db s.db
  add "watch store: ${row%%|*}" "${row#*|}" watch --db s.db
  add "train --resume latest store: ${row%%|*}" "${row#*|}" train --resume latest --db s.db
done
add "watch without a store" '' watch --db none.db
add "watch --theme nope" 'cp "$fx/good.db" s.db' watch --db s.db --theme nope
add "console --theme nope" '' console --theme nope --data "$text" --db ''
add "console --themes-dir missing" '' console --themes-dir missing --data "$text" --db ''
add "console --steps -1" '' console --steps -1 --data "$text" --db ''

# ---- the run ---------------------------------------------------------------------------------
total=0 clean=0
# What the case folder holds: every folder, every file with its size and hash. SQLite's -wal
# and -shm beside a store the case made are left out and counted apart: a reader (history,
# watch, export) that opens a WAL store read-only leaves them, as sqlite3 does, and the next
# writer takes them up.
snapshot() { find . -mindepth 1 \( -name '*.db-wal' -o -name '*.db-shm' \) -prune -o \( -type d -printf 'd %p\n' \) -o \( -type f -printf 'f %p %s ' -exec sh -c 'sha256sum < "$1" | cut -c1-16' _ {} \; \) | sort; }
companions=0
export fx
for i in "${!names[@]}"; do
  name=${names[$i]}
  [ -n "$only" ] && ! [[ $name =~ $only ]] && continue
  d=$work/cases/$i
  mkdir "$d" && cd "$d" || exit 1
  [ -n "${preps[$i]}" ] && bash -c "${preps[$i]}" > "$work/prep.out" 2>&1
  snapshot > "$work/before"
  eval "args=(${argv[$i]})"
  timeout 60 "$bin" "${args[@]}" > "$work/out" 2>&1 < /dev/null
  rc=$?
  snapshot > "$work/after"
  [ -n "$(find . -name '*.db-wal' -o -name '*.db-shm')" ] && companions=$((companions + 1))
  lines=$(wc -l < "$work/out")
  why=""
  [ "$rc" -eq 2 ] || why="exit $rc"
  [ "$lines" -eq 1 ] || why="$why${why:+, }$lines lines"
  grep -qE 'Sanitizer|runtime error:' "$work/out" && why="$why${why:+, }a sanitizer report"
  cmp -s "$work/before" "$work/after" || why="$why${why:+, }the folder changed: $(diff "$work/before" "$work/after" | grep '^[<>]' | head -3 | tr '\n' ' ')"
  total=$((total + 1))
  [ -n "${VERBOSE:-}" ] && echo "$name: $(head -c 300 "$work/out")"
  if [ -z "$why" ]; then clean=$((clean + 1))
  else
    echo "UNCLEAN: $name: $why"
    head -c 600 "$work/out" | sed "s/^/    | /"; echo
  fi
  cd "$work" && rm -rf "$d"
done
[ "$(cd "$fx" && find . -type f ! -name 'good.db*' -exec sha256sum {} + | sort)" = "$fx_sum" ] ||
  echo "UNCLEAN: the shared inputs changed"
echo "bad inputs: $total cases, $clean clean ($companions left SQLite's -wal/-shm beside the store they were given)"
[ "$clean" -eq "$total" ]
