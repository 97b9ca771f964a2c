#!/usr/bin/env bash
# tests/cli/cli_hf_identity.sh: a Hugging Face folder keeps being that model through pptrain,
# and a folder pptrain would misread is refused when it is opened (issues 24 and 27):
#  - export and checkpoints keep bos/eos/pad as the source had them, and carry its
#    generation_config.json and tokenizer files, byte for byte and sha256-recorded, through
#    --init-from, --resume and export; a run without --init-from keeps the byte tokenizer's ids;
#  - a tied config beside an lm_head that differs from the embedding is untied, as transformers does;
#  - NaN or Inf in --init-from weights, a tensor the model does not use (more layers than
#    config.json, an extra tensor), and a duplicate JSON key in any file read: exit 2, one line
#    naming the tensor or the key and the file; the rotary inv_freq older transformers saved loads;
#  - check reads --init-from and --resume weights and vocabulary, and refuses flags it ignores.
# usage: cli_hf_identity.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"

data="$src/tests/fixtures/text"
small=(--data "$data" --batch 4 --seq 32 --db '')
"$bin" train "${small[@]}" --steps 2 --ckpt-dir base-ckpt > /dev/null
b2=$(ckpt_of base-ckpt '' 2)   # base-ckpt/run-<tag>/step-000002
"$bin" export "$b2" base > /dev/null
check "a run without --init-from exports the byte tokenizer's ids" \
  bash -c "grep -q '\"bos_token_id\":.256' base/config.json && grep -q '\"eos_token_id\":.257' base/config.json && ! grep -q pad_token_id base/config.json"
check "a run without --init-from exports no tokenizer files" bash -c "[ \$(ls base | wc -l) -eq 2 ]"

# A Llama-3-style identity: bos 1, eos a list, a pad, generation_config.json and tokenizer files
# (tokenizer.model binary, with NUL bytes).
cp -r base src
sed -i 's/"bos_token_id":.*256,/"bos_token_id": 1,/; s/"eos_token_id":.*257,/"eos_token_id": [2, 7], "pad_token_id": 0,/' src/config.json
printf '{"bos_token_id": 1, "eos_token_id": [2, 7], "pad_token_id": 0}' > src/generation_config.json
printf '{"version": "1.0", "model": {"type": "BPE"}}' > src/tokenizer.json
printf '{"bos_token": "<s>", "eos_token": "</s>"}' > src/tokenizer_config.json
printf '{"bos_token": "<s>"}' > src/special_tokens_map.json
printf 'sp\000model\001\000' > src/tokenizer.model
files=(generation_config.json tokenizer.json tokenizer_config.json special_tokens_map.json tokenizer.model)
same_files() {   # same_files DIR: DIR holds src's identity files, byte for byte
  for f in "${files[@]}"; do cmp -s "src/$f" "$1/$f" || return 1; done
}
ids_kept() {   # ids_kept CONFIG
  tr -d ' \t\n' < "$1" | grep -q '"bos_token_id":1,"eos_token_id":\[2,7\],"pad_token_id":0'
}
"$bin" train --init-from src "${small[@]}" --steps 2 --ckpt-dir ck > init.txt 2>&1
ckpt=$(ckpt_of ck '' 2)
check "--init-from: the checkpoint keeps bos, the eos list and pad" ids_kept "$ckpt/config.json"
check "--init-from: the checkpoint holds the generation and tokenizer files" same_files "$ckpt"
check "--init-from: trainer_state.json records each with its sha256" bash -c \
  "for f in ${files[*]}; do grep -q \"\\\"\$f\\\"\" '$ckpt/trainer_state.json' || exit 1; grep -q \"\$(sha256sum '$ckpt/'\$f | cut -c1-64)\" '$ckpt/trainer_state.json' || exit 1; done"
"$bin" train --resume "$ckpt" --data "$data" --db '' --steps 4 --ckpt-dir ck2 > resume.txt 2>&1
ck24=$(ckpt_of ck2 '' 4)
check "--resume: the next checkpoint keeps ids and files" bash -c "ls $ck24 >/dev/null"
ids_kept "$ck24/config.json" && same_files "$ck24" && pass || fail "--resume dropped the identity"
"$bin" export "$ck24" out > export.txt 2>&1
check "export keeps bos, the eos list and pad" ids_kept out/config.json
check "export copies the generation and tokenizer files" same_files out
check "export says it copied them" grep -q '+ 5 generation/tokenizer files' export.txt
# A tokenizer file changed after the checkpoint: the manifest's sha256 catches it.
cp -r "$ck24" tampered
printf '{"version": "2.0"}' > tampered/tokenizer.json
"$bin" train --resume tampered --data "$data" --db '' --steps 6 > tampered.txt 2>&1
code=$?
check "a changed tokenizer.json in a checkpoint is refused" \
  bash -c "[ $code -eq 2 ] && [ \$(wc -l < tampered.txt) -eq 1 ] && grep -q tokenizer.json tampered.txt"

# Under mpirun, each rank with its own folder (a node-local disk): the root's identity files
# reach the other rank's folder too, and each rank resumes from its own folder with them.
if command -v mpirun > /dev/null; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"   # Open MPI's own leaks
  mpi=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
  each() {   # each NP ARGS...: every rank runs pptrain with @R in its arguments replaced by its rank
    local np=$1; shift
    # shellcheck disable=SC2016
    "${mpi[@]}" -np "$np" sh -c 'bin=$1; shift
      for a do set -- "$@" "$(printf %s "$a" | sed "s/@R/$OMPI_COMM_WORLD_RANK/g")"; shift; done
      exec "$bin" "$@"' sh "$bin" "$@"
  }
  each 2 train --init-from src "${small[@]}" --steps 2 --stages 2 --transport mpi --timeout 60 \
    --ckpt-dir node@R > mpi.txt 2>&1 < /dev/null
  mr=$(basename "$(dirname "$(ckpt_of node0 '' 2)")")   # run-<tag>, the same in both folders
  check "mpirun P=2, node-local folders: both hold the ids and the identity files" \
    bash -c "$(declare -f same_files ids_kept); files=(${files[*]}); for n in node0 node1; do
               ids_kept \$n/$mr/step-000002/config.json && same_files \$n/$mr/step-000002 || exit 1; done"
  each 2 train --resume node@R/$mr/step-000002 --data "$data" --db '' --steps 3 --transport mpi --timeout 60 \
    --ckpt-dir node@R > mpi-resume.txt 2>&1 < /dev/null
  mr=$(basename "$(dirname "$(ckpt_of node0 '' 3)")")
  check "mpirun: each rank resumes from its own folder and carries the files on" \
    bash -c "$(declare -f same_files); files=(${files[*]}); same_files node0/$mr/step-000003 && same_files node1/$mr/step-000003"
  "${mpi[@]}" -np 2 "$bin" check --init-from src --data "$data" --batch 4 --seq 32 --stages 2 --transport mpi \
    --timeout 60 > mpi-check.txt 2>&1 < /dev/null
  "$bin" check --init-from src --data "$data" --batch 4 --seq 32 > src-check.txt 2>&1
  check "mpirun: check --init-from reads the folder's weights on every rank (the loss of one process)" \
    bash -c "grep -q '^  weights    src$' mpi-check.txt && grep -q bitwise mpi-check.txt && cmp -s <(grep '^  loss' mpi-check.txt) <(grep '^  loss' src-check.txt)"
else
  echo "mpirun cases skipped: no mpirun"
fi

expect_refusal() {   # expect_refusal "what" "it must mention" command args...: exit 2, one line
  local what=$1 want=$2
  shift 2
  "$bin" "$@" > out.txt 2> err.txt
  local code=$? lines
  lines=$(wc -l < err.txt)
  if [ "$code" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF -- "$want" err.txt; then pass
  else fail "$what: exit $code, $lines lines (want 2, 1 line with '$want'): $(cat err.txt)"; fi
}

# NaN / Inf in the weights: refused when loaded, naming the tensor (not at step 1).
hdr() { od -An -t u8 -N8 "$1" | tr -d ' '; }
offset_of() {   # offset_of FILE TENSOR: the byte where its data starts
  local n
  n=$(hdr "$1")
  echo $((8 + n + $(head -c $((8 + n)) "$1" | grep -ao "\"$2\":{[^}]*}" | sed 's/.*data_offsets":\[\([0-9]*\),.*/\1/')))
}
cp -r base nan && printf '\000\000\300\177' | dd of=nan/model.safetensors bs=1 seek=$(offset_of nan/model.safetensors model.embed_tokens.weight) conv=notrunc status=none
cp -r base inf && printf '\000\000\200\377' | dd of=inf/model.safetensors bs=1 seek=$(($(offset_of inf/model.safetensors model.norm.weight) + 12)) conv=notrunc status=none
expect_refusal "NaN at load" "tensor model.embed_tokens.weight holds NaN at element 0" train --init-from nan "${small[@]}" --steps 1
expect_refusal "-Inf at load" "tensor model.norm.weight holds Inf at element 3" train --init-from inf "${small[@]}" --steps 1
expect_refusal "NaN in check" "holds NaN" check --init-from nan --data "$data"
check "a refused --init-from writes no checkpoint" bash -c "! ls nan-ckpt 2>/dev/null"

# A tensor the model does not use: refused when the folder is opened, naming it, its file and why
# (weights are read by name; an unread one was dropped without a word). Tensors real Llama
# checkpoints carry and transformers ignores still load: the rotary inv_freq of older transformers.
add_tensor() {   # add_tensor FILE NAME DIMS NUMEL: FILE gains an F32 tensor of zeros, shape [DIMS], first
  local f=$1 name=$2 dims=$3 numel=$4 n data head len i
  n=$(hdr "$f")
  data=$(($(stat -c %s "$f") - 8 - n))
  head=$(head -c $((8 + n)) "$f" | tail -c "$n" | sed 's/ *$//')
  head="{\"$name\":{\"dtype\":\"F32\",\"shape\":[$dims],\"data_offsets\":[$data,$((data + 4 * numel))]},${head#\{}"
  while [ $((${#head} % 8)) -ne 0 ]; do head="$head "; done
  len=${#head}
  { for i in 0 1 2 3 4 5 6 7; do printf "$(printf '\\x%02x' $((len >> (8 * i) & 255)))"; done
    printf '%s' "$head"; tail -c "$data" "$f"; head -c $((4 * numel)) /dev/zero; } > "$f.new" && mv "$f.new" "$f"
}
cp -r base fewer && sed -i 's/"num_hidden_layers":[[:space:]]*8/"num_hidden_layers": 4/' fewer/config.json
unused="fewer/model.safetensors: tensor 'model.layers.4.self_attn.q_proj.weight' and 35 more are not used: "
unused+="config.json says 4 layers"
expect_refusal "8 layers under a config of 4" "--init-from: $unused" train --init-from fewer "${small[@]}" --steps 1
expect_refusal "8 layers under a config of 4, check" "$unused" check --init-from fewer --data "$data"
expect_refusal "8 layers under a config of 4, sample" "$unused" sample fewer --prompt hi --tokens 2
cp -r base extra && add_tensor extra/model.safetensors model.extra.weight 2,3 6
expect_refusal "an extra tensor" \
  "extra/model.safetensors: tensor 'model.extra.weight' is not used: not a tensor of a Llama model" \
  train --init-from extra "${small[@]}" --steps 1
cp -r base bias && add_tensor bias/model.safetensors model.layers.2.self_attn.k_proj.bias 32 32
expect_refusal "a bias the config turns off" \
  "tensor 'model.layers.2.self_attn.k_proj.bias' is not used: config.json says attention_bias false" \
  train --init-from bias "${small[@]}" --steps 1
cp -r base rotary
for l in 0 1 2 3 4 5 6 7; do
  add_tensor rotary/model.safetensors "model.layers.$l.self_attn.rotary_emb.inv_freq" 8 8
done
"$bin" train --init-from rotary "${small[@]}" --steps 1 > rotary.txt 2> rotary-err.txt
check "older transformers' rotary_emb.inv_freq per layer loads, without a word ($(head -c 300 rotary-err.txt))" \
  bash -c "grep -q '^done' rotary.txt && [ ! -s rotary-err.txt ]"
"$bin" check --init-from rotary --data "$data" --batch 4 --seq 32 > rotary-check.txt 2>/dev/null
"$bin" check --init-from base --data "$data" --batch 4 --seq 32 > base-loss.txt 2>/dev/null
check "and computes the loss of the same folder without them" \
  bash -c "grep -q '^  loss' base-loss.txt && cmp -s <(grep '^  loss' rotary-check.txt) <(grep '^  loss' base-loss.txt)"

# Duplicate keys: refused by name and file, wherever pptrain reads JSON.
cp -r base dup && sed -i 's/"hidden_size":/"hidden_size": 128, "hidden_size":/' dup/config.json
expect_refusal "duplicate in config.json" 'dup/config.json: duplicate key: "hidden_size" twice' train --init-from dup "${small[@]}"
expect_refusal "duplicate in --model" 'duplicate key: "hidden_size" twice' train --model dup/config.json "${small[@]}"
cp -r base gen && printf '{"eos_token_id": 2, "eos_token_id": 3}' > gen/generation_config.json
expect_refusal "duplicate in generation_config.json" 'gen/generation_config.json: duplicate key: "eos_token_id"' \
  train --init-from gen "${small[@]}" --steps 1
expect_refusal "duplicate in generation_config.json, check" 'duplicate key: "eos_token_id"' check --init-from gen --data "$data"
# A sharded HF folder (an index and its shard): read as it is, refused with a key twice in its index.
cp -r "$b2" sharded && rm sharded/trainer_state.json sharded/checksums.sha256 sharded/optimizer-*
"$bin" train --init-from sharded "${small[@]}" --steps 1 > sharded.txt 2>&1
check "a sharded HF folder loads" grep -q '^done' sharded.txt
cp -r sharded dupidx
sed -i 's/"weight_map":\s*{/"weight_map": {"model.norm.weight": "x.safetensors",/' dupidx/model.safetensors.index.json
expect_refusal "duplicate in the index" '"model.norm.weight" twice in "weight_map"' train --init-from dupidx "${small[@]}"

# A published config as transformers 5.24 saves SmolLM2 (metadata keys, rope_interleaved false),
# and the same with a math key at a value pptrain does not implement.
sed 's/"use_cache"/"_model_name_or_path": "HuggingFaceTB\/SmolLM2-135M", "unk_token_id": 0, "is_llama_config": true, "rope_interleaved": false, "partial_rotary_factor": 1.0, "use_cache"/' base/config.json > published.json
"$bin" train --model published.json "${small[@]}" --steps 1 > published.txt 2>&1
check "a published config's metadata keys are accepted" grep -q '^done' published.txt
sed 's/"rope_interleaved": false/"rope_interleaved": true/' published.json > interleaved.json
expect_refusal "rope_interleaved true" "rope_interleaved must be false" train --model interleaved.json "${small[@]}"

# Tied config, different lm_head: untied as transformers does, said once, exported untied.
cp -r base tied && sed -i 's/"tie_word_embeddings":.*false/"tie_word_embeddings": true/' tied/config.json
"$bin" train --init-from tied "${small[@]}" --steps 1 --ckpt-dir tied-ckpt > tied.txt 2> tied-err.txt
check "tied config + different lm_head: untied with one warning" \
  bash -c "[ \$(wc -l < tied-err.txt) -eq 1 ] && grep -q 'lm_head.weight differs from model.embed_tokens.weight: untied' tied-err.txt"
check "the untied run trains the untied model (its 0.33 M parameters)" grep -q '0.33 M params' tied.txt
if command -v mpirun > /dev/null; then   # every rank reads the folder; one says so
  "${mpi[@]}" -np 2 "$bin" train --init-from tied "${small[@]}" --steps 1 --stages 2 --transport mpi --timeout 60 \
    > tied-mpi.txt 2> tied-mpi-err.txt < /dev/null
  check "mpirun P=2: the untie warning once, not once per rank ($(grep -c untied tied-mpi-err.txt))" \
    [ "$(grep -c 'differs from model.embed_tokens.weight: untied' tied-mpi-err.txt)" -eq 1 ]
fi
check "its checkpoint says tie_word_embeddings false" grep -q '"tie_word_embeddings":.false' "$(ckpt_of tied-ckpt '' 1)/config.json"
"$bin" check --init-from tied --data "$data" --batch 4 --seq 32 > tied-check.txt 2>/dev/null
"$bin" check --init-from base --data "$data" --batch 4 --seq 32 > base-check.txt 2>/dev/null
check "the untied folder computes the loss of the untied original" \
  cmp -s <(grep '^  loss' tied-check.txt) <(grep '^  loss' base-check.txt)

# check: the --init-from / --resume weights and vocabulary, and only its own flags.
"$bin" check --data "$data" --batch 4 --seq 32 > seed-check.txt
check "check --init-from names the folder it read" grep -q '^  weights    base$' base-check.txt
check "check --init-from computes another loss than the seed's weights" \
  bash -c "! cmp -s <(grep '^  loss' seed-check.txt) <(grep '^  loss' base-check.txt)"
"$bin" check --resume "$b2" --stages 2 --db '' > resume-check.txt
check "check --resume reads a finished run's last checkpoint" \
  bash -c "grep -q '^  weights    $b2' resume-check.txt && grep -q bitwise resume-check.txt"
check "check --resume computes the loss of the same weights via --init-from" \
  cmp -s <(grep '^  loss' resume-check.txt) <(grep '^  loss' base-check.txt)
cp -r base v200 && sed -i 's/"vocab_size":.*259/"vocab_size": 200/' v200/config.json
expect_refusal "check uses the folder's vocabulary" "outside the model's vocabulary (200)" check --init-from v200 --data "$data"
for flag in --steps --ckpt-dir --val-data --val-every --lr --warmup --grad-clip --trace; do
  expect_refusal "check $flag" "check does not use $flag" check --data "$data" "$flag" 3
done
"$bin" check --help > check-help.txt
check "check --help lists --init-from and --resume, and none of the training-only flags" \
  bash -c "grep -q -- --init-from check-help.txt && grep -q -- --resume check-help.txt && ! grep -qE -- '--(steps|ckpt-dir|ckpt-every|val-data|lr|trace) ' check-help.txt"
cli_finish
