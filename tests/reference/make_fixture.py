#!/usr/bin/env python3
"""Builds tests/fixtures/tiny_reference.safetensors: what Hugging Face transformers computes
for pptrain's `tiny` Llama initialized exactly as pptrain initializes it (seed 1337).

  python3 tests/reference/make_fixture.py [--out PATH] [--seed 1337] [--clip X] [--stock-hf]

See tests/reference/README.md for what the fixture holds. Run by hand, never by CI.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pptrain_ref as R  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRESET = "tiny"
B, T = 4, 32
STEPS, WARMUP, LR, MIN_LR = 10, 3, 1e-2, 1e-3
BETAS, EPS, WEIGHT_DECAY = (0.9, 0.99), 1e-8, 0.1
HEAD = 16

# Byte lengths vary so batches mix padded rows (< 31 bytes) and clipped rows (>= 32 bytes);
# one sentence has multi-byte UTF-8 so ids above 127 occur.
SENTENCES = [
    "The cat sat on the mat.",
    "Pipelines keep every GPU busy when the schedule is good.",
    "Hello, world!",
    "Bubbles are idle time.",
    "A microbatch flows forward through each stage, then back.",
    "Zero bubble splits backward into two halves.",
    "Loss goes down.",
    "Tokens are just bytes here: ids 0 to 255.",
    "Seeds make runs repeatable.",
    "Gradients are summed over microbatches before the step.",
    "Café crème, s'il vous plaît.",
    "Checkpoints are written to a temp file, fsynced, renamed.",
    "Small models train fast on a laptop CPU.",
]


def batch_texts(s):
    """Batch s takes sentences (3s + j) mod 13, j = 0..3: ten distinct batches."""
    return [SENTENCES[(3 * s + j) % len(SENTENCES)] for j in range(B)]


def build_model(weights):
    from transformers import LlamaForCausalLM
    cfg = R.make_config(PRESET, attn_implementation="eager")
    model = LlamaForCausalLM(cfg)
    model.config._attn_implementation = "eager"
    model.to(torch.float64)
    names = [n for n, _ in model.named_parameters()]
    want = [n for n, _ in R.param_shapes(PRESET)]
    assert names == want, f"HF parameter order differs from pptrain's:\n{names}\n{want}"
    load_weights(model, weights)
    model.train()   # dropout is 0; train mode only matters for bookkeeping
    return model


def load_weights(model, weights):
    sd = {n: torch.from_numpy(w).to(torch.float64) for n, w in weights.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and not [m for m in missing if "rotary" not in m], (missing, unexpected)


def loss_and_logits(model, inputs, targets):
    logits = model(input_ids=torch.from_numpy(inputs).long(), use_cache=False).logits
    V = logits.shape[-1]
    # mean over non-pad targets = sum of per-token CE / number of non-pad targets
    loss = F.cross_entropy(logits.reshape(-1, V), torch.from_numpy(targets).long().reshape(-1),
                           ignore_index=-1)
    return loss, logits


def train(weights, clip, batches, fp32=False):
    """10 AdamW steps; fp32=True: the same training in stock float32 PyTorch (the yardstick for
    how far an fp32 implementation's weights land from float64 after Adam, test_reference.c)."""
    model = build_model(weights)
    if fp32:
        model.to(torch.float32)
    elif not ARGS.stock_hf:
        R.make_exact_float64(model)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY,
                            foreach=False)
    losses, lrs, norms = [], [], []
    for s, (inp, tgt) in enumerate(batches):
        opt.zero_grad(set_to_none=True)
        loss, _ = loss_and_logits(model, inp, tgt)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=clip)
        lr = R.lr_at(s, LR, WARMUP, STEPS, MIN_LR)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        losses.append(loss.item())
        lrs.append(lr)
        norms.append(norm.item())
    final = {n: p.detach().to(torch.float32).numpy().copy() for n, p in model.named_parameters()}
    return np.array(losses), np.array(lrs), np.array(norms), final


def main():
    out = ARGS.out or os.path.join(REPO, "tests", "fixtures", "tiny_reference.safetensors")
    torch.manual_seed(0)   # nothing random should remain; set anyway
    weights = R.init_weights(PRESET, ARGS.seed)
    init_check = weights["model.embed_tokens.weight"].reshape(-1)[:4]
    print("init check: model.embed_tokens.weight[:4] =",
          " ".join(f"{v:.9g}" for v in init_check),
          "(bits", " ".join(f"0x{b:08x}" for b in init_check.view(np.uint32)) + ")")

    inputs, targets = R.make_batch(batch_texts(0), T)
    npad = [(targets[r] == -1).sum() for r in range(B)]
    assert sum(1 for p in npad if p > 0) >= 2 and any(p == 0 for p in npad), npad

    # Stock HF (float32 RMSNorm / RoPE / softmax inside a float64 model) vs exact float64.
    model = build_model(weights)
    with torch.no_grad():
        stock_loss, stock_logits = loss_and_logits(model, inputs, targets)
    if not ARGS.stock_hf:
        R.make_exact_float64(model)
    loss, logits = loss_and_logits(model, inputs, targets)
    d = (logits - stock_logits).abs().max().item()
    print(f"stock HF vs exact float64: max |dlogit| = {d:.3g}, "
          f"|dloss| = {abs(loss.item() - stock_loss.item()):.3g}")
    model.zero_grad(set_to_none=True)
    loss.backward()
    grads = {n: p.grad.detach().to(torch.float32).numpy().copy() for n, p in model.named_parameters()}
    ntok = int((targets != -1).sum())
    print(f"batch 0: {ntok} non-pad targets (pads per row {npad}), loss = {loss.item():.12f} "
          f"(ln 259 = {math.log(259):.6f})")

    batches = [R.make_batch(batch_texts(s), T) for s in range(STEPS)]
    if ARGS.clip is not None:
        clip = ARGS.clip
    else:
        _, _, free_norms, _ = train(weights, math.inf, batches)
        # median of the unclipped run's norms, 2 significant digits; then make sure the clipped
        # run really mixes clipped and unclipped steps (clipping changes later norms).
        clip = float(f"{np.median(free_norms):.2g}")
        print("unclipped grad norms:", " ".join(f"{v:.4g}" for v in free_norms))
    losses, lrs, norms, final = train(weights, clip, batches)
    clipped = norms > clip
    if ARGS.clip is None:
        for _ in range(20):
            if 0 < clipped.sum() < STEPS:
                break
            clip = float(f"{np.median(norms):.2g}")
            losses, lrs, norms, final = train(weights, clip, batches)
            clipped = norms > clip
    assert abs(losses[0] - loss.item()) <= 1e-12 * abs(loss.item()), (losses[0], loss.item())

    tensors = {
        "input_ids": inputs,
        "targets": targets,
        "logits": logits.detach().to(torch.float32).numpy(),
        "loss": np.array([loss.item()], dtype=np.float64),
    }
    for n, _ in R.param_shapes(PRESET):
        tensors["grad." + n] = grads[n]
    for n, _ in R.param_shapes(PRESET):
        tensors["init_head." + n] = weights[n].reshape(-1)[:HEAD].copy()
    for n, _ in R.param_shapes(PRESET):
        tensors["final_head." + n] = final[n].reshape(-1)[:HEAD].copy()
    _, _, _, final32 = train(weights, clip, batches, fp32=True)
    for n, _ in R.param_shapes(PRESET):
        tensors["final_head_fp32." + n] = final32[n].reshape(-1)[:HEAD].copy()
    tensors["train_inputs"] = np.stack([b[0] for b in batches])
    tensors["train_targets"] = np.stack([b[1] for b in batches])
    tensors["train_losses"] = losses.astype(np.float64)
    tensors["train_lrs"] = lrs.astype(np.float64)
    tensors["train_grad_norms"] = norms.astype(np.float64)

    import transformers
    meta = {
        "config": json.dumps(R.config_dict(PRESET), sort_keys=True),
        "preset": PRESET,
        "seed": str(ARGS.seed),
        "init_std": "0.02",
        "batch": str(B),
        "seq": str(T),
        "optimizer": json.dumps({"name": "AdamW", "lr": LR, "min_lr": MIN_LR, "warmup": WARMUP,
                                 "steps": STEPS, "betas": list(BETAS), "eps": EPS,
                                 "weight_decay": WEIGHT_DECAY, "decay": "all parameters",
                                 "clip": clip, "torch_clip_eps": 1e-6}),
        "lr": repr(LR), "min_lr": repr(MIN_LR), "warmup": str(WARMUP), "steps": str(STEPS),
        "beta1": repr(BETAS[0]), "beta2": repr(BETAS[1]), "eps": repr(EPS),
        "weight_decay": repr(WEIGHT_DECAY), "clip": repr(clip),
        "loss": "mean over non-pad targets (target -1) of cross-entropy, float64",
        "precision": ("float64 weights (float32 init values upcast); "
                      + ("stock HF (RMSNorm, RoPE, softmax in float32)" if ARGS.stock_hf
                         else "RMSNorm, RoPE and softmax patched to float64")),
        "attn_implementation": "eager",
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    }
    from safetensors.numpy import save_file
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, out, metadata=meta)
    size = os.path.getsize(out)
    assert size < 2 * 1024 * 1024, size

    print(f"clip = {clip}  (clipped at steps {[int(i) for i in np.nonzero(clipped)[0]]})")
    print("step  lr          grad_norm   loss")
    for s in range(STEPS):
        print(f"{s:4d}  {lrs[s]:.8f}  {norms[s]:10.6f}  {losses[s]:.10f}{'  clipped' if clipped[s] else ''}")
    print(f"wrote {out}: {len(tensors)} tensors, {size} bytes ({size / 1024 / 1024:.2f} MiB)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="fixture path (default tests/fixtures/tiny_reference.safetensors)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--clip", type=float, help="max grad norm (default: chosen so that clipping "
                                               "is active on some steps and not on others)")
    ap.add_argument("--stock-hf", action="store_true",
                    help="keep HF's float32 RMSNorm/RoPE/softmax instead of exact float64")
    ARGS = ap.parse_args()
    main()
