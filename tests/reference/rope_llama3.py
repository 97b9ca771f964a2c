#!/usr/bin/env python3
"""Prints transformers' Llama 3 RoPE inverse frequencies as C hex floats, for the table in
tests/unit/test_kernels_fd.c (test_rope_llama3). Run by hand:

  python3 tests/reference/rope_llama3.py > /tmp/rope.txt

Cases: (head_dim, theta, factor, low, high, original_max_positions): Llama 3.1 8B's
parameters at head_dim 128 and 64, and a short original context that puts every band
(kept, interpolated, divided) inside head_dim 16.
"""
import transformers
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

CASES = [(128, 500000.0, 8.0, 1.0, 4.0, 8192), (64, 500000.0, 8.0, 1.0, 4.0, 8192), (16, 10000.0, 4.0, 1.0, 4.0, 64)]

print(f"// transformers {transformers.__version__}: _compute_llama3_parameters")
for hd, theta, factor, lo, hi, orig in CASES:
    cfg = LlamaConfig(hidden_size=hd * 4, num_attention_heads=4, head_dim=hd, max_position_embeddings=131072,
                      rope_parameters={"rope_type": "llama3", "rope_theta": theta, "factor": factor,
                                       "low_freq_factor": lo, "high_freq_factor": hi,
                                       "original_max_position_embeddings": orig})
    inv, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")
    vals = ", ".join(float(v).hex() + "f" for v in inv.tolist())
    print(f"{{{hd}, {theta}f, {{{factor}f, {lo}f, {hi}f, {orig}}}, {{{vals}}}}},")
