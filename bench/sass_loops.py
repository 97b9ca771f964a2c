#!/usr/bin/env python3
"""bench/sass_loops.py: the instructions of the tensor-core attention kernels' hot loops, read
from the machine code nvcc makes for a GPU (SASS), so a kernel change can be weighed without a
GPU. No device is needed: nvcc compiles kernels/cuda/flash_attention.cu and cuobjdump disassembles
it.

For each of flash_mma_forward_kernel, flash_mma_dq_kernel and flash_mma_dkdv_kernel at the head
dim asked for, it finds the loop that holds the most HMMA (tensor-core) instructions, the walk
over the other tiles: one trip is one 64-row tile for one warp (for the dk/dv kernel, one of a
tile's two halves of 32 query columns, which the compiler keeps as a loop; where nvcc keeps a
product's own loop rolled, as it did at head dim 128 before 2026-11-27's second session, the
densest loop is that inner one, which the HMMA count shows). It prints the loop's instruction
count, its HMMAs, the instructions per HMMA, and the most frequent opcodes. Away from the
diagonal every instruction of the body runs once a trip, so the count is what a warp issues per
tile; a warp scheduler issues one instruction a cycle, and an m16n8k16 HMMA keeps a Hopper SM
sub-partition's tensor core busy for about 4 cycles, so many more than 4 instructions per HMMA
leave the tensor cores waiting on issue. The kernels are built with FLASH_MMA_SASS_FULL_TILES,
which drops load_tile_async's ragged-tile branch (its zero fill), so the loop holds the code a
whole tile runs, and only that (built for use, a ragged last tile takes that other branch).

  bench/sass_loops.py [--hd 64] [--arch sm_90] [--tree DIR] [--compare DIR2]

--tree picks the source tree (default: this one); --compare DIR2 prints the same for a second
tree (say a `git worktree` of an older commit) beside it. cuobjdump comes with the CUDA toolkit;
where it is missing (a toolkit without it), the PyPI wheel nvidia-cuda-cuobjdump holds it:
`pip download --no-deps nvidia-cuda-cuobjdump`, unzip it, and set CUOBJDUMP to its bin/cuobjdump.
A by-hand tool, not part of the tests.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

KERNELS = ("forward", "dq", "dkdv")


def tool(name, env):
    path = os.environ.get(env) or shutil.which(name) or os.path.join("/usr/local/cuda/bin", name)
    if not os.access(path, os.X_OK):
        sys.exit(f"sass_loops: no {name} (on the PATH, in /usr/local/cuda/bin, or ${env})")
    return path


def sass_of(tree, arch):
    """cuobjdump -sass of flash_attention.cu built from TREE for ARCH."""
    with tempfile.TemporaryDirectory() as work:
        obj = os.path.join(work, "fa.o")
        cmd = [tool("nvcc", "NVCC"), "-DPPTRAIN_HAVE_CUDA", "-DFLASH_MMA_SASS_FULL_TILES", "-I", tree, "-O3",
               "-std=c++17",
               f"--generate-code=arch=compute_{arch[3:]},code={arch}", "-c",
               os.path.join(tree, "kernels/cuda/flash_attention.cu"), "-o", obj]
        subprocess.run(cmd, check=True)
        return subprocess.run([tool("cuobjdump", "CUOBJDUMP"), "-sass", obj], check=True,
                              capture_output=True, text=True).stdout


def functions(sass):
    """{mangled name: [(address, instruction)]}"""
    out, cur = {}, None
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2).strip()))
    return out


def hot_loop(code):
    """The loop (a backward branch's span) densest in HMMAs: the walk over tiles, whose body is
    all products and softmax. Loops around it hold more HMMAs more thinly (the diagonal tile's
    body, peeled off the walk, and the code between); [instruction], and how many of those
    instructions sit in loops inside it (whose trip counts the code alone does not give)."""
    loops = []
    for addr, ins in code:
        m = re.search(r"\bBRA (?:!?U?P\w+, )?0x([0-9a-f]+)", ins)
        if m and int(m.group(1), 16) < addr:
            loops.append((int(m.group(1), 16), addr))
    best, best_density, inner = [], 0.0, 0
    for start, end in loops:
        body = [i for a, i in code if start <= a <= end]
        density = sum("HMMA" in i for i in body) / len(body)
        if density > best_density:
            nested = [(c, d) for c, d in loops if start <= c and d <= end and (c, d) != (start, end)]
            best, best_density = body, density
            inner = sum(1 for a, _ in code if any(c <= a <= d for c, d in nested))
    return best, inner

def opcode(ins):
    return re.sub(r"^@!?U?P\w+\s+", "", ins).split()[0].split(".")[0]


def report(sass, hd):
    rows = {}
    for name, code in functions(sass).items():
        for k in KERNELS:
            if re.match(rf"_Z\d+flash_mma_{k}_kernelILi{hd}E", name):
                body, inner = hot_loop(code)
                rows[k] = (len(body), inner, collections.Counter(opcode(i) for i in body))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hd", type=int, default=64)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--compare")
    a = ap.parse_args()
    trees = [a.tree] + ([a.compare] if a.compare else [])
    results = [report(sass_of(t, a.arch), a.hd) for t in trees]
    print(f"tensor-core attention, head dim {a.hd}, {a.arch}: the hot loop, one trip = one tile for one warp"
          " (dkdv: half a tile)")
    for k in KERNELS:
        for tree, rows in zip(trees, results):
            if k not in rows:
                print(f"  {k:8} {tree}: no such kernel")
                continue
            n, inner, ops = rows[k]
            hmma = ops["HMMA"]
            per = f"{n / hmma:.1f}" if hmma else "-"
            nested = f", {inner} of them in inner loops" if inner else ""
            print(f"  {k:8} {n:5} instructions{nested}, {hmma:3} HMMA, {per:>5} a HMMA   ({tree})")
            print("           " + ", ".join(f"{op} {c}" for op, c in ops.most_common(14)))


if __name__ == "__main__":
    main()
