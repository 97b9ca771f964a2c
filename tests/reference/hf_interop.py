#!/usr/bin/env python3
"""By hand: proves a pptrain checkpoint folder loads in Hugging Face transformers and gives
pptrain's logits, and writes the fixture tests/unit/test_hf_interop.c checks.

    build/pptrain train --data tests/fixtures/text --model tiny --steps 20 --batch 8 --seq 64 \
        --stages 4 --microbatches 4 --lr 3e-3 --warmup 5 --db '' --ckpt-dir /tmp/hfgen
    python3 tests/reference/hf_interop.py /tmp/hfgen/step-000020 tests/fixtures/hf_interop

It loads the whole checkpoint folder as written (model shards + index + config.json, beside the
optimizer shards and trainer_state.json) with LlamaForCausalLM.from_pretrained, runs fixed
tokens in float32, and writes to OUT:
  checkpoint/   the folder's model shards, index and config.json (what the C test loads)
  logits.safetensors   "tokens" (I32, B x T) and "logits" (F32, B x T x V) from transformers,
                       metadata: sha256 of every copied file, versions.
"""
import hashlib
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers import LlamaForCausalLM


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def main():
    src, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = LlamaForCausalLM.from_pretrained(src, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    cfg = model.config
    # Two rows of 24 byte tokens: BOS + text, as pptrain's byte tokenizer makes them.
    texts = [b"Pipelines keep every GPU", b"The harbor at dawn was s"]
    tokens = torch.tensor([[256] + list(t[:23]) for t in texts], dtype=torch.int32)
    with torch.no_grad():
        logits = model(input_ids=tokens.long()).logits.float().contiguous()
    os.makedirs(os.path.join(out, "checkpoint"), exist_ok=True)
    meta = {"transformers": transformers.__version__, "torch": torch.__version__,
            "source": "pptrain checkpoint loaded with LlamaForCausalLM.from_pretrained"}
    index = json.load(open(os.path.join(src, "model.safetensors.index.json")))
    files = sorted(set(index["weight_map"].values())) + ["model.safetensors.index.json", "config.json"]
    for name in files:
        shutil.copyfile(os.path.join(src, name), os.path.join(out, "checkpoint", name))
        meta["sha256:" + name] = sha256(os.path.join(out, "checkpoint", name))
    save_file({"tokens": tokens, "logits": logits}, os.path.join(out, "logits.safetensors"), metadata=meta)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"loaded {src}: {cfg.num_hidden_layers} layers, {n_params} parameters; "
          f"logits {tuple(logits.shape)}, |logits| = {logits.norm():.6f}")


if __name__ == "__main__":
    main()
