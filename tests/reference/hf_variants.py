#!/usr/bin/env python3
"""Writes tests/fixtures/hf_variants/: one small LlamaForCausalLM per config variant users bring
from today's transformers, saved with save_pretrained (config.json + model.safetensors as
transformers writes them), plus reference.safetensors: tokens, targets, transformers' logits
(computed in float64, stored as float32) and loss (float64). tests/unit/test_hf_variants.c loads
each folder with pptrain (--init-from's reader) and holds its logits and loss to these.

  python3 tests/reference/hf_variants.py          # run by hand; CI never needs Python

Variants: plain (transformers 5's rope_parameters), rope_theta 5000 and 500000 (the first in
rope_parameters, the second as 4.x's top-level key), Llama 3.1's llama3 RoPE scaling (with a
short original context so every frequency band is exercised at T=48), head_dim != hidden/heads,
tied embeddings, attention_bias and mlp_bias.
"""
import json
import os

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "hf_variants")
B, T, VOCAB = 2, 48, 259
BASE = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=128, rms_norm_eps=1e-5,
            bos_token_id=256, eos_token_id=257, pad_token_id=258)
VARIANTS = {
    "plain": dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    "theta5000": dict(rope_parameters={"rope_type": "default", "rope_theta": 5000.0}),
    "theta500000_legacy": dict(rope_theta=500000.0),
    "llama3": dict(rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 16}),
    "head_dim": dict(head_dim=16, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    "tied": dict(tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    "attention_bias": dict(attention_bias=True, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    "mlp_bias": dict(mlp_bias=True, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
}


def build(name, kw):
    torch.manual_seed(sum(map(ord, name)))
    try:
        cfg = LlamaConfig(**BASE, **kw)
    except TypeError:   # transformers 4.x: no rope_parameters
        kw = dict(kw)
        rp = kw.pop("rope_parameters", None)
        if rp:
            kw["rope_theta"] = rp["rope_theta"]
            if rp["rope_type"] != "default":
                kw["rope_scaling"] = rp
        cfg = LlamaConfig(**BASE, **kw)
    cfg._attn_implementation = "eager"
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():   # biases start at 0 in transformers: give them values worth testing
        for n, p in model.named_parameters():
            if n.endswith(".bias"):
                p.normal_(0.0, 0.05)
    return model


def main():
    g = np.random.default_rng(7)
    tokens = g.integers(0, VOCAB, size=(B, T), dtype=np.int32)
    targets = g.integers(0, VOCAB, size=(B, T), dtype=np.int32)
    targets[0, -5:] = -1   # a few pads
    for name, kw in VARIANTS.items():
        model = build(name, kw)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        model.save_pretrained(d, safe_serialization=True)
        if name.endswith("_legacy"):   # as transformers 4.x wrote it: a top-level rope_theta
            path = os.path.join(d, "config.json")
            c = json.load(open(path))
            c["rope_theta"] = c.pop("rope_parameters")["rope_theta"]
            json.dump(c, open(path, "w"), indent=2, sort_keys=True)
        m64 = build(name, kw)
        m64.load_state_dict(model.state_dict())
        m64 = m64.to(torch.float64)
        with torch.no_grad():
            logits = m64(input_ids=torch.from_numpy(tokens).long(), use_cache=False).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                     torch.from_numpy(targets).long().reshape(-1), ignore_index=-1)
        save_file({"tokens": tokens, "targets": targets, "logits": logits.float().numpy(),
                   "loss": np.array([loss.item()], dtype=np.float64)},
                  os.path.join(d, "reference.safetensors"),
                  metadata={"transformers": transformers.__version__, "torch": torch.__version__,
                            "config": json.dumps(kw, sort_keys=True)})
        print(f"{name}: loss {loss.item():.9f}")


if __name__ == "__main__":
    main()
