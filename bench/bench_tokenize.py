# bench/bench_tokenize.py: `pptrain tokenize` against the `tokenizers` package's encoder, MB/s
# on one thread and on all cores, per fixture tokenizer (tests/fixtures/tokenizers). By hand,
# never in CI: the "Tokenizing speed" table of docs/benchmarks.md.
#
# usage: python3 bench/bench_tokenize.py [MB] [PPTRAIN]   (defaults: 100 build/pptrain)
# The corpus is the fortune files (fortune(6) format) repeated to MB megabytes; its documents
# are what pptrain reads from such a file (text between "%" lines, blank edges dropped), and
# both encoders get the same documents. The `tokenizers` side is encode_batch over chunks of
# 4096 documents, one thread with RAYON_NUM_THREADS=1 (set in a child process before the
# package loads), all cores without it. pptrain's time is its own "tokenized ..." line (read,
# encode, write shards). Before timing, the ids of the first 2 MB are compared: pptrain's
# shards must equal the package's ids plus each document's EOS.
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
FAMILIES = ["llama3", "gpt2", "llama2", "mistral"]


def corpus(path, mb):
    d = "/usr/share/games/fortunes"
    parts = [open(os.path.join(d, n), encoding="utf-8", errors="replace").read().rstrip("\n")
             for n in sorted(os.listdir(d)) if "." not in n and os.path.isfile(os.path.join(d, n))]
    unit = ("\n%\n".join(parts) + "\n%\n").encode()
    with open(path, "wb") as f:
        for _ in range(-(-int(mb * 1e6) // len(unit))):   # at least mb megabytes
            f.write(unit)


def documents(text):
    """pptrain's documents of a fortune-format file (engine/data/data_text.c)."""
    docs, cur = [], []
    for line in text.split("\n"):
        line = line[:-1] if line.endswith("\r") else line
        if line == "%":
            docs.append(cur)
            cur = []
        else:
            cur.append("" if line.strip(" \t\r\f\v") == "" else line)
    docs.append(cur)
    out = []
    for lines in docs:
        while lines and lines[0] == "":
            lines = lines[1:]
        while lines and lines[-1] == "":
            lines = lines[:-1]
        if lines:
            out.append("\n".join(lines))
    return out


def package_rate(family, path, threads):
    """MB/s of the tokenizers package over the file's documents, in a child process."""
    code = f"""
import sys, time
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
from bench_tokenize import documents
from tokenizers import Tokenizer
t = Tokenizer.from_file({os.path.join(FIX, family, 'tokenizer.json')!r})
docs = documents(open({path!r}, encoding='utf-8').read())
t0 = time.perf_counter()
for i in range(0, len(docs), 4096):
    t.encode_batch(docs[i:i + 4096])
print(time.perf_counter() - t0)
"""
    env = dict(os.environ)
    if threads == 1:
        env["RAYON_NUM_THREADS"] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return os.path.getsize(path) / 1e6 / float(out.stdout.strip())


def pptrain_rate(binary, family, path, threads, out):
    r = subprocess.run([binary, "tokenize", "--tokenizer", os.path.join(FIX, family), "--out", out,
                        "--threads", str(threads), path], check=True, capture_output=True, text=True)
    return float(re.search(r"\(([0-9.]+) MB/s", r.stdout).group(1))


def verify(binary, family, work):
    from tokenizers import Tokenizer
    small = os.path.join(work, "verify.txt")
    corpus(small, 2)
    subprocess.run([binary, "tokenize", "--tokenizer", os.path.join(FIX, family), "--out", os.path.join(work, "v"),
                    small], check=True, capture_output=True)
    got = np.fromfile(os.path.join(work, "v", "tokens_train_000000.bin"), dtype=np.uint16, offset=1024)
    t = Tokenizer.from_file(os.path.join(FIX, family, "tokenizer.json"))
    eos = t.token_to_id({"llama3": "<|end_of_text|>", "gpt2": "<|endoftext|>"}.get(family, "</s>"))
    want = []
    for e in t.encode_batch(documents(open(small, encoding="utf-8").read())):
        want += e.ids + [eos]   # the fixtures' templates add no EOS, so pptrain appends it
    if len(want) != len(got) or not np.array_equal(np.array(want, dtype=np.uint16), got):
        sys.exit(f"{family}: pptrain's ids differ from the tokenizers package's ({len(got)} vs {len(want)})")
    return len(got)


def main():
    mb = float(sys.argv[1]) if len(sys.argv) > 1 else 100
    binary = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "pptrain")
    cores = os.cpu_count()
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "corpus.txt")
        corpus(path, mb)
        print(f"corpus: {os.path.getsize(path) / 1e6:.1f} MB of fortunes; {cores} cores")
        print("| tokenizer | pptrain 1 thread | tokenizers 1 thread | pptrain all cores | tokenizers all cores |")
        print("|---|---|---|---|---|")
        for fam in FAMILIES:
            n = verify(binary, fam, work)
            row = [pptrain_rate(binary, fam, path, 1, os.path.join(work, "o")), package_rate(fam, path, 1),
                   pptrain_rate(binary, fam, path, cores, os.path.join(work, "o")), package_rate(fam, path, cores)]
            print(f"| {fam} (ids equal on {n} tokens) | " + " | ".join(f"{r:.1f} MB/s" for r in row) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
