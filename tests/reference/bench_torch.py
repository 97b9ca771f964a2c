#!/usr/bin/env python3
"""PyTorch CPU training throughput on ONE thread (fp32) for pptrain's presets, as a speed
reference for `pptrain train --device cpu`.

  python3 tests/reference/bench_torch.py --preset tiny|small [--batch B] [--seq T] [--steps N]

Each step: forward of a Hugging Face LlamaForCausalLM (default attention implementation,
i.e. sdpa), cross-entropy over all B*T targets (random tokens), backward, clip_grad_norm_(1.0),
AdamW step. Prints the median step time after 2 warmup steps and a JSON line
{"preset", "batch", "seq", "tokens_per_s", "step_ms_median", ...}.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pptrain_ref as R  # noqa: E402

DEFAULTS = {"tiny": (8, 64), "small": (4, 256)}
WARMUP = 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(R.PRESETS), default="tiny")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--steps", type=int, default=10, help="timed steps (after 2 warmup steps)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    B = args.batch or DEFAULTS[args.preset][0]
    T = args.seq or DEFAULTS[args.preset][1]
    if T > R.PRESETS[args.preset]["max_position_embeddings"]:
        sys.exit(f"bench_torch: --seq {T} exceeds the preset's max positions")

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(args.seed)

    from transformers import LlamaForCausalLM
    model = LlamaForCausalLM(R.make_config(args.preset)).to(torch.float32)
    model.train()
    attn = model.config._attn_implementation
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
    V = R.VOCAB

    times = []
    for step in range(WARMUP + args.steps):
        tokens = torch.randint(0, 256, (B, T + 1))
        inputs, targets = tokens[:, :T], tokens[:, 1:]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(input_ids=inputs, use_cache=False).logits
        loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if step >= WARMUP:
            times.append(dt)
        print(f"step {step:3d}  loss {loss.item():.4f}  {dt * 1000:8.1f} ms"
              f"{'  (warmup)' if step < WARMUP else ''}", file=sys.stderr)

    med = statistics.median(times)
    out = {
        "preset": args.preset, "batch": B, "seq": T,
        "tokens_per_s": round(B * T / med, 1), "step_ms_median": round(med * 1000, 2),
        "step_ms_min": round(min(times) * 1000, 2),
        "steps": args.steps, "params": n_params, "threads": torch.get_num_threads(),
        "attn": attn, "torch": torch.__version__, "cpu": platform.processor() or platform.machine(),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
