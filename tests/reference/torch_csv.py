#!/usr/bin/env python3
"""Writes tests/fixtures/torch_csv/: the schedule CSVs torch.distributed.pipelining writes, in
both of its formats, for every schedule class it has, over a small grid of (P, V, M); then
checks by hand that torch loads what `pptrain plan --dump-csv --with-comm` writes for each.

  python3 tests/reference/torch_csv.py [path/to/pptrain]   # run by hand; CI never needs Python

Files: <name>_p<P>_v<V>_m<M>.compute_only.csv   (torch's pipeline_order, _dump_csv's
       compute_only format; idle slots are empty cells) and ...compute_comms.csv (torch's
       lowering: UNSHARD/RESHARD, SEND/RECV, WAIT_SEND_*, REDUCE_GRAD/WAIT_REDUCE_GRAD). MANIFEST.txt
       lists every file, what torch refused and the checks of pptrain's output.
tests/unit/test_torch_csv.c loads each file, compares it with pptrain's built-in of the same
name and shape, and trains with it.

No process group is needed: the schedule classes build pipeline_order from their stages'
indices alone, so the stages here are stand-ins that carry only those (as torch's own
test_schedule.py does with its mock stages).
"""
import csv
import io
import os
import subprocess
import sys
import tempfile

import torch
import torch.distributed.pipelining.schedules as S
from torch.distributed.pipelining.stage import _PipelineStageBase

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "torch_csv")
PPTRAIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "build", "pptrain")

# (fixture name = pptrain's built-in name where it has one, torch class, V, stage map)
CLASSES = [
    ("gpipe", S.ScheduleGPipe, 1, "loop"),
    ("1f1b", S.Schedule1F1B, 1, "loop"),
    ("interleaved-1f1b", S.ScheduleInterleaved1F1B, 2, "loop"),
    ("looped-bfs", S.ScheduleLoopedBFS, 2, "loop"),
    ("zb-h1", S.ScheduleInterleavedZeroBubble, 1, "loop"),
    ("interleaved-zb", S.ScheduleInterleavedZeroBubble, 2, "loop"),
    ("zb-v", S.ScheduleZBVZeroBubble, 2, "v"),
    ("dualpipe-v", S.ScheduleDualPipeV, 2, "v"),
]


class StandIn(_PipelineStageBase):
    """A stage with an index and a place in the group, and nothing to run."""

    def __init__(self, stage_index, num_stages, group_size, group_rank):
        self.stage_index, self.num_stages = stage_index, num_stages
        self.group_size, self.group_rank = group_size, group_rank
        self.submod = None

    def _create_grad_recv_info(self, *a, **k):
        pass

    def _prepare_backward_infra(self, *a, **k):
        pass

    def _prepare_forward_infra(self, *a, **k):
        pass


def rank0_stages(P, V, style):
    n = P * V
    idx = [0, n - 1] if style == "v" else [v * P for v in range(V)]
    return [StandIn(i, n, P, 0) for i in idx]


def rows_text(order, keep=lambda a: True):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for rank in sorted(order):
        w.writerow(["" if a is None else str(a) for a in order[rank] if a is None or keep(a)])
    return buf.getvalue()


def runtime_for(P, V, M, style):
    """A bare _PipelineScheduleRuntime, to load a CSV with torch's own loader."""
    return S._PipelineScheduleRuntime(rank0_stages(P, V, style), M)


def torch_load(text, P, V, M, style, fmt):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(text)
    try:
        rt = runtime_for(P, V, M, style)
        rt._load_csv(f.name, format=fmt)
        return rt
    finally:
        os.unlink(f.name)


def torch_files(name, cls, P, V, M, style):
    """(compute_only text, compute_comms text or None, note)."""
    if issubclass(cls, S.PipelineScheduleSingle):
        order = cls(rank0_stages(P, V, style)[0], M)._get_pipeline_order()
        # The single-stage classes put REDUCE_GRAD in pipeline_order; torch's compute_only
        # loader refuses it, so the compute_only file is written without it.
        compute = rows_text(order, lambda a: a.is_compute_op)
        try:
            rt = torch_load(compute, P, V, M, style, "compute_only")
        except Exception as e:  # torch refuses its own order (1F1B, see below)
            return compute, None, f"torch's loader refuses its own pipeline_order: {str(e).splitlines()[0][:160]}"
        return compute, rows_text(rt.pipeline_order_with_comms), ""
    sch = cls(rank0_stages(P, V, style), M)
    return rows_text(sch.pipeline_order), rows_text(sch.pipeline_order_with_comms), ""


def pptrain_with_comm(path):
    r = subprocess.run([PPTRAIN, "plan", "--schedule", path, "--dump-csv", "--with-comm"],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip())
    return r.stdout


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".csv"):
            os.unlink(os.path.join(OUT, f))
    manifest = [f"# written by tests/reference/torch_csv.py with torch {torch.__version__}",
                "# file | torch's note | pptrain --with-comm output: loads in torch's compute_comms loader, "
                "and equals torch's own lowering of the same order"]
    for name, cls, V, style in CLASSES:
        for P in (2, 3, 4):
            for M in (P, 2 * P):
                base = f"{name}_p{P}_v{V}_m{M}"
                try:
                    compute, comms, note = torch_files(name, cls, P, V, M, style)
                except Exception as e:
                    manifest.append(f"{base} | torch refuses this shape: {str(e).splitlines()[0][:160]}")
                    continue
                files = [(f"{base}.compute_only.csv", compute)] + ([(f"{base}.compute_comms.csv", comms)] if comms else [])
                for fname, text in files:
                    with open(os.path.join(OUT, fname), "w") as f:
                        f.write(text)
                    check = ""
                    if not note and os.path.exists(PPTRAIN):
                        try:
                            mine = pptrain_with_comm(os.path.join(OUT, fname))
                            torch_load(mine, P, V, M, style, "compute_comms")
                            check = "torch loads it"
                            same = mine == comms
                            check += ", same as torch's lowering" if same else ", DIFFERS from torch's lowering"
                            if not same and name == "looped-bfs":  # test_torch_csv.c says why
                                check += " (as meant: pptrain writes the forward-order backward it runs)"
                        except Exception as e:
                            check = f"FAILED: {str(e).splitlines()[0][:200]}"
                    manifest.append(f"{fname} | {note or '-'} | {check or 'not checked'}")
    manifest.append("# pptrain's built-ins written by `pptrain plan --dump-csv [--with-comm]`, loaded by torch's "
                    "_load_csv (compute_only and compute_comms)")
    for name, V, style in (("gpipe", 1, "loop"), ("1f1b", 1, "loop"), ("interleaved-1f1b", 2, "loop"),
                           ("looped-bfs", 2, "loop"), ("zb-h1", 1, "loop"), ("interleaved-zb", 2, "loop"),
                           ("zb-v", 2, "v"), ("dualpipe-v", 2, "v")):
        for P in (2, 3, 4):
            for M in (P, 2 * P):
                if name == "dualpipe-v" and M < 2 * P:  # refused by both, M >= stages
                    continue
                got = []
                for fmt, flags in (("compute_only", []), ("compute_comms", ["--with-comm"])):
                    r = subprocess.run([PPTRAIN, "plan", "--stages", str(P), "--microbatches", str(M), "--virtual",
                                        str(V), "--schedule", name, "--dump-csv"] + flags, capture_output=True, text=True)
                    try:
                        if r.returncode:
                            raise RuntimeError(r.stderr.strip())
                        rt = torch_load(r.stdout, P, V, M, style, fmt)
                        order = rt.pipeline_order if fmt == "compute_only" else rt.pipeline_order_with_comms
                        pairs = sum(a is not None and a.computation_type == S.OVERLAP_F_B
                                    for row in order.values() for a in row)
                        got.append(f"{fmt}: torch loads it" + (f", {pairs} OVERLAP_F_B kept" if pairs else ""))
                    except Exception as e:
                        got.append(f"{fmt}: FAILED: {str(e).splitlines()[0][:160]}")
                manifest.append(f"pptrain {name} P={P} V={V} M={M} | " + "; ".join(got))
    with open(os.path.join(OUT, "MANIFEST.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    print("\n".join(manifest))


if __name__ == "__main__":
    main()
