#!/usr/bin/env python3
"""Writes tests/fixtures/hf_generate/: a small random LlamaForCausalLM (GQA, tied embeddings,
Llama 3.1's llama3 RoPE), saved with save_pretrained, and expected.json: for a few prompts in
pptrain's byte tokens (BOS 256, then one id per byte, as `pptrain sample` encodes a prompt
for a folder without tokenizer.json), the ids transformers' greedy generate() gives, 64 new
tokens each. tests/cli/cli_sample.sh holds `pptrain sample`'s greedy ids to them.

  python3 tests/reference/hf_generate.py          # run by hand; CI never needs Python

The weights are drawn wider than transformers' default (initializer_range 0.3, not 0.02) so
the logits spread out: greedy decoding compares the two largest logits, and float32 sums in
another order could swap a near tie. The script computes every step in float64 as well,
requires the same ids, and records the smallest gap between the first and second logit
(min_margin) over every step; a seed whose generation emits EOS (257, where generation
would stop) or whose margin falls under 1e-3 is skipped for the next.
"""
import json
import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "hf_generate")
NEW = 64
BOS, EOS, PAD = 256, 257, 258
PROMPTS = ["Hello", "The pipeline", "a"]
CONFIG = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=259, max_position_embeddings=128, rms_norm_eps=1e-5,
              bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, tie_word_embeddings=True,
              initializer_range=0.3)
ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 16}


def config():
    try:
        cfg = LlamaConfig(**CONFIG, rope_parameters=ROPE)
    except TypeError:   # transformers 4.x: no rope_parameters
        cfg = LlamaConfig(**CONFIG, rope_theta=ROPE["rope_theta"], rope_scaling=ROPE)
    cfg._attn_implementation = "eager"
    return cfg


def greedy(model, ids):
    """generate()'s greedy ids, and the smallest top-1 / top-2 gap of the float64 logits."""
    x = torch.tensor([ids])
    out = model.generate(x, max_new_tokens=NEW, do_sample=False, eos_token_id=EOS, pad_token_id=PAD)
    new = out[0, len(ids):].tolist()
    m64 = LlamaForCausalLM(model.config).eval().double()
    m64.load_state_dict(model.state_dict())
    margin = float("inf")
    with torch.no_grad():
        seq = list(ids)
        for _ in range(NEW):
            logits = m64(torch.tensor([seq])).logits[0, -1]
            top = torch.topk(logits, 2)
            margin = min(margin, float(top.values[0] - top.values[1]))
            seq.append(int(top.indices[0]))
    return new, seq[len(ids):], margin


def main():
    for seed in range(1, 100):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config()).eval()
        rows, ok, worst = [], True, float("inf")
        for text in PROMPTS:
            ids = [BOS] + list(text.encode())
            new, new64, margin = greedy(model, ids)
            worst = min(worst, margin)
            ok = ok and new == new64 and len(new) == NEW and EOS not in new and margin > 1e-3
            rows.append({"prompt": text, "prompt_ids": ids, "ids": new})
        if ok:
            break
        print(f"seed {seed}: skipped (EOS, a near tie or float32 != float64)")
    os.makedirs(OUT, exist_ok=True)
    model.save_pretrained(OUT, safe_serialization=True)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        head = {"seed": seed, "new_tokens": NEW, "min_margin": worst}
        f.write(json.dumps(head)[:-1] + ', "prompts": [\n')   # a prompt per line
        f.write(",\n".join(json.dumps(r) for r in rows) + "\n]}\n")
    print(f"seed {seed}: min margin {worst:.4g}; wrote {OUT}")


if __name__ == "__main__":
    main()
