#!/usr/bin/env python3
"""torch.distributed.pipelining training on CPU, for bench/bench_speed.sh: the comparison
pptrain's docs/benchmarks.md tables come from. Never run by CI (torch is optional).

  python3 bench/torch_pipe.py --preset small --stages 2 --schedule 1f1b --batch 16 --seq 256 \
      --microbatches 8 --steps 6

P processes (gloo, one thread each: torch.set_num_threads(1)) each hold a contiguous slice of
a Hugging Face LlamaForCausalLM built from pptrain's preset (tests/reference/pptrain_ref.py)
or from a Hugging Face config.json (--preset PATH, the file `pptrain --model PATH` reads),
split as pptrain splits it (--split, else even); the first stage embeds, the last applies the
final norm, the LM head and the loss. Each step: the schedule's forward and backward over M
microbatches of random tokens, then AdamW. Prints one JSON line from rank 0: median step time
after a warmup step, tokens/s, and each rank's peak RSS (MiB).
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import pptrain_ref as R  # noqa: E402


class StageModule(nn.Module):
    """Layers [lo, hi) of the model, plus the embedding (first) or norm + head (last)."""

    def __init__(self, model, lo, hi, first, last):
        super().__init__()
        self.embed = model.model.embed_tokens if first else None
        self.layers = nn.ModuleList(model.model.layers[lo:hi])
        self.rotary = model.model.rotary_emb
        self.norm = model.model.norm if last else None
        self.head = model.lm_head if last else None

    def forward(self, x):
        h = self.embed(x) if self.embed is not None else x
        pos = torch.arange(h.shape[1]).unsqueeze(0).expand(h.shape[0], -1)
        cos_sin = self.rotary(h, pos)
        for layer in self.layers:
            out = layer(h, position_embeddings=cos_sin, attention_mask=None)
            h = out[0] if isinstance(out, tuple) else out
        if self.head is not None:
            h = self.head(self.norm(h))
        return h


def split_layers(L, P, split):
    if split:
        counts = [int(c) for c in split.split(",")]
    else:
        counts = [L // P + (1 if r < L % P else 0) for r in range(P)]
    assert len(counts) == P and sum(counts) == L, (counts, L, P)
    bounds = [sum(counts[:r]) for r in range(P + 1)]
    return bounds


def model_config(preset):
    """pptrain's preset by name, else a Hugging Face Llama config.json. Either trains in fp32
    (worker() casts the model), as pptrain does whatever the file's torch_dtype says."""
    if preset in R.PRESETS:
        return R.make_config(preset)
    from transformers import LlamaConfig
    cfg = LlamaConfig.from_json_file(preset)
    cfg.use_cache = False
    return cfg


def loss_fn(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def worker(rank, args, out_q):
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    dist.init_process_group("gloo", rank=rank, world_size=args.stages)
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    cfg = model_config(args.preset)
    model = LlamaForCausalLM(cfg).to(torch.float32)
    P, L = args.stages, cfg.num_hidden_layers
    b = split_layers(L, P, args.split)
    module = StageModule(model, b[rank], b[rank + 1], rank == 0, rank == P - 1)
    del model
    stage = PipelineStage(module, rank, P, torch.device("cpu"))
    sched_cls = {"1f1b": Schedule1F1B, "gpipe": ScheduleGPipe}[args.schedule]
    schedule = sched_cls(stage, args.microbatches, loss_fn=loss_fn)
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    times = []
    for step in range(args.steps + 1):
        x = torch.randint(0, min(R.VOCAB, cfg.vocab_size), (args.batch, args.seq), generator=g)
        y = torch.randint(0, min(R.VOCAB, cfg.vocab_size), (args.batch, args.seq), generator=g)
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if rank == 0:
            schedule.step(x)
        elif rank == P - 1:
            schedule.step(target=y, losses=[])
        else:
            schedule.step()
        opt.step()
        dist.barrier()
        if step > 0:   # the first step warms up
            times.append(time.perf_counter() - t0)
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    all_rss = [torch.zeros(1) for _ in range(P)]
    dist.all_gather(all_rss, rss)
    if rank == 0:
        med = statistics.median(times)
        out_q.put({"system": "torch.distributed.pipelining", "torch": torch.__version__, "preset": args.preset,
                   "stages": P, "schedule": args.schedule, "batch": args.batch, "seq": args.seq,
                   "microbatches": args.microbatches, "step_ms_median": med * 1e3,
                   "tokens_per_s": args.batch * args.seq / med, "peak_rss_mib": [float(r) for r in all_rss]})
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="small",
                    help=f"{', '.join(sorted(R.PRESETS))}, or a Hugging Face Llama config.json path")
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--schedule", choices=["1f1b", "gpipe"], default="1f1b")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5, help="timed steps (after one warmup step)")
    ap.add_argument("--split", default="", help="layers per stage, e.g. 4,4 (even by default)")
    ap.add_argument("--port", type=int, default=29511)
    args = ap.parse_args()
    if args.preset not in R.PRESETS and not os.path.isfile(args.preset):
        ap.error(f"--preset: '{args.preset}' is neither a preset ({', '.join(sorted(R.PRESETS))}) nor a file")
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.start_processes(worker, args=(args, q), nprocs=args.stages, start_method="spawn", join=True)
    print(json.dumps(q.get()))


if __name__ == "__main__":
    main()
